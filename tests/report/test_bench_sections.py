"""report/bench_sections.py: latency, throughput and telemetry from real bench runs (see conftest.py)."""

from __future__ import annotations

import re

from ttsperf.bench.results import BenchRun
from ttsperf.report.bench_sections import load_section, telemetry_section
from ttsperf.report.document import ms

from .blocks import series_points as _series_points
from .blocks import tables as _tables


def test_load_section_charts_latency_with_the_slo_line_and_throughput(results):
    path = results / "bench" / "run.json"
    run = BenchRun.read(path)
    sec = load_section(path, run, "k")
    assert sec.sources == [path]
    latency, throughput = sec.charts()
    assert latency.name == "latency_k" and "SLO e2e_p50 &lt;= 2 s" in latency.svg
    assert "E2E P50" in latency.svg and "E2E P90" not in latency.svg  # n = 20 resolves P50, not P90
    assert _series_points(latency.svg) == [3, 3]  # E2E and TTFA P50 at three load points
    assert "requests/s (successes / window)" in throughput.svg
    table = _tables(sec)[0]
    assert [r[0] for r in table.rows] == ["concurrent@1", "concurrent@2", "concurrent@4"]
    assert [r[2] for r in table.rows] == ["20", "20", "20"]
    assert any("SLO passed" in b or "SLO failed" in b for b in sec.blocks if isinstance(b, str))


def test_load_section_with_too_few_requests_shows_mean_and_max(results):
    run = BenchRun.read(results / "bench" / "run.json")
    for p in run.points:
        p.latency_s.p50 = p.latency_s.p90 = p.latency_s.p99 = None
        p.ttfa_s.p50 = p.ttfa_s.p99 = None
    latency = load_section(results, run, "k").charts()[0]
    assert "E2E mean" in latency.svg and "E2E max" in latency.svg


def test_an_interrupted_run_without_points_says_so(results):
    run = BenchRun.read(results / "bench" / "run.json").model_copy(update={"points": [], "interrupted": True})
    sec = load_section(results, run, "k")
    assert not sec.charts() and "no completed load points" in sec.blocks[0]


def test_telemetry_without_a_gpu_says_so_and_charts_the_server_process(results):
    run = BenchRun.read(results / "bench" / "run.json")
    sec = telemetry_section(results, run, "k")
    text = " ".join(b for b in sec.blocks if isinstance(b, str))
    assert "No GPU telemetry" in text
    assert [c.name for c in sec.charts()] == ["server_cpu_k", "server_rss_k"]
    assert _tables(sec)[0].rows[0][3].endswith(" %")  # server CPU mean per point


def test_telemetry_with_gpu_samples_charts_utilisation_and_memory(results):
    run = BenchRun.read(results / "bench" / "run.json")
    run.telemetry = [
        {"t": t / 2, "gpu_util": 0.5 + t / 40, "gpu_mem_bytes": 8e9 + t * 1e8} for t in range(10)
    ]
    sec = telemetry_section(results, run, "k")
    assert [c.name for c in sec.charts()] == ["gpu_k", "gpu_mem_k"]
    assert "No GPU telemetry" not in " ".join(b for b in sec.blocks if isinstance(b, str))


def test_a_percentile_is_shown_with_the_interval_the_run_holds(results):
    from ttsperf.report.bench_sections import pct

    run = BenchRun.read(results / "bench" / "run.json")
    d = run.points[0].latency_s
    assert pct(d, "p50") == f"{ms(d.p50)} [{ms(d.p50_ci[0])}, {ms(d.p50_ci[1])}]"
    assert pct(d.model_copy(update={"p50_ci": None}), "p50") == ms(d.p50)  # a run from before intervals
    with_ci = d.model_copy(update={"p50": 0.412, "p50_ci": [0.38, 0.45], "p99": 0.9, "p99_ci": [0.5, None]})
    assert pct(with_ci, "p50") == "412 ms [380 ms, 450 ms]"
    assert pct(with_ci, "p99") == "900 ms [500 ms, –]"  # this n cannot bound it from above


def test_the_latency_chart_draws_an_interval_bar_where_the_run_holds_one(results):
    run = BenchRun.read(results / "bench" / "run.json")
    sec = load_section(results, run, "k")
    latency = sec.charts()[0]
    assert latency.svg.count('id="series-0-ci"') == 1  # E2E P50: one bar per point, in one group
    bars = re.search(r'<g id="series-0-ci">(.*?)</g>', latency.svg, re.S)[1]
    assert bars.count("<path") == 3
    assert any("pale bars" in b for b in sec.blocks if isinstance(b, str))
    for p in run.points:  # a run written before bench kept intervals: no bars
        p.latency_s = p.latency_s.model_copy(update={"p50_ci": None})
        p.ttfa_s = p.ttfa_s.model_copy(update={"p50_ci": None})
    assert "-ci" not in load_section(results, run, "k").charts()[0].svg


def test_the_load_section_says_what_the_server_ran_or_why_not(results):
    """Issue 34 item 4: bench records the server's settings (/healthz) and the report shows them."""
    from ttsperf.bench.results import ServerSettings

    path = results / "bench" / "run.json"
    run = BenchRun.read(path)
    said = [b for b in load_section(path, run, "k").blocks if isinstance(b, str) and "Server settings" in b]
    assert said == [
        f"Server settings: none ({run.server_note or 'not recorded'})."
    ]  # the mock is not ttsperf
    run.server = ServerSettings(
        source="http://127.0.0.1:8080/healthz", version="0.1.0", mode="cuda-graphs", dtype="fp16",
        max_batch=256, max_queue=256, first_chunk_steps=24, device="cuda", model="chattts",
        weights="synthetic",
    )  # fmt: skip
    said = [b for b in load_section(path, run, "k").blocks if isinstance(b, str) and "Server settings" in b]
    assert said == [
        "Server settings (from http://127.0.0.1:8080/healthz, ttsperf 0.1.0): cuda-graphs, fp16, max batch "
        "256, queue 256, first chunk 24 steps, cuda, chattts (synthetic)."
    ]
