"""A card's row: GPUs for the target, latency at the load per GPU, price and power, each with
its basis; built directly from the search's result."""

from __future__ import annotations

import pytest

from ttsperf.plan.api import make_plan
from ttsperf.plan.cards import build_cards
from ttsperf.plan.catalog import load_catalog
from ttsperf.plan.memory import Workload
from ttsperf.plan.overhead import default_modes
from ttsperf.plan.rows import LATENCY_KEYS, latency, per_gpu, plan_row, price, serve_flags
from ttsperf.plan.scenarios import SCENARIOS
from ttsperf.plan.search import Candidate, PlanContext, Simulations
from ttsperf.plan.simulate import Load, SimResult

MODES = default_modes()


def test_per_gpu_spreads_the_target_over_the_fewest_gpus():
    assert per_gpu(Load("streams", 100), 30) == (Load("streams", 25), 4)
    assert per_gpu(Load("streams", 10), 30) == (Load("streams", 10), 1)
    load, gpus = per_gpu(Load("rate", 10.0), 2.5)
    assert gpus == 4 and load == Load("rate", 2.5)  # exactly at capacity: no extra GPU from rounding
    assert per_gpu(Load("streams", 5), float("inf"))[1] == 1  # an unbounded card still needs one


def test_latency_names_a_simulation_as_the_row_does():
    r = SimResult(n=1000, mean_s=1.0, e2e_p50=1.0, e2e_p99=2.0, ttfa_p50=0.1, ttfa_p99=0.2, rtf_p99=0.5,
                  underrun_p99=0.0, throughput_rps=3.0, window_rps=3.0, audio_throughput=24.0, mean_batch=4.0,
                  mean_step_s=0.005, busy_fraction=0.5, p99_resolved=True)  # fmt: skip
    out = latency(r)
    assert tuple(out) == LATENCY_KEYS
    assert (out["step_ms"], out["p50_s"], out["p99_s"], out["ttfa_p99_s"]) == (5.0, 1.0, 2.0, 0.2)


def test_serve_flags_name_the_mode_batch_limits_and_first_chunk():
    c = Candidate(MODES["cuda-graphs"], 16, 0.002, 0.01, 128, "memory")
    assert serve_flags(c, "bf16", "cuda", (96, 480)) == (
        "ttsperf serve --device cuda --dtype bf16 --cuda-graphs --max-batch 128 --max-queue 128 "
        "--max-prompt-tokens 96 --max-new-tokens 480 --first-chunk-steps 16"
    )
    eager = Candidate(MODES["eager"], 24, 0.01, 0.01, 8, "max batch")
    assert serve_flags(eager, "fp32", "cpu", (64, 480)).split()[-10:] == [
        "--max-batch",
        "8",
        "--max-queue",
        "64",
        "--max-prompt-tokens",
        "64",
        "--max-new-tokens",
        "480",
        "--first-chunk-steps",
        "24",
    ]  # a small batch keeps the queue's floor of 64 (facts.MIN_QUEUE)


def test_price_is_the_catalogs_cheapest_or_none():
    cat = load_catalog(only=["RTX 4090"])
    card = build_cards(cat, [], "fp16")[0]
    p = price(card, PlanContext(cat, Workload()), None)
    assert p.per_gpu_hour == cat.prices["RTX 4090"].per_gpu_hour and p.basis.kind == "sourced"
    cat.prices.clear()
    assert price(card, PlanContext(cat, Workload()), None).per_gpu_hour is None


def test_plan_row_is_consistent_with_its_own_numbers():
    cat = load_catalog(only=["RTX 4090"])
    card = build_cards(cat, [], "fp16")[0]
    ctx = PlanContext(cat, Workload(), n_requests=200, modes=("cuda-graphs",))
    r = plan_row(card, SCENARIOS["realtime"], Load("streams", 100), ctx, Simulations(0))
    assert r.fits and r.meets_slo and r.settings.mode == "cuda-graphs"
    assert r.gpus_needed == r.replicas == -(-100 // r.max_streams) and r.machines == 1
    assert r.usd_per_hour == pytest.approx(r.gpus_needed * r.usd_per_gpu_hour)
    assert r.max_streams_range[0] <= r.max_streams <= r.max_streams_range[1]
    assert r.ttfa_p99_s <= 0.3 and r.p50_s <= r.p99_s
    assert {"p99_s", "max_streams", "gpus_needed", "usd_per_gpu_hour", "step.t_fixed"} <= set(r.basis)
    assert r.basis["max_streams"].kind == "projected" and r.basis["usd_per_gpu_hour"].kind == "sourced"


def test_a_card_without_the_dtype_gets_a_row_that_does_not_fit():
    cat = load_catalog(only=["T4"])
    card = build_cards(cat, [], "bf16")[0]  # T4 lists no bf16
    r = plan_row(
        card, SCENARIOS["realtime"], Load("streams", 100), PlanContext(cat, Workload()), Simulations(0)
    )
    assert not r.fits and not r.meets_slo and r.gpus_needed is None and r.settings is None
    assert r.usd_per_gpu_hour is not None and "bf16" in r.note


def test_more_load_needs_more_gpus_and_costs_scale():
    small = make_plan(gpus="RTX 4090", scenario="realtime", streams=10, requests=200).scenarios[0].rows[0]
    big = make_plan(gpus="RTX 4090", scenario="realtime", streams=100, requests=200).scenarios[0].rows[0]
    assert big.max_streams == small.max_streams  # capacity per GPU does not depend on the target
    assert big.gpus_needed == -(-100 // big.max_streams)
    assert big.usd_per_hour == pytest.approx(big.gpus_needed * big.usd_per_gpu_hour)


def test_rate_target_with_an_slo_reports_requests_per_second():
    row = make_plan(gpus="RTX 4090", scenario="realtime", rate=2.0, step_overhead="3ms", requests=200)
    r = row.scenarios[0].rows[0]
    assert r.max_streams is None and r.max_rate_rps and r.max_rate_rps > 2.0
    assert r.gpus_needed == 1 and r.ttfa_p99_s <= 0.3
