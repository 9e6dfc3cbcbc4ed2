"""report/build.py: the recommendation first, then sections that name their sources (see conftest.py)."""

from __future__ import annotations

from ttsperf.report.build import build_report, recommendation
from ttsperf.report.document import Chart
from ttsperf.report.inputs import Inputs, read_inputs


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


def test_every_section_names_its_sources_and_charts_have_unique_names(results):
    report = build_report(read_inputs([results]))
    assert all(s.sources for s in report.sections)
    names = [c.name for c in report.charts()]
    assert len(names) == len(set(names)) >= 7
    assert all(isinstance(c, Chart) and c.svg.startswith("<svg") for c in report.charts())
    assert report.missing == []
