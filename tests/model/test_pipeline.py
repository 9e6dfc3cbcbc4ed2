"""Text -> WAV through the whole model (tiny config: same code path as chattts)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from ttsperf.audio import decode_wav
from ttsperf.cli.main import app
from ttsperf.model.assets import make_random_assets
from ttsperf.model.config import TINY
from ttsperf.model.length import SpeechRate
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import SamplingParams

TEXT = "你好，这是一段用于压测的文本。"


@pytest.fixture(scope="module")
def synthetic() -> Pipeline:
    return Pipeline.synthetic_model(TINY, seed=0)


@pytest.fixture(scope="module")
def asset_dir(tmp_path_factory):
    return make_random_assets(tmp_path_factory.mktemp("a") / "asset", "tiny", seed=0)


def test_synthetic_length_comes_from_speech_rate(synthetic):
    result = synthetic.synthesize(TEXT)
    assert result.length_source == "speech-rate"
    assert result.steps == SpeechRate().steps(TEXT)
    # center-padded ISTFT over 2 frames per step: 512 samples per step less half a hop
    assert len(result.wav) == 512 * result.steps - 256
    assert result.audio_seconds == pytest.approx(result.steps / 46.875, abs=0.011)
    rms = float(np.sqrt(np.mean(result.wav**2)))
    assert 1e-3 < rms and np.abs(result.wav).max() < 1.0  # audible, not clipped
    assert result.rtf == pytest.approx(result.wall_seconds / result.audio_seconds)


def test_seeded_sampling_is_reproducible_and_seed_dependent(synthetic):
    a, b = (synthetic.generate([TEXT], SamplingParams(seed=5))[0].codes for _ in range(2))
    c = synthetic.generate([TEXT], SamplingParams(seed=6))[0].codes
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_dvae_path_gives_the_same_length(synthetic):
    gen = synthetic.generate([TEXT], fixed_steps=[30])[0]
    assert (
        synthetic.mel(gen, use_decoder=False).shape
        == synthetic.mel(gen, use_decoder=True).shape
        == (1, 100, 60)
    )


def test_eos_ends_a_sequence(asset_dir):
    pipe = Pipeline.from_assets(TINY, asset_dir)
    eos = TINY.gpt.eos_token
    with torch.no_grad():  # make EOS the certain choice of codebook 2 from the 4th step on
        gen = pipe.generate([TEXT], SamplingParams(top_k=1), max_new_tokens=12)[0]
        # random weights: no EOS, the cap holds and says so
        assert gen.length_source == "max-new-tokens" and gen.steps == 12
        head = pipe.model.embed.head_code[2]
        head.weight[eos] = 50 * pipe.model.gpt.norm.weight.sign() * gen.hidden[3].sign()
    gen2 = pipe.generate([TEXT], SamplingParams(top_k=1), max_new_tokens=12)[0]
    assert gen2.length_source == "eos"
    assert gen2.steps < 12
    assert not (gen2.codes == eos).any()


def test_batch_rows_keep_their_own_lengths(synthetic):
    texts = [TEXT, "Hello there, how are you today?"]
    gens = synthetic.generate(texts)
    assert [g.steps for g in gens] == [SpeechRate().steps(t) for t in texts]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_half_precisions_run(dtype):
    pipe = Pipeline.synthetic_model(TINY, seed=0, dtype=dtype)
    result = pipe.synthesize(TEXT)
    assert np.isfinite(result.wav).all() and len(result.wav) == 512 * result.steps - 256


def test_synth_cli_writes_a_valid_wav(tmp_path):
    out = tmp_path / "x.wav"
    res = CliRunner().invoke(
        app, ["synth", TEXT, "-o", str(out), "--synthetic", "--config", "tiny", "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    samples, rate = decode_wav(out.read_bytes())
    assert rate == 24000 and len(samples) == 512 * report["steps"] - 256
    assert report["length_source"] == "speech-rate"
    assert report["audio_seconds"] == pytest.approx(len(samples) / 24000, abs=1e-3)
    assert report["rtf"] == pytest.approx(report["wall_seconds"] / report["audio_seconds"], rel=1e-2)


@pytest.mark.slow
def test_synth_cli_from_an_asset_dir(asset_dir, tmp_path):
    out = tmp_path / "y.wav"
    # no --config: the asset dir's gpt/config.json says tiny
    args = ["synth", TEXT, "-o", str(out), "--assets", str(asset_dir), "--json"]
    res = CliRunner().invoke(app, [*args, "--max-new-tokens", "15"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["config"] == "tiny"
    assert report["length_source"] == "max-new-tokens" and report["steps"] == 15  # random weights: no EOS
    fixed = CliRunner().invoke(app, [*args, "--fixed-length"])
    assert json.loads(fixed.output)["length_source"] == "speech-rate"
    capped = CliRunner().invoke(app, [*args, "--fixed-length", "--max-new-tokens", "5"])
    assert json.loads(capped.output)["length_source"] == "max-new-tokens"  # the speech rate wanted more
    # an explicit --config that the asset dir contradicts stays a clear error
    wrong = CliRunner().invoke(app, [*args, "--config", "chattts"])
    assert wrong.exit_code == 2 and "hidden_size = 64, expected 768 for --config chattts" in wrong.output


def test_make_random_cli_then_load(tmp_path):
    res = CliRunner().invoke(
        app, ["assets", "make-random", str(tmp_path / "a"), "--config", "tiny", "--seed", "2"]
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "a" / "tokenizer" / "tokenizer.json").is_file()
    Pipeline.from_assets(TINY, tmp_path / "a")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["synth", "   ", "--synthetic"], "TEXT is empty"),
        (["synth", "hi", "--synthetic", "--assets", "x"], "exactly one of --assets DIR or --synthetic"),
        (["synth", "hi"], "exactly one of --assets DIR or --synthetic"),
        (["synth", "hi", "--synthetic", "--config", "tiny", "--dtype", "fp8"], "--dtype 'fp8'"),
        (["synth", "hi", "--synthetic", "--config", "tiny", "--device", "cuda"], "no CUDA device"),
        (["synth", "hi", "--synthetic", "--config", "tiny", "--device", "toaster"], "--device 'toaster'"),
        (["synth", "hi", "--assets", "/nonexistent/asset", "--config", "tiny"], "/nonexistent/asset"),
    ],
)
def test_synth_bad_input_is_one_line_and_exit_2(args, fragment):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert "Traceback" not in res.output
