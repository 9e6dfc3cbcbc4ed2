"""report/plan_section.py: the cost table and Pareto chart of a real plan (see conftest.py)."""

from __future__ import annotations

from ttsperf.report.inputs import read_inputs
from ttsperf.report.plan_section import plan_sections

from .blocks import tables as _tables


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


def test_a_plan_in_yuan_is_reported_in_yuan(tmp_path):
    """Every cost of a plan is in its currency: the table's headers and the chart's axis say CNY."""
    from pathlib import Path

    from ttsperf.plan.api import make_plan

    plan = make_plan(scenario="offline", gpus="T4,RTX 4090", currency="CNY", requests=100)
    (sec,) = plan_sections(Path("plan.json"), plan, "k")
    (table,) = _tables(sec)
    assert {"CNY/GPU-h", "CNY/h", "CNY/audio-h"} <= set(table.headers) and "$/h" not in table.headers
    (chart,) = sec.charts()
    assert "CNY per audio hour" in chart.svg and "USD" not in chart.svg
