"""The answer box on top of the report and the cost chart on the scenario's SLO metric, from the
real plan of conftest.py: as it is (a plan without `recommended`) and with the fields plan adds."""

from __future__ import annotations

import re

from ttsperf.report.answer import UNKNOWN, answer, cheapest_row, money
from ttsperf.report.build import build_report
from ttsperf.report.cost_chart import axis, cost_svg
from ttsperf.report.document import Table
from ttsperf.report.inputs import Inputs, read_inputs
from ttsperf.report.plan_section import plan_sections
from ttsperf.report.render import to_html, to_markdown

from .blocks import text_of

FLAGS = "ttsperf serve --dtype fp16 --cuda-graphs --max-batch 32"
SETTINGS = {"dtype": "fp16", "mode": "cuda-graphs", "step_overhead_s": 0.003, "first_chunk_steps": 12,
            "max_batch": 32, "serve_flags": FLAGS}  # fmt: skip


def _plan(results):
    path, plan = read_inputs([results / "plan.json"]).plans[0]
    return path, plan, plan.scenarios[0]


def _texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def _older(sc):
    """The scenario as a plan written before plan recorded settings, binding, range and device."""
    old = {"settings": None, "binding": None, "max_streams_range": None, "device": "gpu"}
    return sc.model_copy(update={"recommended": None, "rows": [r.model_copy(update=old) for r in sc.rows]})


def test_a_plan_without_recommended_gets_the_cheapest_gpu_meeting_the_slo(results):
    path, _, sc = _plan(results)
    sc = _older(sc)
    priced = [r for r in sc.rows if r.meets_slo and r.usd_per_audio_hour is not None]
    best = min(priced, key=lambda r: r.usd_per_audio_hour)
    a = answer(path, sc)
    fields = dict(a.fields)
    assert fields["card"] == f"{best.gpus_needed} x {best.gpu}"
    assert fields["cost"] == (
        f"{money(best.usd_per_hour)}/h for {best.gpus_needed} GPU(s); "
        f"{money(best.usd_per_audio_hour)} per audio hour"
    )
    assert fields["per GPU"] == f"{best.max_streams} streams"  # the row's centre; no range then
    for unknown in ("setting", "binding limit"):
        assert fields[unknown] == UNKNOWN, unknown
    assert UNKNOWN in fields["basis"] and a.serve_flags is None and "cheapest GPU" in a.basis


def test_a_profiled_cpu_row_is_never_the_answer(results):
    path, plan, sc = _plan(results)
    sc = _older(sc)
    best = cheapest_row(sc)
    cpu = best.model_copy(
        update={"gpu": "AMD EPYC (profiled)", "usd_per_audio_hour": 1e-6, "device": "other"}
    )
    sc2 = sc.model_copy(update={"rows": [*sc.rows, cpu]})
    assert dict(answer(path, sc2).fields)["card"].endswith(f" x {best.gpu}")
    (sec,) = plan_sections(path, plan.model_copy(update={"scenarios": [sc2]}), "k")
    tables = [b for b in sec.blocks if isinstance(b, Table)]
    assert [r[0] for r in tables[1].rows] == ["AMD EPYC (profiled)"]  # apart, after the GPUs
    assert "AMD EPYC (profiled)" not in {r[0] for r in tables[0].rows}
    assert "AMD EPYC (profiled)" not in " ".join(_texts(sec.charts()[0].svg))


def test_the_plans_recommended_object_fills_the_box_and_tops_the_page(results, tmp_path):
    path, plan, sc = _plan(results)
    rec = {"gpu": "L4", "gpus_needed": 7, "gpus_needed_range": [5, 9], "settings": SETTINGS,
           "binding": "underrun", "max_streams_range": [3, 5], "usd_per_audio_hour": 0.0123,
           "measured": False}  # fmt: skip
    sc2 = sc.model_copy(update={"recommended": rec})
    fields = dict(answer(path, sc2).fields)
    l4 = next(r for r in sc.rows if r.gpu == "L4")  # the centre comes from the card's row
    assert fields == {
        "card": "7 x L4 (5-9 across the overhead's range)",
        "setting": "fp16, cuda-graphs, 3 ms step overhead, first chunk 12 steps, max batch 32",
        "per GPU": f"{l4.max_streams} streams (3-5 across the overhead's range)",
        "cost": "$0.0123 per audio hour",
        "binding limit": "playback underrun (the stream stalls)",
        "basis": "projected, not measured on this card",
    }
    report = build_report(Inputs(plans=[(path, plan.model_copy(update={"scenarios": [sc2]}))]))
    html = to_html(report)
    start = html.index('<div class="answer" id="answer">')
    assert start < html.index("7 x L4 (5-9") < html.index('id="recommendation"') < html.index("<section>")
    box = html[start : html.index("<section>")]
    assert '<code class="cmd"><span>ttsperf</span> <span>serve</span> <span>--dtype fp16</span>' in box
    assert "ttsperf serve --dtype fp16 --cuda-graphs --max-batch 32" in text_of(box)
    md = to_markdown(report, tmp_path / "c", "c")
    assert (
        "| card | 7 x L4 (5-9 across the overhead's range) |" in md
        and "`ttsperf serve --dtype fp16 --cuda-graphs --max-batch 32`" in md
    )


