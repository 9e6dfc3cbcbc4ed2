"""`ttsperf demo` end to end on the tiny config: every stage leaves its file."""

from __future__ import annotations

import json
import re
from html import escape

import pytest
from typer.testing import CliRunner

from ttsperf.audio import decode_wav
from ttsperf.cli.main import app
from ttsperf.plan.schema import Plan
from ttsperf.profile.schema import load_profile


@pytest.mark.slow
def test_demo_quick_writes_wav_profile_bench_plan_and_summary(tmp_path):
    res = CliRunner().invoke(app, ["demo", "--quick", "--config", "tiny", "-o", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    samples, rate = decode_wav((tmp_path / "demo.wav").read_bytes())
    assert rate == 24000 and abs(len(samples) / rate - summary["audio_seconds"]) < 1e-3
    assert load_profile(tmp_path / "profile.json").model.config == "tiny"
    # the serving stage: a real `ttsperf serve` process, load-tested over HTTP, every request answered
    run = json.loads((tmp_path / "bench" / "run.json").read_text())
    assert [p["label"] for p in run["points"]] == ["concurrent@1", "concurrent@4"]
    # six a point, the fewest that bound P50; the server's warm-up was the demo's, before the load
    assert all(p["successes"] == p["requests"] == 6 and p["warmup"] == 0 for p in run["points"])
    assert all(p["latency_s"]["p50_ci"] and p["ttfa_s"]["p50_ci"] for p in run["points"])
    assert (tmp_path / "bench" / "latency.png").stat().st_size > 0
    log = (tmp_path / "server.log").read_text()
    assert "engine: max batch 4" in log and "Finished server process" in log  # served, then drained
    plan = Plan.model_validate(json.loads((tmp_path / "plan.json").read_text()))
    assert summary["recommendations"] == {sc.scenario: sc.recommendation for sc in plan.scenarios}
    # the report of this run, built from exactly the files it wrote, recommendation on top
    assert summary["report"] == str(tmp_path / "report.html") and (tmp_path / "report.md").is_file()
    html = (tmp_path / "report.html").read_text()
    # the sentence on top (its `commands` set as <code>), inside the answer box of the plan's pick;
    # its text, since a command is one span per word, or flag and value (it wraps between words)
    box = re.sub(r"<[^>]+>", "", html[html.index('id="answer"') : html.index("<section>")])
    assert all(escape(part) in box for part in plan.scenarios[0].recommendation.split("`"))
    rec = plan.scenarios[0].recommended
    assert f"{rec.gpus_needed} x {rec.gpu}" in box and escape(rec.settings.serve_flags) in box
    for chart in (
        "latency_bench",
        "throughput_bench",
        "server_cpu_bench",
        "memory_",
        "step_",
        "pareto_realtime",
    ):
        assert f'id="chart-{chart}' in html, chart
    assert f"recommendation: {plan.scenarios[0].recommendation}" in res.stderr
    # where the time went: each stage's wall time, as summary.json holds them, and the total
    times = re.search(r"wall time: (.*); total ([0-9.]+) s", res.stderr.replace("\n  ", " ")).groups()
    for name, key in (("build", "build"), ("synthesis", "synth"), ("profile", "profile"), ("bench", "bench")):
        assert f"{name} {summary[key + '_seconds']:.1f} s" in times[0]
    assert "plan (the server starting beside it)" in times[0] and "report " in times[0]
    assert float(times[1]) >= summary["bench_seconds"] + summary["plan_seconds"]
