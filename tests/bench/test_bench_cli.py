"""`ttsperf bench` as a user meets it: one clear line and exit 2 for bad input, 0/1 for the SLO."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, ["bench", *args, "--no-progress", "--no-gpu"])


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_unparseable_slo(server_factory):
    line = one_error_line(invoke("http://127.0.0.1:9", "--slo", "ttfa_p99=fast"))
    assert "--slo" in line and "ttfa_p99=fast" in line


def test_slo_time_without_unit():
    line = one_error_line(invoke("http://127.0.0.1:9", "--slo", "e2e_p99=5"))
    assert "time unit" in line


def test_the_help_examples_ttfa_slo_on_the_invoke_adapter_is_refused_naming_it():
    """Issue 35: the invoke adapter's reply comes whole, so its "TTFA" is the whole response."""
    line = one_error_line(invoke("http://127.0.0.1:8080", "--slo", "ttfa_p99=300ms,error_rate=1%"))
    assert line.startswith("error: --slo ttfa_p99: the invoke adapter's replies are not streamed"), line
    assert "--adapter openai --stream" in line
    for spec in ("underrun_p99=100ms", "gap_max=50ms"):  # the other metrics of a streamed reply
        assert "not streamed" in one_error_line(invoke("http://127.0.0.1:8080", "--slo", spec))
    help_text = runner.invoke(app, ["bench", "--help"]).output
    assert re.search(
        r"--adapter openai --stream \\\n +--slo ttfa_p99=300ms,error_rate=1% -o runs/b1", help_text
    )


def test_a_buffered_run_shows_no_ttfa_gap_or_underrun_and_says_so(server_factory):
    srv = server_factory(slots=1, service_time=0.01)
    whole = invoke(srv.url, "--requests", "10")
    assert whole.exit_code == 0, whole.output
    assert "  streamed    no: whole replies (no TTFA, gaps or underruns)" in whole.stdout
    assert not re.search(r"^  (ttfa|gap|underrun) ms", whole.stdout, flags=re.M), whole.stdout
    streamed = invoke(srv.url, "--requests", "10", "--adapter", "openai", "--stream", "--format", "pcm")
    assert streamed.exit_code == 0, streamed.output
    assert "streamed    no" not in streamed.stdout
    assert re.search(r"^  ttfa ms", streamed.stdout, flags=re.M) and "  underrun ms" in streamed.stdout


def test_unknown_slo_metric():
    line = one_error_line(invoke("http://127.0.0.1:9", "--slo", "speed_p99=5s"))
    assert "unknown metric 'speed_p99'" in line


def test_unknown_adapter():
    line = one_error_line(invoke("http://127.0.0.1:9", "--adapter", "grpc"))
    assert "--adapter 'grpc'" in line and "invoke" in line


def test_unreadable_texts_file(tmp_path):
    missing = tmp_path / "nope.txt"
    line = one_error_line(invoke("http://127.0.0.1:9", "--texts", str(missing)))
    assert str(missing) in line and "cannot read" in line


def test_jsonl_texts_file_without_text_field(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"text": "ok"}\n{"txt": "typo"}\n', encoding="utf-8")
    line = one_error_line(invoke("http://127.0.0.1:9", "--texts", str(f)))
    assert f"{f}:2" in line and '"text"' in line


def test_bad_url():
    line = one_error_line(invoke("localhost:8080"))
    assert "'localhost:8080'" in line and "http://" in line


def test_rate_must_be_positive():
    line = one_error_line(invoke("http://127.0.0.1:9", "--rate", "0"))
    assert "--rate" in line and "> 0" in line


def test_rate_not_a_number():
    line = one_error_line(invoke("http://127.0.0.1:9", "--rate", "fast"))
    assert "--rate 'fast'" in line


def test_concurrency_and_rate_together():
    line = one_error_line(invoke("http://127.0.0.1:9", "--rate", "2", "--concurrency", "4"))
    assert "choose one" in line


def test_unknown_arrival():
    line = one_error_line(invoke("http://127.0.0.1:9", "--rate", "2", "--arrival", "bursty"))
    assert "--arrival 'bursty'" in line