def test_a_recommended_object_with_nulls_says_what_the_plan_did_not_give(results):
    path, _, sc = _plan(results)
    rec = {"gpu": "T4", "gpus_needed": 2, "settings": None, "binding": None, "max_streams_range": None,
           "usd_per_audio_hour": None, "measured": True}  # fmt: skip
    fields = dict(answer(path, sc.model_copy(update={"recommended": rec})).fields)
    assert fields["card"] == "2 x T4" and fields["basis"] == "measured: a profile of this card"
    assert fields["binding limit"] == fields["cost"] == "not given by the plan"
    t4 = next(r for r in sc.rows if r.gpu == "T4")
    assert fields["per GPU"] == f"{t4.max_streams} streams"


def test_the_cost_chart_plots_the_scenarios_slo_metric_and_its_limit(results):
    _, _, sc = _plan(results)
    assert list(sc.slo.limits)[0] == "ttfa_p99"
    svg = cost_svg(sc)
    texts = _texts(svg)
    assert any("cost vs TTFA P99" in t for t in texts) and "TTFA P99" in texts
    assert "SLO ttfa_p99 &lt;= 300 ms" in texts
    for r in sc.rows:
        if r.meets_slo and r.usd_per_audio_hour is not None:
            assert r.gpu in texts, r.gpu  # the full name, never cut
    ticks = [t for t in texts if re.fullmatch(r"[$\d.,]+( ms| s)?", t)]
    assert any(t.endswith(" ms") for t in ticks)  # the axis stays below 1 s: milliseconds
    assert all(len(re.sub(r"\D", "", t).lstrip("0")) <= 4 for t in ticks), ticks  # no 0.2314
    assert svg == cost_svg(sc) and "<dc:date>" not in svg  # the same bytes for the same plan


def test_both_slo_spellings_pick_the_same_axis(results):
    _, _, sc = _plan(results)
    for metric in ("p99", "e2e_p99", "latency_p99"):
        sc2 = sc.model_copy(update={"slo": sc.slo.model_copy(update={"limits": {metric: 2.0}})})
        assert axis(sc2)[:2] == ("p99_s", "E2E P99")
        assert f"SLO {metric} &lt;= 2 s" in _texts(cost_svg(sc2))
    none = sc.model_copy(update={"slo": sc.slo.model_copy(update={"limits": {}})})
    assert axis(none)[3] is None and "E2E P99 (this scenario has no latency bound)" in _texts(cost_svg(none))


def test_the_real_plans_recommended_object_and_a_rate_load(results):
    path, _, sc = _plan(results)
    rec = sc.recommended  # what plan wrote for this fixture: the box shows it, nothing unknown
    fields = dict(answer(path, sc).fields)
    assert fields["card"].startswith(f"{rec.gpus_needed} x {rec.gpu}") and "unknown" not in str(fields)
    assert fields["setting"].startswith(f"{rec.settings.dtype}, {rec.settings.mode}")
    assert answer(path, sc).serve_flags == rec.settings.serve_flags
    rate = {"gpu": "T4", "gpus_needed": 3, "settings": None, "binding": "throughput",
            "max_streams_range": None, "max_rate_range": [0.8123, 1.25], "usd_per_audio_hour": 0.01,
            "measured": False}  # fmt: skip
    fields = dict(answer(path, sc.model_copy(update={"recommended": rate})).fields)
    # a rate load: the row of this streams plan holds no req/s centre, so the range alone
    assert fields["per GPU"] == "0.812-1.25 req/s" and fields["binding limit"] == "decode throughput"


def test_the_answer_carries_the_plans_bench_check_into_both_pages(results, tmp_path):
    path, plan, sc = _plan(results)
    rec = sc.recommended
    assert rec is not None and rec.check and rec.check.startswith("ttsperf bench URL")
    a = answer(path, sc)
    assert a.check == rec.check
    report = build_report(read_inputs([results / "plan.json"]))
    md = to_markdown(report, tmp_path / "charts", "charts")
    head = md.split("\n## ", 1)[0]  # above the first section: the answer
    assert f"check it: `{rec.check}`" in head and f"serve it: `{rec.settings.serve_flags}`" in head
    assert rec.check in text_of(to_html(report)).replace("&gt;", ">")


def test_every_scenario_gets_a_box_even_one_no_card_meets(results, tmp_path):
    """The second scenario's answer is a box like the first (fields, commands, sentence), and a
    scenario that no card meets has a box with its sentence alone, which says so."""
    path, plan, sc = _plan(results)
    second = sc.model_copy(update={"scenario": "second"})
    said = "nothing (ttfa_p99=1ms): no card meets the SLO."  # plan's own sentence, shown in English
    unmet = [r.model_copy(update={"meets_slo": False}) for r in sc.rows]
    nothing = sc.model_copy(
        update={"scenario": "nothing", "recommended": None, "recommendation": said, "rows": unmet}
    )
    three = plan.model_copy(update={"scenarios": [sc, second, nothing]})
    report = build_report(Inputs(plans=[(path, three)]))
    assert [(o.scenario, o.box is None) for o in report.others] == [("second", False), ("nothing", True)]
    html = to_html(report)
    boxes = html.split('<div class="answer" ')[1:]  # each box and what follows it
    assert [b.split('"')[1] for b in boxes] == ["answer", "answer-second", "answer-nothing"]
    assert "<dt>card</dt>" in boxes[1] and "serve it:" in boxes[1]
    assert "<h2>The answer: nothing</h2><p" in boxes[2] and said in boxes[2].split("</div>")[0]
    md = to_markdown(report, tmp_path / "c", "c")
    assert md.count("| card |") == 2 and "nothing" in md
