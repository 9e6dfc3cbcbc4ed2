"""`ttsperf profile` on the tiny config: a valid ModelProfile that `plan` can read."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.model.config import TINY
from ttsperf.profile.measure import profile_model
from ttsperf.profile.schema import load_profile


@pytest.fixture(scope="module")
def prof(tiny_pipe):
    return profile_model(tiny_pipe, batches=[1, 4], contexts=[32, 256], prompts=[8, 32], repeats=3, warmup=1)


def test_grid_and_measured_values(prof, tiny_pipe):
    assert [(s.batch, s.context) for s in prof.steps] == [(1, 32), (1, 256), (4, 32), (4, 256)]
    assert all(s.seconds.value > 0 and s.seconds.n == 3 and "median" in s.seconds.how for s in prof.steps)
    assert prof.decode_seconds_per_audio_second.value > 0 and prof.vocoder_chunk_seconds.value > 0
    assert [p.prompt_tokens for p in prof.prefill] == [8, 32]


def test_weights_and_kv_bytes_are_the_models(prof, tiny_pipe):
    params = sum(p.numel() for p in tiny_pipe.model.parameters())
    assert prof.weights_bytes.value == 4 * params  # fp32
    assert prof.kv_bytes_per_token.value == TINY.gpt.kv_bytes_per_token(4)
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


@pytest.mark.parametrize("flag", ["--batches", "--contexts", "--prompts"])
def test_bad_grid_is_one_line_exit_2(flag):
    res = CliRunner().invoke(app, ["profile", "--synthetic", "--config", "tiny", flag, "1,x"])
    assert res.exit_code == 2 and f"{flag} '1,x'" in res.output
