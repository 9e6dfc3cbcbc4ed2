"""Every section of the report, from real results (see conftest.py)."""

from __future__ import annotations

import json
import re

from ttsperf.bench.results import BenchRun
from ttsperf.facts import PARAMS, TOTAL_PARAMS
from ttsperf.report.bench_sections import load_section, telemetry_section
from ttsperf.report.build import build_report, recommendation
from ttsperf.report.claims import claims_section
from ttsperf.report.document import Chart, Table, ms
from ttsperf.report.inputs import Inputs, read_inputs
from ttsperf.report.model_sections import optimizations_section, profile_section
from ttsperf.report.plan_section import plan_sections


def _tables(sec) -> list[Table]:
    return [b for b in sec.blocks if isinstance(b, Table)]


def _series_points(svg: str) -> list[int]:
    """Vertices of each data line matplotlib drew (ttsperf.charts names them series-N)."""
    return [d.count("L") + 1 for d in re.findall(r'<g id="series-\d+">\s*<path d="([^"]+)"', svg)]


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


def test_profile_section_memory_and_step_time_vs_batch(results):
    inputs = read_inputs([results / "profile.json"])
    path, prof = inputs.profiles[0]
    sec = profile_section(path, prof, "k")
    memory, step = sec.charts()
    assert (
        "Memory vs batch" in memory.svg
        and "context 16 tokens" in memory.svg
        and "context 64 tokens" in memory.svg
    )
    assert "ms per step" in step.svg
    steps = _tables(sec)[2]
    assert len(steps.rows) == len(prof.steps) == 6
    assert steps.rows[0][2] == f"{1000 * prof.steps[0].seconds.value:.2f} ms"


def test_optimisations_section_and_deltas(results):
    inputs = read_inputs([results / "optimizations.json"])
    path, rows = inputs.optimizations[0]
    table = _tables(optimizations_section(path, rows))[0]
    by = {r[0]: r for r in table.rows}
    assert by["fp32 (baseline)"][3] == "+0%"
    assert by["TF32 off"][2] == "–" and "not measured: CUDA only" in by["TF32 off"][7]
    half = next(r for r in rows if r["variant"] == "fp16 weights (.half())")
    base = rows[0]
    assert by["fp16 weights (.half())"][3] == f"{half['step_ms'] / base['step_ms'] - 1:+.0%}"


def test_plan_section_cost_table_and_pareto_chart(results):
    inputs = read_inputs([results / "plan.json"])
    path, plan = inputs.plans[0]
    (sec,) = plan_sections(path, plan, "k")
    sc = plan.scenarios[0]
    assert sec.title == "Plan: realtime" and f"**{sc.recommendation}**" in sec.blocks
    (chart,) = sec.charts()
    assert chart.name == "pareto_realtime_k_0" and "<svg" in chart.svg
    table, apart = _tables(sec)  # the profiled CPU (device "other") in a table of its own
    assert {r[0].removesuffix(" ★") for r in table.rows} == {r.gpu for r in sc.rows if r.device == "gpu"}
    assert [r[0] for r in apart.rows] == [r.gpu for r in sc.rows if r.device == "other"] != []
    meets = [r[1] for r in table.rows]
    assert meets == sorted(meets, key=lambda m: m != "yes")  # the cards meeting the SLO first


def test_recommendation_comes_from_the_plan_then_bench_then_profile(results):
    full = read_inputs([results])
    sentence, source, _ = recommendation(full)
    assert sentence == full.plans[0][1].scenarios[0].recommendation and source == results / "plan.json"
    bench_only = read_inputs([results / "bench" / "run.json"])
    sentence, source, _ = recommendation(bench_only)
    assert sentence.startswith("No plan among the inputs") and "requests/s" in sentence
    sentence, _, _ = recommendation(read_inputs([results / "profile.json"]))
    assert "ttsperf plan --profile" in sentence
    assert recommendation(Inputs())[1] is None


def test_claims_only_from_measured_inputs_with_the_guides_line(results):
    inputs = read_inputs([results])
    # the tiny model's sizes say nothing about ChatTTS: no size claims, but the bench formula claim
    sec = claims_section(inputs)
    says = [r[0] for r in _tables(sec)[0].rows]
    assert "1.1 B parameters" not in says and "throughput = requests / sum of latencies" in says
    row = next(r for r in _tables(sec)[0].rows if r[0].startswith("throughput"))
    assert row[1].startswith("line 49:") and str(results / "bench" / "run.json") == row[4]


