"""What the section tests read from a report: a section's tables, a chart's data lines."""

from __future__ import annotations

import re

from ttsperf.report.document import Table


def tables(sec) -> list[Table]:
    return [b for b in sec.blocks if isinstance(b, Table)]


def series_points(svg: str) -> list[int]:
    """Vertices of each data line matplotlib drew (ttsperf.charts names them series-N)."""
    return [d.count("L") + 1 for d in re.findall(r'<g id="series-\d+">\s*<path d="([^"]+)"', svg)]


def text_of(html: str) -> str:
    """The page's text without its tags (a command is set as one span per word or flag and value)."""
    return re.sub(r"<[^>]+>", "", html)
