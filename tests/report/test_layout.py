"""Issue 35's report, read in a real Chromium at 800 and 1280 px: no sideways scroll at 800 px,
every scenario's answer in a box like the first, no command broken inside a word (a flag kept with
its value), and no two texts of a chart (card names, ticks, titles, legend) overlapping.

The report is the one `make demo` writes: bench, profile and a plan of every scenario over the whole
catalog. Each check is a function that lists what is wrong, and each is shown to catch a page
built to fail it. The screenshots land in the test's tmp dir (docs/report-800.png and
docs/report-1280.png are their tops, see README).
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest

from ttsperf.plan.schema import Plan
from ttsperf.report import write_report

from .chromium import render

pytestmark = pytest.mark.slow  # a real chromium on a full report, twice

LAYOUT = (Path(__file__).parent / "layout.js").read_text()
WIDTHS = (800, 1280)


def overflow(probe: dict) -> list[str]:
    if probe["scrollWidth"] > probe["clientWidth"]:
        return [f"the page scrolls sideways: {probe['scrollWidth']} > {probe['clientWidth']} px"]
    return []


def broken_commands(probe: dict) -> list[str]:
    """Words of a <code> laid over two lines, and a flag on another line than its value."""
    bad = []
    for c in probe["commands"]:
        words = c["words"]
        bad += [f"{w['word']!r} broken in {c['text']!r}" for w in words if len(w["tops"]) != 1]
        for flag, value in zip(words, words[1:], strict=False):
            if flag["word"].startswith("-") and not value["word"].startswith("-"):
                if flag["tops"][:1] != value["tops"][:1]:
                    bad.append(f"{flag['word']} apart from its value {value['word']!r}")
    return bad


def unboxed(probe: dict, scenarios: list[str]) -> list[str]:
    """A scenario without its own box, a box unlike the first, or a sentence outside any box."""
    boxes = probe["answers"]
    if not boxes:
        return ["no answer box"]
    first = boxes[0]
    bad = [f"outside a box: {t[:60]!r}" for t in probe["loose"]]
    for sc in scenarios:
        mine = [b for b in boxes if f"The answer: {sc}" in b["title"]]
        if len(mine) != 1:
            bad.append(f"{sc}: {len(mine)} boxes")
            continue
        b = mine[0]
        if not (b["sentence"] or "").startswith(sc):
            bad.append(f"{sc}: its box holds no sentence of it")
        look = ("background", "border", "w", "ddFont")
        if any(b[k] != first[k] for k in look):
            bad.append(f"{sc}: a box unlike the first ({[(b[k], first[k]) for k in look]})")
    return bad


def overlapping_texts(probe: dict) -> list[str]:
    """Pairs of texts of one chart whose boxes intersect (touching is not intersecting)."""
    bad = []
    for chart in probe["charts"]:
        for a, b in combinations(chart["texts"], 2):
            dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            if dx > 0 and dy > 0:
                bad.append(f"{chart['id']}: {a['text']!r} over {b['text']!r} ({dx:.1f} x {dy:.1f} px)")
    return bad


@pytest.fixture(scope="module")
def pages(chromium, every_scenario, tmp_path_factory):
    out = tmp_path_factory.mktemp("layout")
    html = write_report([every_scenario], out / "report.html").html
    shots = {}
    for width in WIDTHS:
        page = render(html, width=width, script=LAYOUT)
        (out / f"report-{width}.png").write_bytes(page.png)
        assert page.errors == [], page.errors
        shots[width] = page
    plan = Plan.model_validate(json.loads((every_scenario / "plan.json").read_text()))
    return shots, plan


def test_the_report_fits_800_px_without_scrolling_sideways(pages):
    shots, _ = pages
    for width in WIDTHS:
        assert overflow(shots[width].probe) == [], width


def test_every_scenario_has_its_answer_in_a_box_like_the_first(pages):
    shots, plan = pages
    scenarios = [sc.scenario for sc in plan.scenarios]
    assert len(scenarios) == 3  # realtime, offline, 10,000 users
    for width in WIDTHS:
        assert unboxed(shots[width].probe, scenarios) == [], width


def test_commands_wrap_between_words_only(pages):
    shots, _ = pages
    for width in WIDTHS:
        probe = shots[width].probe
        # the long commands are there and do wrap at 800 px: the check has something to check
        lines = [len({w["tops"][0] for w in c["words"]}) for c in probe["commands"]]
        assert len(probe["commands"]) >= 6 and (width > 800 or max(lines) >= 2)
        assert broken_commands(probe) == [], width


def test_no_two_texts_of_a_chart_overlap(pages):
    shots, plan = pages
    for width in WIDTHS:
        probe = shots[width].probe
        pareto = [c for c in probe["charts"] if c["id"].startswith("chart-pareto")]
        assert len(pareto) == len(plan.scenarios)
        cards = {r.gpu for sc in plan.scenarios for r in sc.rows}
        assert all(sum(t["text"] in cards for t in c["texts"]) >= 10 for c in pareto)  # crowded charts
        assert overlapping_texts(probe) == [], width


def test_the_checks_catch_a_page_built_to_fail_them(chromium, tmp_path):
    """A wide table, a command in a narrow box with no place to break but its hyphens, a second
    scenario as a loose paragraph and two chart labels drawn over each other."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body>'
        '<div class="answer" id="answer"><h2>The answer: realtime</h2><dl><dt>a</dt><dd>b</dd></dl>'
        '<p class="recommendation">realtime: yes</p></div>'
        '<p class="recommendation">offline: a small grey paragraph</p>'
        '<div style="width: 80px"><code>serve --max-prompt-tokens 64</code></div>'
        '<table><tr><td style="min-width: 1200px">wide</td></tr></table>'
        '<figure class="chart" id="chart-pareto"><svg width="300" height="100">'
        '<text x="10" y="50">RTX 4090</text><text x="20" y="52">RTX 3090</text></svg></figure>'
        "</body></html>"
    )
    probe = render(page, width=800, script=LAYOUT).probe
    assert overflow(probe)
    assert any("'--max-prompt-tokens' broken" in b for b in broken_commands(probe)), broken_commands(probe)
    assert any("offline" in b for b in unboxed(probe, ["realtime", "offline"]))
    assert any("'RTX 4090' over 'RTX 3090'" in b for b in overlapping_texts(probe))


