"""Line charts as standalone SVG strings: no plotting library, no network, the same file works
inline in the HTML page and linked from report.md.

A chart is a title, axis labels, a few named series of (x, y) points and optional horizontal
lines (an SLO bound). Axes start at zero, so a small wobble does not look like a collapse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

W, H = 640, 380
LEFT, RIGHT, TOP, BOTTOM = 72, 20, 44, 78
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    dashed: bool = False


@dataclass
class HLine:
    label: str
    y: float
    color: str = "#d62728"


@dataclass
class LineChart:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    hlines: list[HLine] = field(default_factory=list)
    markers: bool = True

    def svg(self) -> str:
        return line_chart_svg(self)


def nice_ticks(hi: float, n: int = 5) -> list[float]:
    """0 .. >= hi in round steps (1, 2, 2.5 or 5 times a power of ten)."""
    if not hi > 0:
        return [0.0, 1.0]
    raw = hi / (n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(math.ceil(hi / step - 1e-9)) + 1)]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def line_chart_svg(c: LineChart) -> str:
    pts = [p for s in c.series for p in s.points]
    xs_max = max((x for x, _ in pts), default=1.0)
    ys_max = max([y for _, y in pts] + [h.y for h in c.hlines] + [0.0])
    xt, yt = nice_ticks(xs_max), nice_ticks(ys_max * 1.05 if ys_max > 0 else 1.0)
    x1, y1 = xt[-1], yt[-1]

    def px(x: float) -> float:
        return LEFT + x / x1 * (W - LEFT - RIGHT)

    def py(y: float) -> float:
        return H - BOTTOM - y / y1 * (H - TOP - BOTTOM)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">{escape(c.title)}</text>',
    ]
    for t in yt:
        out.append(f'<line x1="{LEFT}" y1="{py(t):.1f}" x2="{W - RIGHT}" y2="{py(t):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in xt:
        out.append(f'<text x="{px(t):.1f}" y="{H - BOTTOM + 17}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>')
    mid_y = (TOP + H - BOTTOM) / 2
    out.append(
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - BOTTOM + 36}" text-anchor="middle">'
        f"{escape(c.xlabel)}</text>"
    )
    out.append(
        f'<text x="16" y="{mid_y}" text-anchor="middle" transform="rotate(-90 16 {mid_y})">'
        f"{escape(c.ylabel)}</text>"
    )
    for h in c.hlines:
        out.append(
            f'<line x1="{LEFT}" y1="{py(h.y):.1f}" x2="{W - RIGHT}" y2="{py(h.y):.1f}" stroke="{h.color}" '
            'stroke-width="1.5" stroke-dasharray="2,3"/>'
        )
    legend = [(s.label, COLORS[i % len(COLORS)], s.dashed) for i, s in enumerate(c.series)]
    legend += [(h.label, h.color, True) for h in c.hlines]
    for i, s in enumerate(c.series):
        color = COLORS[i % len(COLORS)]
        dash = ' stroke-dasharray="6,4"' if s.dashed else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(s.points))
        if len(s.points) > 1:
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        if c.markers or len(s.points) == 1:
            for x, y in s.points:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"/>')
    # legend below the x axis label, left to right
    lx, ly = LEFT, H - 18
    for label, color, dashed in legend:
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(
            f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 22}" y2="{ly - 4}" stroke="{color}" '
            f'stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{lx + 26}" y="{ly}">{escape(label)}</text>')
        lx += 40 + 6.5 * len(label)
        if lx > W - 150:
            lx, ly = LEFT, ly + 14
    return "\n".join([*out, "</svg>"]) + "\n"
