"""The must-show test: report.html in a real headless Chromium (Debian's package, installed by
`make test` through tests/report/ensure_chromium.sh). Every chart is on the page and has pixels
drawn in it, the page logged no error and asked for nothing but itself.

No Chromium is a failure, not a skip: the report is only proven by a browser, and a skipped test
would let a machine without one look green. TTSPERF_CHROMIUM=/path points at another binary.
"""

from __future__ import annotations

import io
import re
from collections import Counter

import pytest
from PIL import Image

from ttsperf.charts import COLORS, LIMIT_COLOR
from ttsperf.report import write_report

from .chromium import render

pytestmark = pytest.mark.slow  # a real chromium on a demo report

DATA_COLORS = [tuple(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in [*COLORS, LIMIT_COLOR]]


def _data_pixels(im: Image.Image) -> int:
    """Pixels within a small distance of a series colour: lines and markers actually drawn."""
    rgb = im.convert("RGB")
    px = rgb.get_flattened_data() if hasattr(rgb, "get_flattened_data") else rgb.getdata()  # Pillow 12+
    return sum(
        1 for p in px if any(sum(abs(a - b) for a, b in zip(p, c, strict=True)) < 60 for c in DATA_COLORS)
    )


def _check_page(html_path, tmp_path, min_charts: int) -> None:
    html = html_path.read_text()
    ids = re.findall(r'<figure class="chart" id="([^"]+)"', html)
    assert len(ids) >= min_charts
    page = render(html_path)
    (tmp_path / "screenshot.png").write_bytes(page.png)
    assert page.errors == [], page.errors
    assert page.requests == [html_path.resolve().as_uri()]  # self-contained: nothing else fetched
    assert sorted(page.boxes) == sorted(ids)
    shot = Image.open(io.BytesIO(page.png))
    for name, b in page.boxes.items():
        assert b["width"] >= 300 and b["height"] >= 200, (name, b)
        crop = shot.crop((int(b["x"]), int(b["y"]), int(b["x"] + b["width"]), int(b["y"] + b["height"])))
        assert crop.size == (int(b["width"]), int(b["height"])), f"{name} lies outside the screenshot"
        colors = crop.convert("RGB").getcolors(maxcolors=1 << 16) or []
        assert len(colors) > 5, f"{name} is blank ({len(colors)} colours)"
        assert _data_pixels(crop) > 40, f"{name} has no series drawn"


def test_full_report_renders_every_chart_without_errors(chromium, results, tmp_path):
    w = write_report([results], tmp_path / "report.html")
    # latency, throughput, server CPU and RSS, memory and step vs batch, the plan's Pareto chart
    _check_page(w.html, tmp_path, min_charts=7)


def test_partial_demo_report_renders(chromium, partial_demo, tmp_path):
    _check_page(partial_demo / "report.html", tmp_path, min_charts=2)


def test_the_check_catches_a_blank_chart(chromium, tmp_path):
    page = tmp_path / "blank.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body>'
        '<figure class="chart" id="chart-empty"><svg xmlns="http://www.w3.org/2000/svg" width="640" '
        'height="380"><rect width="640" height="380" fill="white"/></svg></figure></body></html>'
    )
    with pytest.raises(AssertionError, match="chart-empty is blank"):
        _check_page(page, tmp_path, min_charts=1)


def test_the_chinese_report_reads_chinese_in_the_browser_with_the_same_numbers(chromium, results, tmp_path):
    """`report --lang zh` as a reader sees it: the title, headings and answer box in Chinese, the
    charts drawn, and every number of the answer box and headings as in the English page."""
    zh = write_report([results], tmp_path / "zh" / "r.html", "zh")
    en = write_report([results], tmp_path / "en" / "r.html")
    _check_page(zh.html, tmp_path, min_charts=7)
    shown = "h1, h2, #answer dt, #answer dd, #recommendation"
    zh_page, en_page = render(zh.html, selector=shown), render(en.html, selector=shown)
    assert zh_page.title == "ttsperf 报告" and en_page.title == "ttsperf report"
    assert list(zh_page.boxes) == list(en_page.boxes)
    han, number = re.compile(r"[\u4e00-\u9fff]"), re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
    for key, box in zh_page.boxes.items():
        text = box["text"]
        if key.startswith(("h1", "h2", "dt")):
            assert han.search(text), (key, text)
        if key.startswith(("h1", "h2", "dd")):
            assert Counter(number.findall(text)) == Counter(number.findall(en_page.boxes[key]["text"])), key
    labels = [b["text"] for k, b in zh_page.boxes.items() if k.startswith("dt")]
    assert labels == ["显卡", "配置", "单卡容量", "成本", "瓶颈", "依据"], labels
    assert "满足要求的最便宜方案是" in zh_page.boxes["recommendation"]["text"]
