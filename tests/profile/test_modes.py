"""`ttsperf profile --modes`: every engine mode the device runs, in one profile plan reads.

The end-to-end run is the real CLI in a subprocess, on the tiny config on this CPU: the dry run of
the command a GPU session runs with --device cuda (docs/PERFORMANCE.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from ttsperf.errors import UserError
from ttsperf.plan.predict import predict
from ttsperf.profile.modes import NEEDS_CUDA, per_op_host
from ttsperf.profile.schema import load_profile
from ttsperf.profile.settings import parse_modes


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """The prepared GPU command with --device cpu --config tiny (its host profile left out here:
    tests/profile/test_host.py measures that; the command itself runs it)."""
    out = tmp_path_factory.mktemp("modes") / "prof.json"
    cmd = [
        sys.executable, "-m", "ttsperf", "profile", "--synthetic", "--device", "cpu", "--config", "tiny",
        "--quick", "--modes", "all", "--no-modes-host", "-o", str(out),
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200"}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    return out, res.stdout


def test_the_dry_run_measures_eager_and_compile_and_says_graphs_need_cuda(dry_run):
    out, printed = dry_run
    prof = load_profile(out)
    assert prof.version == 3 and prof.measured_modes() == ["eager", "compile"]
    assert prof.modes["cuda-graphs"].skipped == NEEDS_CUDA
    assert "skipped: needs CUDA" in printed
    for name in ("eager", "compile"):
        m = prof.modes[name]
        assert [s.batch for s in m.steps] == [1, 4] and all(s.seconds.value > 0 for s in m.steps)
        assert [a.rows for a in m.audio_calls] == [1, 4] and all(a.seconds.value > 0 for a in m.audio_calls)
        assert {(p.rows, p.prompt_tokens) for p in m.prefill} == {(1, 16), (1, 64), (4, 64)}
        assert all("eager (the engine does not compile its prefill" in p.seconds.how for p in m.prefill)
    assert prof.modes["compile"].setup_seconds > 0 and prof.modes["eager"].setup_seconds is None
    # on a CPU the op runs on the CPU: the factor is 1 by definition, and says so
    assert prof.per_op_host.factor == 1.0 and "by definition" in prof.per_op_host.how
    assert "factor 1.00 (a CPU: 1 by definition)" in printed
    # the single-mode profile is still all there beside the modes
    assert prof.steps and prof.memory and prof.prefill and prof.audio_calls


def test_plan_predicts_each_measured_mode_of_the_dry_run_and_refuses_one_not_measured(dry_run):
    out, _ = dry_run
    eager, compiled = (
        predict(profile=[str(out)], streams=2, requests=20, max_batch=4, mode=m) for m in ("eager", "compile")
    )
    assert "compile as measured there" in compiled.basis
    assert eager.prediction != compiled.prediction
    with pytest.raises(UserError, match="--mode cuda-graphs: .* measured eager, compile; predict it"):
        predict(profile=[str(out)], streams=2, requests=20, max_batch=4, mode="cuda-graphs")


def test_modes_names_every_mode_or_a_list():
    assert parse_modes("all") == ["eager", "compile", "cuda-graphs"]
    assert parse_modes("cuda-graphs, eager") == ["eager", "cuda-graphs"]
    with pytest.raises(UserError, match="--modes 'graphs': expected all or any of eager,compile,cuda-graphs"):
        parse_modes("graphs")


def test_the_per_op_host_cost_is_one_on_a_cpu():
    op = per_op_host(torch.device("cpu"), ops=200, rounds=3)
    assert op.factor == 1.0 and op.device_op == op.cpu_op and 0 < op.cpu_op.value < 1e-3


def test_cuda_graphs_measures_the_engines_graphed_prefill_at_each_point(tiny_pipe):
    """Through the engine's own buckets (the padded call run eagerly on a CPU): each point's rows
    and prompt tokens, timed, in the bucket it pads to."""
    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.profile.modes import graphed_prefill
    from ttsperf.profile.schema import Measured, PrefillPoint

    engine = Engine(tiny_pipe, EngineConfig(max_batch=8, graphs_without_capture=True))
    eager = Measured(value=0.01, unit="s", how="eager", spread=0.0, n=3)
    points = [
        PrefillPoint(prompt_tokens=16, seconds=eager),
        PrefillPoint(prompt_tokens=64, rows=3, seconds=eager),
    ]
    got = graphed_prefill(engine, points, 3, lambda _msg: None)
    assert [(p.rows, p.prompt_tokens) for p in got] == [(1, 16), (3, 64)]
    assert all(p.seconds.value > 0 and "prefill in cuda-graphs" in p.seconds.how for p in got)
    prefill = engine.runner.graphed_prefill
    assert sorted(prefill.graphs) == [(1, 32), (4, 64)] and prefill.eager_calls == 0
