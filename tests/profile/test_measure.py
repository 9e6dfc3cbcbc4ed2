"""`ttsperf profile` on the tiny config: a valid ModelProfile that `plan` can read."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.model.config import TINY
from ttsperf.model.info import model_info
from ttsperf.profile.measure import fixed_overhead, profile_model
from ttsperf.profile.schema import Measured, StepPoint, load_profile


@pytest.fixture(scope="module")
def prof(tiny_pipe):
    return profile_model(tiny_pipe, batches=[1, 4], contexts=[32, 256], prompts=[8, 32], repeats=3, warmup=1)


def test_grid_and_measured_values(prof, tiny_pipe):
    assert [(s.batch, s.context) for s in prof.steps] == [(1, 32), (1, 256), (4, 32), (4, 256)]
    assert all(s.seconds.value > 0 and s.seconds.n == 3 and "median" in s.seconds.how for s in prof.steps)
    assert prof.decode_seconds_per_audio_second.value > 0 and prof.vocoder_chunk_seconds.value > 0
    # one prompt of each length, then the engine's batched admission: 4 prompts of the longest
    assert [(p.prompt_tokens, p.rows) for p in prof.prefill] == [(8, 1), (32, 1), (32, 4)]
    assert "prefill of 4 prompts in one call" in prof.prefill[2].seconds.how


def test_the_batched_audio_call_is_timed_at_every_batch(prof, tiny_pipe):
    """plan's engine makes one Decoder+Vocos call for every row emitting at a step: its cost vs
    rows is measured at the grid's batches, on the engine's own audio path."""
    assert [a.rows for a in prof.audio_calls] == [1, 4]
    one, four = (a.seconds.value for a in prof.audio_calls)
    # timed, so only what a busy machine cannot flip: both were measured (which costs more is
    # benchmarks' to say; a loaded CPU has timed one row above four)
    assert one > 0 and four > 0
    assert all(a.seconds.n >= 1 for a in prof.audio_calls)
    assert "batched Decoder + Vocos call over 4 rows" in prof.audio_calls[1].seconds.how


def test_a_profile_names_the_engine_it_measured(prof):
    from ttsperf.revisions import ENGINE_REVISION

    assert prof.engine_revision == ENGINE_REVISION  # plan labels it once the engine changes


def test_weights_and_kv_bytes_are_the_models(prof, tiny_pipe):
    params = sum(p.numel() for p in tiny_pipe.model.parameters())
    assert prof.weights_bytes.value == 4 * params  # fp32
    assert prof.kv_bytes_per_token.value == TINY.gpt.kv_bytes_per_token(4)
    # the checkpoint's counts, as `ttsperf info` gives them, not the folded model's
    assert prof.model.parameters == model_info(TINY)["parameters"]
    # CPU memory = weights + KV slots of the point, so it grows with batch x context
    mem = {(m.batch, m.context): m.peak_bytes.value for m in prof.memory}
    assert mem[(4, 256)] - mem[(1, 256)] == pytest.approx(3 * 257 * prof.kv_bytes_per_token.value)


def test_cli_writes_a_profile_plan_reads(tmp_path):
    out = tmp_path / "p.json"
    res = CliRunner().invoke(app, ["profile", "--synthetic", "--config", "tiny", "--quick", "-o", str(out)])
    assert res.exit_code == 0, res.output
    loaded = load_profile(out)
    assert loaded.model.config == "tiny" and loaded.device.kind == "cpu"
    assert json.loads(out.read_text())["schema"] == "ttsperf.profile"
    # each printed prefill says what it lists: tokens of one prompt, then batches of prompts
    said = " ".join(res.stdout.split())
    one = next(p for p in loaded.prefill if p.rows == 1)
    assert f"prefill, one prompt: {one.prompt_tokens} tokens: " in said
    for p in loaded.prefill:
        if p.rows > 1:
            assert f"prefill, prompts of {p.prompt_tokens} tokens in one call: " in said
            assert f"batch {p.rows}: " in said
    assert " tok " not in said


@pytest.mark.parametrize("flag", ["--batches", "--contexts", "--prompts"])
def test_bad_grid_is_one_line_exit_2(flag):
    res = CliRunner().invoke(app, ["profile", "--synthetic", "--config", "tiny", flag, "1,x"])
    assert res.exit_code == 2 and f"{flag} '1,x'" in res.output


def test_fixed_overhead_is_the_intercept_no_row_adds():
    a, b, c = 0.030, 0.002, 1e-7
    steps = [
        StepPoint(batch=n, context=ctx, seconds=Measured(value=a + b * n + c * n * ctx, unit="s", how="test"))
        for n in (1, 4, 16)
        for ctx in (64, 512, 2048)
    ]
    fixed = fixed_overhead(steps)
    assert fixed.value == pytest.approx(a, rel=1e-9) and "intercept" in fixed.how
    assert fixed_overhead(steps[:3]) is None  # one batch size cannot separate per-row from fixed


def test_profile_reports_its_fixed_overhead(prof):
    assert prof.fixed_step_overhead_s is None or prof.fixed_step_overhead_s.value > 0


def test_profile_measures_the_engines_host_cost_per_row(prof, tiny_pipe):
    host, per_step = prof.host_per_row_step_s, prof.host_per_step_s
    # measured, or both unresolved when this machine's step spread hides the rise (host_line)
    assert (host is None) == (per_step is None)
    if host is not None:
        assert host.value >= 0 and host.unit == "s"
        assert "(engine step - bare decode step) at batch 4 minus at batch 1" in host.how
        assert per_step.value >= 0 and "intercept of the same line" in per_step.how
    one = profile_model(tiny_pipe, batches=[2], contexts=[32], prompts=[8], repeats=2, warmup=1)
    assert one.host_per_row_step_s is None  # one batch size cannot separate per-row from per-step
    assert one.host_per_step_s is None


def test_a_host_line_the_step_spread_hides_is_not_reported():
    from ttsperf.profile.measure import host_line

    # tiny at batch 1 and 256: 386 and 4,619 us beyond the bare step, a 1 ms spread: resolved
    slope, per_step = host_line({1: 386e-6, 256: 4619e-6}, spread=1e-3)
    assert slope == pytest.approx((4619 - 386) * 1e-6 / 255) and per_step == pytest.approx(386e-6 - slope)
    # the full model at batch 1 and 16: -5.3 and +18.1 ms, within a 30 ms spread: drift, no number
    assert host_line({1: -5.3e-3, 16: 18.1e-3}, spread=30e-3) is None
    # a falling line is no negative cost
    assert host_line({1: 2e-3, 64: 1e-3}, spread=1e-4) == (0.0, 2e-3)