def test_card_names_do_not_overlap_when_the_cards_crowd_together(chromium, every_scenario, tmp_path):
    """The demo's realtime chart with every card moved into one small patch (2% of the axis
    apart): the names must still find room, not stack on each other."""
    plan = Plan.model_validate(json.loads((every_scenario / "plan.json").read_text()))
    sc = plan.scenarios[0]
    rows = [r for r in sc.rows if r.meets_slo and r.usd_per_audio_hour is not None]
    moved = {r.gpu: {"ttfa_p99_s": 0.1 + 0.002 * (i % 5), "usd_per_audio_hour": 0.01 + 0.0002 * (i // 5)}
             for i, r in enumerate(rows)}  # fmt: skip
    crowded = sc.model_copy(update={"rows": [r.model_copy(update=moved.get(r.gpu, {})) for r in sc.rows]})
    (tmp_path / "plan.json").write_text(json.dumps(plan.model_copy(update={"scenarios": [crowded]}).dump()))
    html = write_report([tmp_path / "plan.json"], tmp_path / "report.html").html
    page = render(html, width=800, script=LAYOUT)
    (tmp_path / "crowded-800.png").write_bytes(page.png)
    (chart,) = [c for c in page.probe["charts"] if c["id"].startswith("chart-pareto")]
    assert sum(t["text"] in moved for t in chart["texts"]) == len(rows) >= 10
    assert overlapping_texts(page.probe) == []
