"""`ttsperf profile --optimizations`: each variant measured in its own process, int8 bytes counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.model.config import TINY


@pytest.mark.slow
def test_optimizations_measure_each_variant_in_its_own_process(tmp_path):
    out = tmp_path / "opt.json"
    args = [
        "profile",
        "--synthetic",
        "--config",
        "tiny",
        "--optimizations",
        "--batches",
        "2",
        "--contexts",
        "16",
    ]
    res = CliRunner().invoke(app, [*args, "--repeats", "2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = {r["variant"]: r for r in json.loads(out.read_text())}
    fp32, half = rows["fp32 (baseline)"], rows["fp16 weights (.half())"]
    assert half["weights_MB"] == pytest.approx(fp32["weights_MB"] / 2, rel=0.01)  # buffers are tiny
    assert rows["autocast fp16/bf16 over fp32 weights"]["weights_MB"] == fp32["weights_MB"]
    assert rows["TF32 off"]["applies"] is False and "CUDA only" in rows["TF32 off"]["note"]
    assert all(r["step_ms"] > 0 for r in rows.values() if r["applies"])


def test_int8_weights_count_their_int8_bytes(tiny_pipe):
    from ttsperf.engine.switches import quantize_int8
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.profile.optimizations import tensor_bytes

    pipe = Pipeline.synthetic_model(TINY, seed=0)
    linear = pipe.model.gpt.layers[0].mlp.up_proj
    before = tensor_bytes(linear.weight)
    quantize_int8(pipe.model.gpt)
    after = tensor_bytes(linear.weight)  # int8 data + an fp32 scale and an int8 zero point per row
    assert after == linear.weight.qdata.numel() + (4 + 1) * linear.weight.shape[0] and after < before / 3


def test_cuda_where_there_is_none_is_one_line_before_any_variant(tmp_path):
    """Issue 35: `profile --device cuda --optimizations` ran 15 s (a variant's process loading a
    model) before it failed. Now the device is checked first, in one line."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TTSPERF_")},
        "CUDA_VISIBLE_DEVICES": "",
    }
    ttsperf = str(Path(sys.executable).with_name("ttsperf"))
    started = time.monotonic()
    r = subprocess.run(
        [ttsperf, "profile", "--device", "cuda", "--optimizations"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    # before: "error: variant 'fp32 (baseline)' failed: [...]", after that variant's process had run
    assert lines == ["error: --device 'cuda': no CUDA device is available here (use --device cpu)"], lines
    print(f"\nfailed in {time.monotonic() - started:.1f} s")
