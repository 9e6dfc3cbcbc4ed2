"""matplotlib, set up once for every chart ttsperf draws: bench's PNGs and the report's inline SVGs.

Headless (the Agg backend, chosen explicitly: no display, no GUI toolkit), one readable style, and
SVG that is the same bytes for the same data (a fixed hash salt for the ids, no date, text kept as
text so that the page stays small and searchable). Nothing here fetches anything.

    from ttsperf.charts import line_chart
    svg = line_chart("Latency vs load", "concurrency", "latency", [Series("E2E P50", [(1, 0.2)])])
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere: a headless machine has no display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

# tab10: the series colours (tests/report finds drawn data by them), then the SLO/limit colour.
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]
LIMIT_COLOR = "#d62728"
STYLE = {
    "font.size": 11,
    "axes.titlesize": 13,
    "axes.labelsize": 11,
    "legend.fontsize": 9.5,
    "axes.prop_cycle": matplotlib.cycler(color=COLORS),
    "axes.grid": True,
    "grid.alpha": 0.3,
    # matplotlib measures with its own DejaVu Sans; the browser uses it, or the next that it has
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "svg.fonttype": "none",  # <text>, drawn by the browser's fonts: smaller, and findable on the page
    "svg.hashsalt": "ttsperf",  # the clip-path ids, otherwise random per run
}
matplotlib.rcParams.update(STYLE)
SIZE = (6.2, 3.7)  # inches: about 620 x 380 px in a browser, two side by side on a laptop screen


def pyplot():
    """pyplot with the style above (for code that writes files through plt, e.g. bench's PNGs)."""
    return plt


def figure(size: tuple[float, float] = SIZE) -> Figure:
    """A figure outside pyplot's registry: nothing to close, nothing kept between charts."""
    return Figure(figsize=size, layout="constrained")


def to_svg(fig: Figure) -> str:
    """The figure as an `<svg>` element for inlining in HTML (no XML prologue, no date)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buf.getvalue()
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text[text.index("<svg") :], count=1, flags=re.S)
    # Whole CSS pixels (1 pt = 4/3 px; the viewBox keeps the drawing's scale): a chart's box on
    # the page then lies on the pixel grid, as a screenshot crops it.
    return re.sub(
        r'(width|height)="([\d.]+)pt"', lambda m: f'{m[1]}="{round(float(m[2]) * 4 / 3)}"', text, count=2
    )


def _g(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def seconds_formatter(hi: float) -> FuncFormatter:
    """Ticks in ms when the axis stays below 1 s, else in s: "250 ms", "1.5 s", never 0.2314."""
    if hi < 1:
        return FuncFormatter(lambda v, _: f"{1000 * v:.4g} ms")
    return FuncFormatter(lambda v, _: f"{_g(v)} s")


def plain_formatter(prefix: str = "", suffix: str = "") -> FuncFormatter:
    return FuncFormatter(lambda v, _: f"{prefix}{_g(v)}{suffix}")


def round_ticks(axis) -> None:
    """At most 6 ticks on 1/2/5 x 10^k steps (no 292.5 ms)."""
    axis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 5, 10]))


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    dashed: bool = False
    intervals: list[tuple[float, float, float]] = field(default_factory=list)  # (x, low, high)


@dataclass
class HLine:
    label: str
    y: float


@dataclass
class LineChart:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    hlines: list[HLine] = field(default_factory=list)
    markers: bool = True
    seconds: bool = False  # the y values are seconds: ticks in ms or s

    def svg(self) -> str:
        return line_chart(self)


def line_chart(c: LineChart) -> str:
    """Lines of (x, y) points, both axes from zero (a small wobble does not look like a collapse)."""
    fig = figure()
    ax = fig.subplots()
    for i, s in enumerate(c.series):
        pts = sorted(s.points)
        marker = "o" if c.markers or len(pts) == 1 else None
        (line,) = ax.plot([x for x, _ in pts], [y for _, y in pts], linestyle="--" if s.dashed else "-",
                marker=marker, markersize=5, linewidth=2, label=s.label, gid=f"series-{i}")  # fmt: skip
        if s.intervals:  # a confidence interval as a vertical bar in the line's colour
            xs, lo, hi = zip(*s.intervals, strict=True)
            ax.vlines(xs, lo, hi, colors=line.get_color(), linewidth=5, alpha=0.3, gid=f"series-{i}-ci")
    for h in c.hlines:
        ax.axhline(h.y, color=LIMIT_COLOR, linestyle=":", linewidth=1.8, label=h.label)
    ys = [y for s in c.series for _, y in s.points] + [h.y for h in c.hlines]
    ys += [hi for s in c.series for _, _, hi in s.intervals]
    hi = max(ys, default=1.0)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0, top=hi * 1.08 if hi > 0 and math.isfinite(hi) else 1.0)
    round_ticks(ax.xaxis)
    round_ticks(ax.yaxis)
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.yaxis.set_major_formatter(seconds_formatter(hi) if c.seconds else plain_formatter())
    ax.set_title(c.title)
    ax.set_xlabel(c.xlabel)
    ax.set_ylabel(c.ylabel)
    if c.series or c.hlines:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    return to_svg(fig)
