"""Shapes, parameter counts and audio rates of the ChatTTS model."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.model.config import CHATTTS, TINY
from ttsperf.model.info import model_info

# docs/reference/chattts.md, counted from the official package's modules with numel()
OFFICIAL_COUNTS = {
    "gpt": 188_775_168,
    "embed": 36_399_234,
    "decoder": 25_920_640,
    "dvae": 15_031_048,
    "vocos": 13_531_650,
    "total": 279_657_740,
}


def test_parameter_counts_match_the_official_modules():
    assert model_info(CHATTTS)["parameters"] == OFFICIAL_COUNTS


def test_rates_derive_from_sample_rate_and_hop():
    # 24 kHz / hop 256 = 93.75 mel frames/s; 2 frames per GPT step
    assert CHATTTS.sample_rate / CHATTTS.vocos.hop_length == 93.75
    assert CHATTTS.steps_per_second == 46.875
    assert CHATTTS.samples_per_step == 512
    # tiny keeps the audio rates so rate-based tests hold for both
    assert TINY.steps_per_second == CHATTTS.steps_per_second


def test_kv_cache_bytes_per_token():
    # 2 (K, V) x 20 layers x 768 x bytes
    assert CHATTTS.gpt.kv_bytes_per_token(4) == 122_880
    assert CHATTTS.gpt.kv_bytes_per_token(2) == 61_440


def test_info_json_cli():
    result = CliRunner().invoke(app, ["info", "--config", "chattts", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["parameters"] == OFFICIAL_COUNTS
    assert data["steps_per_audio_second"] == 46.875
    assert data["weights_bytes"]["fp16"] == 2 * OFFICIAL_COUNTS["total"]


def test_info_table_and_unknown_config():
    runner = CliRunner()
    ok = runner.invoke(app, ["info", "--config", "tiny"])
    assert ok.exit_code == 0 and "KV cache" in ok.output
    bad = runner.invoke(app, ["info", "--config", "huge"])
    assert bad.exit_code == 2
    assert "--config 'huge'" in bad.output and "chattts" in bad.output