def test_size_claims_for_a_full_size_profile(results):
    inputs = read_inputs([results / "profile.json"])
    path, prof = inputs.profiles[0]
    full = prof.model_copy(deep=True)  # the real ChatTTS counts on the tiny measurement's skeleton
    full.model.config = "chattts"
    full.model.parameters = {**PARAMS, "total": TOTAL_PARAMS}
    full.weights_bytes.value = 4.0 * TOTAL_PARAMS
    full.memory = []
    full.kv_bytes_per_token.value = 122_880.0
    rows = {r[0]: r for r in _tables(claims_section(Inputs(profiles=[(path, full)])))[0].rows}
    assert rows["1.1 B parameters"][2].startswith("279,657,740 parameters (0.28 B)")
    assert "3.9x too high" in rows["1.1 B parameters"][3] and "1.1 B" in rows["1.1 B parameters"][1]
    assert "0.56 GB at 2 B/parameter" in rows["about 2.2 GB of weights in FP16"][2]
    per_s = rows["+80 MB per extra second of audio per batch element"]
    assert per_s[2].startswith("5.76 MB per audio second") and "13.9x too high" in per_s[3]
    assert "67.5%" in rows["the Transformer decoder holds over 70% of the weights"][2]


def test_optimisation_claims_quote_the_guide(results):
    inputs = read_inputs([results / "optimizations.json"])
    rows = _tables(claims_section(inputs))[0].rows
    where = {r[0]: r[1] for r in rows}
    assert where["autocast (AMP) doubles memory"].startswith("line 7:")
    assert where["checkpointing: peak 19 GB -> 12 GB (-37%)"].startswith("line 25:")
    assert not any(r[0].startswith("TF32") for r in rows)  # CUDA only: not measured on this CPU


def test_every_section_names_its_sources_and_charts_have_unique_names(results):
    report = build_report(read_inputs([results]))
    assert all(s.sources for s in report.sections)
    names = [c.name for c in report.charts()]
    assert len(names) == len(set(names)) >= 7
    assert all(isinstance(c, Chart) and c.svg.startswith("<svg") for c in report.charts())
    assert report.missing == []


def test_every_quote_is_the_guides_own_words_on_that_line():
    from pathlib import Path

    from ttsperf.report import claims

    # tests/fixtures/shared/seed holds a copy of the guide (tests/fixtures/README.md)
    guide = Path(__file__).resolve().parents[1] / "fixtures" / "shared" / "seed" / "000_28de64d92baf2491.txt"
    lines = guide.read_text(encoding="utf-8").splitlines()
    quoted = [c for c in vars(claims).values() if isinstance(c, claims.Claim)]
    assert len(quoted) == 10
    for c in quoted:
        for part in c.quote.split(" ... "):
            assert part in lines[c.line - 1], (c.line, part)


def test_a_prediction_is_shown_beside_the_bench_point_of_its_load(results, tmp_path):
    from ttsperf.plan.predict import predict
    from ttsperf.report.prediction_section import prediction_section

    pred = predict(gpus="RTX 4090", streams=2, max_batch=2, requests=20)
    path = tmp_path / "prediction.json"
    path.write_text(json.dumps(pred.dump()))
    inputs = read_inputs([path, results / "bench" / "run.json"])
    assert [p for p, _ in inputs.predictions] == [path]  # recognised by its schema
    sec = prediction_section(path, inputs.predictions[0][1], inputs.bench)
    assert sec.title == "Predicted vs measured: RTX 4090, 2 streams"
    assert sec.sources == [path, results / "bench" / "run.json"]
    (table,) = _tables(sec)
    assert [r[0] for r in table.rows] == ["throughput", "audio", "E2E P50", "E2E P99", "TTFA P50", "TTFA P99"]
    run = inputs.bench[0][1]
    point = next(p for p in run.points if p.strategy.concurrency == 2)
    measured = point.throughput_rps
    assert table.rows[0][2] == f"{measured:.3g} req/s"
    assert table.rows[0][3] == f"{100 * (pred.prediction.throughput_rps - measured) / measured:+.1f}%"
    assert "(n = 20, CI " in table.rows[3][2] and table.rows[3][2].endswith(", -])")  # p99 of 20: no high end
    assert "concurrent@2" in table.caption
    # the report places it, after the plans
    assert any(s.title.startswith("Predicted vs measured") for s in build_report(inputs).sections)


def test_a_prediction_without_a_bench_point_of_its_load_says_how_to_measure_it(results):
    from ttsperf.plan.predict import predict
    from ttsperf.report.prediction_section import prediction_section

    pred = predict(gpus="RTX 4090", rate=3.5, max_batch=4, requests=20)
    run = results / "bench" / "run.json"
    sec = prediction_section(results, pred, [(run, BenchRun.read(run))])
    assert not _tables(sec)
    assert "No bench point among the inputs ran this load: `ttsperf bench URL --rate 3.5`" in sec.blocks[1]


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
