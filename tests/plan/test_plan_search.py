"""The settings search: modes, the first chunk, what binds, the overhead's range and what-ifs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.plan.api import make_plan
from ttsperf.plan.capacity import Capacity
from ttsperf.plan.cards import build_cards
from ttsperf.plan.catalog import load_catalog
from ttsperf.plan.memory import Workload
from ttsperf.plan.overhead import default_modes
from ttsperf.plan.scenarios import SCENARIOS
from ttsperf.plan.search import (
    Candidate,
    PlanContext,
    Searched,
    Simulations,
    binding,
    engine_at,
    vocoder_fixed,
    what_if_mode,
)
from ttsperf.plan.simulate import Load, simulate
from ttsperf.plan.steptime import DEFAULT_T_FIXED_S

MODES = default_modes()  # as the shipped host profile prices them

runner = CliRunner()


def _card(name: str = "RTX 4090"):
    return build_cards(load_catalog(only=[name]), [], "fp16")[0]


def _candidate(mode=MODES["eager"], fc: int = 24, batch: int = 64) -> Candidate:
    return Candidate(mode, fc, mode.t_fixed, mode.audio.centre, batch, "memory")


def test_engine_at_a_setting_copies_the_step_at_its_overheads():
    card, ctx = _card(), PlanContext(load_catalog(only=["RTX 4090"]), Workload())
    c = _candidate(MODES["cuda-graphs"], fc=16)
    e = engine_at(card, c, ctx)
    graphs = MODES["cuda-graphs"]
    assert e.step.t_fixed == graphs.t_fixed and e.step.vocoder_fixed == graphs.audio.centre
    assert e.workload.first_chunk_steps == 16 and e.max_batch == 64
    assert card.step.t_fixed == DEFAULT_T_FIXED_S and card.step.vocoder_fixed is None  # the card untouched
    assert e.step.basis["t_fixed"].how.startswith(
        f"{graphs.t_fixed * 1e3:.3g} ms per step, cuda-graphs: host profile"
    )


def test_what_if_overheads():
    ctx = PlanContext(load_catalog(only=["RTX 4090"]), Workload(), step_overhead=0.003)
    mode = what_if_mode(0.003)
    assert (mode.name, mode.t_fixed, mode.low, mode.high) == ("what-if", 0.003, 0.003, 0.003)
    assert vocoder_fixed(mode, "centre", ctx) is None  # the call follows the what-if
    compiled = MODES["compile"].audio  # the call runs in the step's mode: its own cost, same end
    assert [vocoder_fixed(MODES["compile"], e, ctx) for e in ("low", "high")] == [compiled.low, compiled.high]
    ctx.vocoder_overhead = 0.001
    assert vocoder_fixed(mode, "centre", ctx) == 0.001


def _searched(cap: Capacity, batch: int = 64) -> Searched:
    card, ctx = _card(), PlanContext(load_catalog(only=["RTX 4090"]), Workload())
    c = _candidate(batch=batch)
    e = engine_at(card, c, ctx)
    return Searched(c, e, cap, Simulations(0).simulator(e, 100))


def test_binding_names_the_first_limit_the_least_missing_load_breaks():
    s = _searched(Capacity(0, None, None))
    r = s.sim(Load("streams", 4))
    realtime = SCENARIOS["realtime"]
    tight = dict(realtime.slo, ttfa_p99=r.ttfa_p99 / 2)
    sc = type(realtime)(**{**realtime.__dict__, "slo": tight})
    s.cap = Capacity(3, None, None, r, Load("streams", 4))
    name, how = binding(s, sc, "streams")
    assert name in ("ttfa", "host") and how.startswith(f"ttfa_p99 {r.ttfa_p99:.3g} > ")
    assert "at 4 streams" in how
    s.cap = Capacity(3, None, None)  # no load was seen to miss: nothing to name
    assert binding(s, sc, "streams") == (None, "")
    s.cap = Capacity(64, None, None)  # the batch is full
    assert binding(s, sc, "streams")[0] == "memory"
    assert binding(s, SCENARIOS["offline"], "rate")[0] == "throughput"


def test_simulations_are_cached_per_setting_and_load():
    s = _searched(Capacity(0, None, None))
    a = s.sim(Load("streams", 2))
    assert s.sim(Load("streams", 2)) is a
    assert a == simulate(s.engine, Load("streams", 2), n_requests=100, seed=0)


@pytest.mark.slow
def test_less_overhead_never_plans_fewer_streams_and_dominated_modes_are_skipped():
    by_mode = {}
    for mode in ("eager", "compile", "cuda-graphs"):
        row = make_plan(gpus="RTX 4090", scenario="realtime", requests=200, mode=mode).scenarios[0].rows[0]
        by_mode[mode] = row
        assert row.settings.mode == mode
    assert (
        by_mode["eager"].max_streams <= by_mode["compile"].max_streams <= by_mode["cuda-graphs"].max_streams
    )
    best = make_plan(gpus="RTX 4090", scenario="realtime", requests=200).scenarios[0].rows[0]
    assert best.max_streams == max(r.max_streams for r in by_mode.values())
    # graphs' capacity stopped below its 256-row batch, so eager and compile cannot beat it
    assert "compile, eager not searched" in best.settings.searched
    # eager at the official first chunk is host-bound at 10 ms per step: the binding says so and
    # names the TTFA limit it hits
    eager24 = make_plan(
        gpus="RTX 4090", scenario="realtime", requests=200, mode="eager", first_chunk_steps=24
    ).scenarios[0]
    assert eager24.rows[0].binding == "host" and "ttfa_p99" in eager24.rows[0].binding_how


@pytest.mark.slow
def test_first_chunk_is_searched_unless_given_and_moves_against_what_binds():
    searched = make_plan(gpus="RTX 4090", scenario="realtime", requests=200, mode="eager").scenarios[0]
    row = searched.rows[0]
    fixed = make_plan(
        gpus="RTX 4090", scenario="realtime", requests=200, mode="eager", first_chunk_steps=24
    ).scenarios[0]
    # TTFA binds eager at 24 steps, so the search tries smaller first chunks and keeps a better one
    assert fixed.rows[0].settings.first_chunk_steps == 24
    assert "first chunk 16" in row.settings.searched
    assert row.max_streams >= fixed.rows[0].max_streams
    assert "; first chunk" not in fixed.rows[0].settings.searched


def test_step_overhead_what_if_replaces_the_modes():
    row = (
        make_plan(gpus="RTX 4090", scenario="realtime", requests=200, step_overhead="3ms")
        .scenarios[0]
        .rows[0]
    )
    assert row.settings.mode == "what-if" and row.settings.step_overhead_s == 0.003
    assert row.max_streams_range is None  # a what-if has no sourced range
    assert "--cuda-graphs" not in row.settings.serve_flags


def test_bad_mode_is_named():
    r = runner.invoke(app, ["plan", "--mode", "turbo", "--gpus", "T4"])
    assert r.exit_code == 2 and "--mode" in r.output and "turbo" in r.output and "cuda-graphs" in r.output


def test_step_overhead_what_if_raises_capacity():
    base = make_plan(gpus="RTX 4090", scenario="realtime", requests=200, mode="eager").scenarios[0].rows[0]
    fast = (
        make_plan(gpus="RTX 4090", scenario="realtime", step_overhead="3ms", requests=200)
        .scenarios[0]
        .rows[0]
    )
    assert fast.max_streams > 3 * base.max_streams  # 3 ms a step and a call against eager 8.9 and 7.2
    assert "--step-overhead" in fast.basis["step_ms"].how


def test_vocoder_what_if_and_the_retired_engine():
    kw = dict(gpus="RTX 4090", scenario="offline", requests=200)
    built = make_plan(**kw).scenarios[0].rows[0]
    # the built graphed call is ~0.8 ms fixed (223 nodes at the H200's measured cost per kernel)
    cheap_vocoder = make_plan(vocoder_overhead="0.1ms", **kw).scenarios[0].rows[0]
    assert cheap_vocoder.max_rate_rps > built.max_rate_rps
    assert "--vocoder-overhead" in cheap_vocoder.basis["step.vocoder"].how
    r = runner.invoke(app, ["plan", "--engine", "v1", "--gpus", "T4"])
    assert r.exit_code == 2 and "--engine: expected one of ttsperf, found 'v1'" in r.output
