"""benchmarks/gpu_check.py runs only when a session is lent a GPU, and device time is scarce: its
CPU dry run must keep working, so a broken import or section shows up here, not on the GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.mark.slow
def test_gpu_check_dry_run_covers_every_section(tmp_path):
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--config", "tiny", "--quick"],
        env={**os.environ, "OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads((tmp_path / "gpu_check.json").read_text())
    assert {
        "correctness",
        "step_times",
        "switches",
        "engine",
        "engine_steps",
        "max_batch",
        "streams_at_ttfa",
        "audio_modes",
        "prefill_modes",
        "one_ahead",
    } <= set(out)
    assert out["one_ahead"]["same_bytes"] and out["one_ahead"]["chunks"] >= 2
    assert out["one_ahead"]["pcm_on_device_same_bytes"] and out["failed"] == []
    four = out["one_ahead"]["four_a_turn"]
    assert four["same_steps_and_chunks"] and four["largest_difference"] < 1e-5
    assert [r for r in out["engine_steps"] if r["variant"] == "eager one ahead 4 a turn"]
    ahead = [r for r in out["engine_steps"] if r["variant"] == "eager one ahead"]
    assert ahead and all(r["overlap"] for r in ahead)
    assert all(r["max_diff"] < 1e-4 for r in out["audio_modes"])  # graphs' padding changes no row
    assert len(out["prefill_modes"]) == 8 and all(r["same_codes"] for r in out["prefill_modes"])
    (row,) = out["max_batch"]  # the dry run: fp32, one context, a 2 GiB budget, cap 64
    assert row["max_batch"] >= 1 and row["limit"] in ("budget", "cap") and row["probes"]


def test_a_failed_same_output_check_is_named_and_fails_the_run():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    ahead = {
        "same_bytes": True,
        "four_a_turn": {"same_steps_and_chunks": True},
        "pcm_on_device_same_bytes": True,
    }
    prefill = [{"mode": "cuda_graphs", "rows": 2, "same_codes": True}]
    assert gpu_check.same_output_failures({"one_ahead": ahead, "prefill_modes": prefill}) == []
    ahead["pcm_on_device_same_bytes"], prefill[0]["same_codes"] = False, False
    assert gpu_check.same_output_failures({"one_ahead": ahead, "prefill_modes": prefill}) == [
        "the PCM made by the audio call: the host's bytes",
        "prefill cuda_graphs, 2 rows: the same first codes",
    ]
