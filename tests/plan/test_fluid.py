"""The fluid limit: where a capacity search starts (plan/fluid.py), checked against the search."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ttsperf import facts as F
from ttsperf.plan.capacity import find_capacity
from ttsperf.plan.fluid import START_SHARE, budget, fluid_start, fluid_streams, step_cost
from ttsperf.plan.memory import Workload
from ttsperf.plan.scenarios import SCENARIOS
from ttsperf.plan.search import FLUID_STEP
from ttsperf.plan.simulate import EngineModel, simulate
from ttsperf.plan.steptime import default_model

KV16 = F.kv_bytes_per_token("fp16")
SLO = SCENARIOS["realtime"].slo


def engine(
    bandwidth_gbs: float, peak_tflops: float, t_fixed: float = 0.003, max_batch: int = 256
) -> EngineModel:
    sm = replace(default_model("fp16", KV16, bandwidth_gbs, peak_tflops), t_fixed=t_fixed)
    return EngineModel.of(sm, max_batch, Workload())


def test_a_step_costs_more_with_more_rows_and_the_budget_is_monotone():
    e = engine(900, 150)
    costs = [step_cost(e, b) for b in (1, 8, 64, 256)]
    assert costs == sorted(costs) and costs[0] < costs[-1]
    within = [budget(e, SLO, b) for b in range(1, 257)]
    assert within == sorted(within, reverse=True)  # True up to a batch, False beyond it


def test_fluid_streams_fall_as_the_overhead_grows_and_vanish_when_one_row_misses():
    streams = [fluid_streams(engine(900, 150, t), SLO, 0.0) for t in (0.001, 0.003, 0.006, 0.009)]
    assert all(a >= b for a, b in zip(streams, streams[1:], strict=False)), streams
    # a step slower than real time (1/46.875 s) cannot keep even one listener from stalling
    assert fluid_streams(engine(900, 150, 0.05), SLO, 0.0) is None
    assert fluid_start(engine(900, 150, 0.05), SLO, 0.0) is None


def test_listeners_who_think_longer_are_more_streams_per_row():
    e = engine(900, 150)
    assert fluid_streams(e, SLO, 4.0) > fluid_streams(e, SLO, 0.0) > 0
    assert fluid_streams(e, SLO, None) <= e.max_batch  # back to back: a stream is a row


@pytest.mark.parametrize(("bandwidth", "peak"), [(320, 65), (936, 71), (3350, 990)])  # T4, RTX 3090, H100
def test_a_search_from_the_fluid_start_finds_what_a_search_from_scratch_finds(bandwidth, peak):
    # the start only saves runs (docs/PLANNING.md): from it, in FLUID_STEP moves, the search ends
    # where doubling from 8 streams ends, within the search's resolution
    e = engine(bandwidth, peak)
    runs: dict[str, int] = {}

    def sim(name):
        def run(load):
            runs[name] = runs.get(name, 0) + 1
            return simulate(e, load, 250)

        return run

    start = fluid_start(e, SLO, 0.0)
    assert start is not None and START_SHARE < 1
    scratch = find_capacity(e.max_batch, "streams", SLO, sim("scratch"), None, 0.05).value
    fluid = find_capacity(
        e.max_batch, "streams", SLO, sim("fluid"), start, 0.05, FLUID_STEP, FLUID_STEP
    ).value
    assert scratch > 0 and abs(fluid - scratch) <= 0.05 * max(fluid, scratch) + 1, (start, scratch, fluid)