def test_find_max_without_slo():
    line = one_error_line(invoke("http://127.0.0.1:9", "--find-max"))
    assert "--find-max needs --slo" in line


def test_template_without_placeholder():
    line = one_error_line(
        invoke("http://127.0.0.1:9", "--adapter", "template", "--template-body", '{"a": 1}')
    )
    assert "{text}" in line


def test_help_shows_an_example():
    result = runner.invoke(app, ["bench", "--help"])
    assert result.exit_code == 0
    assert "ttsperf bench http://127.0.0.1:8080 --concurrency" in result.output


@pytest.mark.slow
def test_slo_pass_exits_0_and_fail_exits_1_naming_the_constraint(server_factory):
    srv = server_factory(slots=1, service_time=0.05)
    ok = invoke(srv.url, "--concurrency", "1", "--requests", "30", "--slo", "e2e_p50=1s,error_rate=1%")
    assert ok.exit_code == 0, ok.output
    assert "SLO: PASS" in ok.output
    # 3 in flight on one slot: p50 is about 3 x 50 ms, over a 100 ms bound.
    bad = invoke(srv.url, "--concurrency", "3", "--requests", "30", "--slo", "e2e_p50=100ms,error_rate=1%")
    assert bad.exit_code == 1, bad.output
    assert "SLO: FAIL" in bad.output and "e2e_p50 =" in bad.output and "over by" in bad.output
    assert "error_rate" not in bad.output.split("SLO: FAIL")[1]  # only the failing constraint is named


def test_a_point_where_every_request_failed_exits_1_with_one_line():
    """A dead server (nothing listens on port 1) is not a green CI job, SLO or not."""
    res = invoke("http://127.0.0.1:1", "--requests", "3", "--timeout", "5s")
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("bench: no request succeeded at concurrent@1: all 3 requests failed")


def test_a_p99_too_few_requests_can_bound_is_inconclusive_exit_3_saying_what_settles_it(server_factory):
    srv = server_factory(slots=0, service_time=0.01)
    res = invoke(srv.url, "--requests", "20", "--slo", "e2e_p99=10s", "--no-until-decided")
    assert res.exit_code == 3, res.output
    assert "SLO: INCONCLUSIVE" in res.output
    assert (
        "its high end needs n >= 368; about" in res.output and "requests would settle it (pass" in res.output
    )


def test_bench_with_100_requests_writes_every_percentile_with_its_interval(server_factory, tmp_path):
    """run.json keeps p50..p99 of every latency metric, each with pXX_ci = [low, high] beside it."""
    srv = server_factory(slots=2, service_time=0.01, stream_chunks=4)
    out = tmp_path / "run"
    res = invoke(srv.url, "--adapter", "openai", "--stream", "--format", "pcm", "--concurrency", "2",
                 "--requests", "100", "-o", str(out))  # fmt: skip
    assert res.exit_code == 0, res.output
    point = json.loads((out / "run.json").read_text())["points"][0]
    latency = ("latency_s", "latency_from_intended_s", "queue_s", "ttfa_s", "gap_s", "underrun_s")
    for metric in latency:
        d = point[metric]
        assert d["n"] >= 100, (metric, d["n"])
        for stat in ("p50", "p90", "p95", "p99"):
            lo, hi = d[f"{stat}_ci"]
            assert d[stat] is not None and lo is not None and lo <= d[stat], (metric, stat, d)
            assert hi is None or d[stat] <= hi
        # 100 requests give p99 a lower end; its high end needs 368 (a gap sample pools every chunk)
        assert (d["p99_ci"][1] is None) == (d["n"] < 368), (metric, d)
    assert point["rtf"]["p99_ci"][0] is not None


