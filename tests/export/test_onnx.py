"""`ttsperf export onnx` on the tiny config: the graph, its dynamic axes, onnxruntime against the
engine's own step, and a check that fails when the graph is not the model's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.errors import UserError
from ttsperf.export.onnx import CHECK_SHAPES, TRACE_SHAPE, check_graph, export_step, load_model, require_onnx
from ttsperf.export.shapes import RequestShape
from ttsperf.model.config import TINY

pytestmark = pytest.mark.slow  # one ONNX export per module

runner = CliRunner()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "gpt_step.onnx"
    requests = [RequestShape("a", 12, 40), RequestShape("b", 30, 200)]
    return export_step(out, config="tiny", seed=0, requests=requests, max_batch=4)


def test_the_graph_has_the_steps_inputs_and_outputs_with_dynamic_batch_and_context(exported):
    g = TINY.gpt
    layers, heads, head_dim = (
        g.num_hidden_layers,
        g.num_key_value_heads,
        g.hidden_size // g.num_attention_heads,
    )
    kv = [layers, "batch", heads, "context", head_dim]
    assert exported["inputs"] == {
        "codes": ["batch", g.num_vq],
        "positions": ["batch"],
        "past_keys": kv,
        "past_values": kv,
    }
    assert exported["outputs"] == {
        "logits": ["batch", g.num_vq, g.num_audio_tokens],
        "hidden": ["batch", g.hidden_size],
        "present_keys": kv,
        "present_values": kv,
    }


def test_onnxruntime_matches_the_engines_step_at_two_batches_and_contexts(exported):
    shapes = [(c["batch"], c["context"]) for c in exported["checks"]]
    assert shapes == list(CHECK_SHAPES) and TRACE_SHAPE not in shapes
    assert len({b for b, _ in shapes}) == 2 and len({c for _, c in shapes}) == 2
    for c in exported["checks"]:
        assert c["ok"] and c["max_rel"] <= exported["max_rel_error_allowed"]
        assert set(c["errors"]) == {"logits", "hidden", "present_keys", "present_values"}
    assert exported["ok"]


def test_the_check_fails_against_other_weights(exported):
    other = load_model(TINY, None, seed=1)
    checks = check_graph(other, TINY, Path(exported["path"]))
    assert not any(c["ok"] for c in checks)
    assert all(c["errors"]["logits"]["max_rel"] > 1e-2 for c in checks)


def test_the_trtexec_command_takes_its_shapes_from_the_workload(exported):
    cmd = exported["trtexec"]
    assert cmd.startswith(f"trtexec --onnx={exported['path']} ")
    # contexts 13..52 and 31..230: max 230 -> 240; batch up to 4, opt 2
    assert "--maxShapes=codes:4x4,positions:4,past_keys:2x4x4x240x16" in cmd
    assert "--minShapes=codes:1x4,positions:1,past_keys:2x1x4x1x16" in cmd
    assert "--optShapes=codes:2x4" in cmd
    assert " --fp16 " in cmd  # export's default dtype: the engine may build in fp16


def test_cli_exports_from_an_asset_dir_and_prints_the_check_and_command(tmp_path):
    assets = tmp_path / "asset"
    assert (
        runner.invoke(
            app, ["assets", "make-random", str(assets), "--config", "tiny", "--seed", "3"]
        ).exit_code
        == 0
    )
    out = tmp_path / "step.onnx"
    res = runner.invoke(
        app,
        [
            "export",
            "onnx",
            "--config",
            "tiny",
            "--assets",
            str(assets),
            "-o",
            str(out),
            "--dtype",
            "bf16",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] and doc["weights"] == str(assets) and out.stat().st_size == doc["bytes"]
    assert doc["trtexec"].startswith(f"trtexec --onnx={out} --minShapes=")
    assert " --bf16 " in doc["trtexec"] and "--fp16" not in doc["trtexec"]


def test_missing_onnx_packages_are_one_line_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.raises(
        UserError, match=r"needs onnxruntime, not installed here: pip install 'ttsperf\[export\]'"
    ):
        require_onnx()
    res = runner.invoke(
        app, ["export", "onnx", "--config", "tiny", "--synthetic", "-o", str(tmp_path / "x.onnx")]
    )
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "ttsperf[export]" in res.output


def test_weights_must_be_named(tmp_path):
    res = runner.invoke(app, ["export", "onnx", "--config", "tiny", "-o", str(tmp_path / "x.onnx")])
    assert res.exit_code == 2 and "exactly one of --assets DIR or --synthetic" in res.output
