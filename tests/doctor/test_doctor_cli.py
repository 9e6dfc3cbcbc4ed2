"""`ttsperf doctor` end to end: exit codes, the --json document, a real server, a bad spec."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.doctor import SCHEMA
from ttsperf.doctor.checks import SEVERITIES

runner = CliRunner()
TINY = ["--config", "tiny"]  # a small synthetic tokenizer: same token counts, built in a fraction of the time
GUIDE = "--minShapes=input_ids:1x1 --optShapes=input_ids:4x20 --maxShapes=input_ids:8x50"


def doctor(*args: str):
    return runner.invoke(app, ["doctor", *TINY, *args])


def test_json_document_schema_and_exit_0_without_error_findings():
    res = doctor("--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == SCHEMA and doc["version"] == 1 and doc["exit_code"] == 0
    assert set(doc["summary"]) == set(SEVERITIES) and sum(doc["summary"].values()) == len(doc["findings"])
    for f in doc["findings"]:
        assert set(f) == {"id", "severity", "subject", "title", "evidence", "fix", "needs"}
        assert f["severity"] in SEVERITIES and f["evidence"]
        assert (f["severity"] == "skipped") == bool(f["needs"])
    assert {"torch_version", "gpus", "env", "deployments", "gpu_processes"} <= set(doc["facts"])
    rec = next(f for f in doc["findings"] if f["id"] == "trt-recommended")
    assert rec["fix"].startswith("trtexec --onnx=") and "--maxShapes=codes:8x4" in rec["fix"]


def test_requests_outside_the_guides_shapes_exit_1_and_name_the_fix():
    res = doctor("--trt-shapes", GUIDE, "--json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    [bad] = [f for f in doc["findings"] if f["id"] == "trt-shapes"]
    assert bad["severity"] == "error" and "outside 1..50" in bad["evidence"]
    [rec] = [f for f in doc["findings"] if f["id"] == "trt-recommended"]
    assert "--minShapes=input_ids:1x1" in rec["fix"]  # the user's own input, corrected


def test_a_workload_within_the_shapes_is_ok(tmp_path):
    texts = tmp_path / "t.txt"
    texts.write_text("好的。\n请稍等一下。\n")
    res = doctor("--trt-shapes", GUIDE, "--texts", str(texts), "--json")
    assert res.exit_code == 0, res.output
    [ok] = [f for f in json.loads(res.stdout)["findings"] if f["id"] == "trt-shapes"]
    assert ok["severity"] == "ok" and "all 2 requests within" in ok["evidence"]


def test_a_spec_that_does_not_parse_is_one_line_and_exit_2():
    res = doctor("--trt-shapes", "--minShapes=input_ids:1x1 --optShapes=input_ids:4x20")
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "error: --trt-shapes: --maxShapes is missing; expected --minShapes=NAME:DIMS --optShapes=NAME:DIMS "
        "--maxShapes=NAME:DIMS with DIMS like 1x20 (several inputs comma-separated), as trtexec takes them"
    ]


def test_other_bad_input_exits_2(tmp_path):
    assert doctor("--url", "http://127.0.0.1:9").exit_code == 2
    assert doctor("--texts", str(tmp_path / "missing.txt")).exit_code == 2
    assert doctor("--profile", str(tmp_path / "missing.json")).exit_code == 2


def test_a_running_ttsperf_server_is_checked_and_its_batch_sizes_the_shapes(live_server):
    res = doctor("--url", live_server)
    assert res.exit_code == 0, res.output
    assert f"{live_server}/healthz" in res.stdout and "continuous" in res.stdout
    doc = json.loads(doctor("--url", live_server, "--json").stdout)
    subjects = {f["subject"] for f in doc["findings"] if f["id"] == "grad"}
    assert subjects == {f"{live_server}/healthz"}
    rec = next(f for f in doc["findings"] if f["id"] == "trt-recommended")
    assert "the server's max_batch" in rec["evidence"] and "--maxShapes=codes:4x4" in rec["fix"]
    # without --config the shapes are the served model's (tiny: 2 layers, 4 KV heads of 16), not
    # chattts's (20 layers, 12 heads of 64)
    served = json.loads(runner.invoke(app, ["doctor", "--url", live_server, "--json"]).stdout)
    rec = next(f for f in served["findings"] if f["id"] == "trt-recommended")
    assert "(tiny model, the server's)" in rec["evidence"] and "past_keys:2x4x4x1024x16" in rec["fix"]
    insisted = json.loads(
        runner.invoke(app, ["doctor", "--url", live_server, "--config", "chattts", "--json"]).stdout
    )
    rec = next(f for f in insisted["findings"] if f["id"] == "trt-recommended")
    assert "(chattts model, --config)" in rec["evidence"] and "past_keys:20x4x12x" in rec["fix"]


def test_table_output_prints_the_trtexec_command_whole():
    res = doctor()
    assert res.exit_code == 0
    lines = [line for line in res.stdout.splitlines() if line.startswith("trtexec --onnx=")]
    assert len(lines) == 1 and "--maxShapes=" in lines[0]


def test_a_spec_of_unknown_inputs_is_skipped_not_passed():
    res = doctor("--trt-shapes", "--minShapes=x:1x1 --optShapes=x:1x1 --maxShapes=x:1x1", "--json")
    assert res.exit_code == 0, res.output
    found = {f["id"]: f for f in json.loads(res.stdout)["findings"]}
    assert found["trt-shapes"]["severity"] == "skipped" and found["trt-shapes-unknown"]["severity"] == "info"
    assert "x (2 dims)" in found["trt-shapes-unknown"]["evidence"]


def test_the_trtexec_command_takes_the_deployments_dtype(facts):
    """An fp16 server's engine is built with --fp16, a bf16 one's with --bf16, an fp32 one's with
    neither (trtexec's default)."""
    from tests.doctor.conftest import cuda_dep

    from ttsperf.doctor import diagnose

    for dtype, flag in (("fp16", "--fp16"), ("bf16", "--bf16"), ("fp32", None)):
        report = diagnose(config="tiny", facts=facts(gpus=1, deployments=[cuda_dep(dtype=dtype)]))
        fix = next(f for f in report["findings"] if f["id"] == "trt-recommended")["fix"]
        assert (flag in fix.split()) if flag else not {"--fp16", "--bf16"} & set(fix.split()), (dtype, fix)