def test_readme_bench_example_exits_as_documented(server_factory, tmp_path):
    """The README's `bench` row, against the mock: pass (0) at its 400 requests; the same SLO at the
    default 100 requests is decided by adding requests (0), and with --no-until-decided is
    inconclusive (3), as the README's bench section says."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"\| `bench` \| `(ttsperf bench [^`]+)`", readme)
    args = shlex.split(example)[2:]
    assert args[0] == "http://127.0.0.1:8080" and "--slo" in args and "--requests" in args
    srv = server_factory(slots=0, service_time=0.01)
    args[0] = srv.url
    args[args.index("-o") + 1] = str(tmp_path / "b1")
    assert invoke(*args).exit_code == 0
    prose = " ".join(readme.split())  # the README wraps its lines
    assert "example exits 0 when every point's p99 interval lies under the limit" in prose
    at_100 = list(args)
    at_100[at_100.index("--requests") + 1] = "100"
    res = invoke(*at_100, "--concurrency", "1")
    assert res.exit_code == 0 and "added to decide the SLO" in res.output, res.output
    res = invoke(*at_100, "--concurrency", "1", "--no-until-decided")
    assert res.exit_code == 3 and "SLO: INCONCLUSIVE" in res.output, res.output
    assert "at the default 100 requests bench adds requests at the same load" in prose
    assert "with `--no-until-decided` the same SLO is inconclusive (exit 3)" in prose


def test_the_console_fits_80_columns(server_factory):
    """COLUMNS=80: per-point blocks of `metric: value` lines; nothing is cut to "…"."""
    srv = server_factory(slots=1, service_time=0.01, stream_chunks=4)
    res = runner.invoke(
        app,
        ["bench", srv.url, "--adapter", "openai", "--stream", "--format", "pcm", "--concurrency", "1,4",
         "--requests", "40", "--no-gpu", "--no-progress", "--slo", "ttfa_p99=300ms,e2e_p50=1s,error_rate=1%",
         "--no-until-decided"],
        env={"COLUMNS": "80"},
    )  # fmt: skip
    assert res.exit_code == 3, res.output  # p99 of 40 requests has no high end yet
    lines = res.stdout.splitlines()
    assert "…" not in res.stdout and max(len(ln) for ln in lines) <= 80
    for label in ("concurrent@1: 40/40 ok", "concurrent@4: 40/40 ok", "  e2e ms", "  ttfa ms", "  gap ms"):
        assert any(ln.startswith(label) for ln in lines), label
    e2e = next(ln for ln in lines if ln.startswith("  e2e ms"))
    assert re.search(r"n=40 +p50 [0-9.]+ \[[0-9.]+, [0-9.]+\]", e2e), e2e
    # the verdict's long lines wrap under a hanging indent, never at column 0 by rich
    verdict = lines[lines.index("SLO: INCONCLUSIVE") + 1 :]
    assert verdict and all(ln.startswith(("  - ", "  ? ", "    ")) for ln in verdict), verdict


def test_confidence_outside_its_range_is_bad_input():
    line = one_error_line(invoke("http://127.0.0.1:9", "--confidence", "1"))
    assert "--confidence 1.0: expected a level in [0.5, 1)" in line


@pytest.mark.slow
def test_json_and_output_dir(server_factory, tmp_path):
    srv = server_factory(slots=0, service_time=0.01)
    out = tmp_path / "run"
    res = invoke(srv.url, "--concurrency", "1,2", "--requests", "12", "--json", "-o", str(out))
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["schema"] == "ttsperf.benchrun/1"
    p = data["points"][0]
    for key in ("throughput_rps", "audio_seconds_per_s", "goodput_rps", "errors"):
        assert key in p
    for key in ("p50", "p90", "p99", "mean", "max", "n"):
        assert key in p["latency_s"] and key in p["ttfa_s"] and key in p["rtf"]
    assert p["latency_s"]["p99"] is not None and p["latency_s"]["p99_ci"][1] is None  # 12: no high end
    saved = json.loads((out / "run.json").read_text())
    assert len(saved["records"]) == 24
    rows = (out / "requests.csv").read_text().splitlines()
    assert len(rows) == 25 and rows[0].startswith("point,i,warmup")
    for png in ("latency.png", "throughput.png", "ttfa_cdf.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    from ttsperf.bench.results import BenchRun

    back = BenchRun.read(out / "run.json")
    assert len(back.records) == 24 and back.points[1].label == "concurrent@2"
    assert back.points[0].latency_s == BenchRun.model_validate(saved).points[0].latency_s


@pytest.mark.parametrize("flag", ["--requests", "--warmup"])
def test_negative_counts(flag):
    line = one_error_line(invoke("http://127.0.0.1:9", flag, "-1"))
    assert flag in line


@pytest.mark.slow
def test_ctrl_c_writes_what_was_measured(server_factory, tmp_path):
    """Issue 35: this once waited more than 30 s after SIGINT. It does so every time where SIGINT
    is inherited ignored (pytest started by `... &` in a script), which asyncio.run left alone;
    bench now takes SIGINT itself (bench/interrupt.py). test_bench_ctrl_c.py: the other moments."""
    from .bench_process import ENDS_WITHIN_S, ctrl_c, start_bench, wait_until

    srv = server_factory(slots=1, service_time=0.05)
    out = tmp_path / "run"
    proc = start_bench(srv.url, out, "--requests", "1000")
    # mid-run, however slow start-up is; 12 served: the warm-up and one request in flight are not records
    wait_until(lambda: srv.stats()["served"] >= 12, "12 requests served")
    elapsed, stdout, stderr = ctrl_c(proc)
    assert proc.returncode == 130, stderr
    assert elapsed < ENDS_WITHIN_S, stderr
    data = json.loads((out / "run.json").read_text())
    assert data["interrupted"] is True
    n = len(data["records"])
    assert 10 <= n < 1000 and data["points"][0]["successes"] == n
    assert "interrupted" in stdout


def test_progress_bar_and_table_render(server_factory):
    srv = server_factory(slots=0, service_time=0.01)
    res = runner.invoke(app, ["bench", srv.url, "--requests", "5", "--no-gpu", "--text-set", "en-short"])
    assert res.exit_code == 0, res.output
    assert "concurrent@1" in res.output and "5/5" in res.output
    assert "workload en-short: 5 texts" in res.output


def test_charts_include_gpu_when_telemetry_has_it(tmp_path):
    from ttsperf.bench.charts import write_charts
    from ttsperf.bench.metrics import summarize
    from ttsperf.bench.results import BenchRun, RequestRecord, Strategy

    recs = [
        RequestRecord(
            i=i,
            point=0,
            warmup=False,
            url="u",
            chars=5,
            expected_audio_s=1.0,
            t_sched=i * 0.1,
            t_send=i * 0.1,
            t_first_audio=i * 0.1 + 0.05,
            t_end=i * 0.1 + 0.2,
            audio_s=1.0,
        )
        for i in range(30)
    ]
    run = BenchRun(
        tool_version="t",
        created_utc="t",
        targets=["u"],
        adapter="invoke",
        config={},
        workload={},
        points=[summarize(Strategy(kind="concurrent", concurrency=2), recs)],
        records=recs,
        telemetry=[{"t": t / 10, "gpu_util": 0.5, "gpu_mem_bytes": 2e9} for t in range(40)],
    )
    names = sorted(p.name for p in write_charts(run, tmp_path))
    assert names == ["gpu.png", "latency.png", "throughput.png", "ttfa_cdf.png"]


def test_bad_header():
    line = one_error_line(invoke("http://127.0.0.1:9", "--header", "Authorization Bearer x"))
    assert "--header" in line and "Name: value" in line


def test_header_reaches_the_server_and_is_not_written_into_results(server_factory, tmp_path):
    srv = server_factory(slots=0, service_time=0.01, token="s3cret")
    out = tmp_path / "r"
    denied = invoke(srv.url, "--requests", "2", "--json")
    assert json.loads(denied.stdout)["points"][0]["errors"] == {"http_4xx": 2}
    ok = invoke(srv.url, "--requests", "2", "-H", "Authorization: Bearer s3cret", "-o", str(out))
    assert ok.exit_code == 0 and "2/2" in ok.output
    assert "s3cret" not in (out / "run.json").read_text()


def test_a_p99_slo_at_default_settings_is_decided_by_sending_more(server_factory):
    """Issue 25: `bench URL --slo e2e_p99=5s` and nothing else ends pass on a server far under the
    limit: the 100 default requests cannot give p99 a high end (n >= 368), so bench says how many
    would and sends them at the same load, up to --max-requests."""
    srv = server_factory(slots=0, service_time=0.005)
    res = runner.invoke(app, ["bench", srv.url, "--slo", "e2e_p99=5s", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    point = data["points"][0]
    assert data["slo"]["status"] == "pass" and point["slo"]["status"] == "pass"
    assert point["requests"] >= 368 and point["added_requests"] == point["requests"] - 100
    capped = invoke(srv.url, "--slo", "e2e_p99=5s", "--max-requests", "200")
    assert capped.exit_code == 3, capped.output
    assert "(stopped at --max-requests 200)" in " ".join(capped.output.split())


def test_a_dead_server_fails_in_exit_code_console_and_json_alike():
    """Nothing listens on port 1: exit 1, `SLO: FAIL` and slo.status "fail", every line whole."""
    args = ["bench", "http://127.0.0.1:1", "--slo", "e2e_p99=5s", "--requests", "3", "--no-gpu"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 1, res.output
    slo = json.loads(res.stdout)["slo"]
    assert slo["status"] == "fail" and "no request succeeded" in slo["failures"][0]
    shown = runner.invoke(app, [*args, "--no-progress"], env={"COLUMNS": "80"})
    assert shown.exit_code == 1 and "SLO: FAIL" in shown.stdout, shown.output
    assert max(len(ln) for ln in shown.stdout.splitlines()) <= 80
    assert "Connect call failed" in " ".join(shown.stdout.split())  # wrapped, not cut


@pytest.mark.slow
def test_find_max_says_why_the_load_above_its_answer_was_not_taken(server_factory):
    srv = server_factory(slots=2, service_time=0.05)
    res = runner.invoke(
        app,
        ["bench", srv.url, "--find-max", "--slo", "e2e_p90=120ms", "--requests", "30", "--concurrency", "1,8",
         "--no-gpu", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    fm = json.loads(res.stdout)["find_max"]
    assert fm["max_passing"] is not None and fm["above"]["load"] == fm["first_failing"]
    assert fm["above"]["status"] in ("fail", "inconclusive") and fm["above"]["why"].startswith("e2e_p90")


@pytest.mark.slow
def test_on_a_tiny_server_the_bare_p99_command_ends_pass():
    """Issue 25's must-show, as a user types it: `ttsperf serve --synthetic --config tiny` (its
    requests cut to 80 decode steps, 1.7 s of audio, so the test takes seconds, not minutes), then exactly
    `ttsperf bench URL --slo e2e_p99=5s`: pass, exit 0."""
    import subprocess
    import sys

    from tests.server.helpers import ServeProcess

    with ServeProcess("--synthetic", "--config", "tiny", "--max-new-tokens", "80") as srv:
        r = subprocess.run(
            [sys.executable, "-m", "ttsperf", "bench", srv.url, "--slo", "e2e_p99=5s"],
            capture_output=True, text=True, timeout=600, env={**__import__("os").environ, "COLUMNS": "80"},
        )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SLO: PASS" in r.stdout and "added to decide the SLO" in r.stdout, r.stdout
    assert max(len(ln) for ln in r.stdout.splitlines()) <= 80


def test_progress_through_a_pipe_is_whole_lines(server_factory):
    """Piped (`make demo | tee`, CI), rich would draw each bar once at the end, cut to the width
    ("0:0…"): a pipe gets each point's label as a line of its own instead, and no bar."""
    import os
    import subprocess
    import sys

    srv = server_factory(slots=2, service_time=0.01)
    env = {**os.environ, "COLUMNS": "80"}
    args = ["bench", srv.url, "--concurrency", "1,2", "--requests", "4", "--no-gpu"]
    r = subprocess.run(
        [sys.executable, "-m", "ttsperf", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "concurrent@1" in lines and "concurrent@2" in lines, r.stdout
    assert "…" not in r.stdout and "━" not in r.stdout
