"""`profile --max-batch-search`: the CUDA OOM path (injected), the CPU budget path
(deterministic probes, and the tiny model for real) and the profile field it writes."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.profile.maxbatch import budget_search, oom_bisection
from ttsperf.profile.schema import load_profile


def _oom_above(limit, calls):
    def probe(b):
        calls.append(b)
        if b > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {b} rows")
        return 1000 + 10 * b

    return probe


def test_oom_bisection_catches_oom_frees_and_shrinks():
    calls, freed = [], []
    batch, limit, peak, probes = oom_bisection(_oom_above(37, calls), 4096, lambda: freed.append(1))
    assert (batch, limit, peak) == (37, "oom", 1370)
    assert calls[:7] == [1, 2, 4, 8, 16, 32, 64]  # doubling, then bisection between 32 and 64
    assert len(freed) == sum(1 for _, ok in probes if not ok) >= 1  # freed after every OOM
    assert all(ok == (b <= 37) for b, ok in probes)


def test_oom_bisection_knows_a_runtime_error_saying_out_of_memory():
    def probe(b):
        if b > 5:
            raise RuntimeError("CUDA error: out of memory")
        return b

    assert oom_bisection(probe, 64, lambda: None)[:2] == (5, "oom")


def test_oom_bisection_lets_other_errors_through():
    def probe(b):
        raise ValueError("a bug, not memory")

    with pytest.raises(ValueError, match="a bug"):
        oom_bisection(probe, 64, lambda: None)


def test_oom_bisection_with_a_budget_and_a_cap():
    assert oom_bisection(lambda b: 100 * b, 4096, lambda: None, budget=2550)[:2] == (25, "budget")
    assert oom_bisection(lambda b: 100 * b, 16, lambda: None)[:2] == (16, "cap")
    assert oom_bisection(_oom_above(0, []), 16, lambda: None)[:3] == (0, "oom", None)


def test_budget_search_on_a_linear_probe_is_exact():
    batch, limit, peak, probes, how = budget_search(lambda b: 1000 + 10 * b, 1505, 4096, row_floor=1)
    assert (batch, limit, peak) == (50, "budget", 1500)
    assert [b for b, _ in probes] == [1, 8, 50]  # the line's two points, then the answer run for real
    assert "per row" in how


def test_budget_search_bisects_on_real_runs_when_the_line_is_optimistic():
    def convex(b):  # per-row cost grows with batch: the line through 1 and 8 is optimistic
        return 1000 + 10 * b + b * b // 10

    batch, limit, peak, probes, how = budget_search(convex, 3000, 4096, row_floor=1)
    assert peak == convex(batch) <= 3000 and limit == "budget"
    assert any(not ok for _, ok in probes) and "bisected on real runs" in how
    assert 95 <= batch <= 100  # the true answer is 100; bisection stops within 5%


def test_budget_search_floors_per_row_at_the_kv_bytes_and_stops_at_zero():
    # a flat RSS (allocations not visible) still pays each row's KV bytes
    batch, *_ = budget_search(lambda b: 1000, 2000, 4096, row_floor=100)
    assert batch == 11  # 900 fixed + 100 per row
    assert budget_search(lambda b: 5000, 2000, 4096, row_floor=1)[:3] == (0, "budget", None)
    assert budget_search(lambda b: 1000 + b, 10**9, 16, row_floor=1)[:2] == (16, "cap")


@pytest.mark.slow
def test_cli_cpu_budget_search_on_the_tiny_model(tmp_path):
    out = tmp_path / "p.json"
    args = ["profile", "--synthetic", "--config", "tiny", "--quick"]  # contexts 64, 512
    res = CliRunner().invoke(
        app, [*args, "--max-batch-search", "--memory-budget", "64", "--max-batch-cap", "32", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    prof = load_profile(out)
    assert prof.version == 3 and [m.context for m in prof.max_batch] == [64, 512]
    for m in prof.max_batch:  # 64 GiB holds 32 tiny rows: the cap stops it, run for real
        assert (m.max_batch, m.limit) == (32, "cap") and m.probes[-1] == (32, True)
        assert m.bytes_at_max.value <= m.budget_bytes == 64 * 2**30 and "peak RSS" in m.method
    assert "largest batch that fits" in res.output

    res = CliRunner().invoke(app, [*args, "--max-batch-search", "--memory-budget", "0.01", "--json"])
    assert res.exit_code == 0, res.output
    points = json.loads(res.stdout)["max_batch"]
    assert all(p["max_batch"] == 0 and p["limit"] == "budget" for p in points)  # the process alone is over


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-batch-search", "--memory-budget", "0"], "--memory-budget 0: expected a positive number"),
        (["--memory-budget", "4"], "--memory-budget: applies to --max-batch-search only"),
        (["--max-batch-cap", "8"], "--max-batch-cap: applies to --max-batch-search only"),
        (["--max-batch-search", "--optimizations"], "--max-batch-search: not with --optimizations"),
    ],
)
def test_bad_search_flags_are_one_line_exit_2(extra, message):
    res = CliRunner().invoke(app, ["profile", "--synthetic", "--config", "tiny", *extra])
    assert res.exit_code == 2 and message in res.output
