"""Cost per audio hour against the scenario's own SLO metric, one point per card, Pareto front
marked and the SLO limit drawn (matplotlib, inline SVG).

The x-axis is the metric the scenario bounds (realtime: TTFA P99), so a card's distance from the
line is its headroom. A card is on the Pareto front when no other card is both cheaper per audio
hour and lower on that metric. Only GPU rows that meet the SLO and have a price are drawn: a
profiled non-GPU device is never a candidate.
"""

from __future__ import annotations

import math

from matplotlib.path import Path
from matplotlib.transforms import Bbox

from ttsperf.charts import LIMIT_COLOR, figure, plain_formatter, round_ticks, seconds_formatter, to_svg
from ttsperf.plan.money import DEFAULT_CURRENCY, unit
from ttsperf.plan.schema import PlanRow, ScenarioPlan
from ttsperf.slo import METRIC_ALIASES, NAME_ALIASES

# Canonical SLO name (ttsperf.slo's: `e2e_p99`, never plan's older `p99`) -> (the PlanRow field
# holding it, axis label, in seconds?): the one place that maps an SLO onto a plan row.
SLO_ROW_FIELD: dict[str, tuple[str, str, bool]] = {
    "ttfa_p99": ("ttfa_p99_s", "TTFA P99", True),
    "e2e_p99": ("p99_s", "E2E P99", True),
    "e2e_p50": ("p50_s", "E2E P50", True),
    "rtf_p99": ("rtf_p99", "RTF P99 (E2E / audio seconds)", False),
    "underrun_p99": ("underrun_p99_s", "playback underrun P99", True),
}
DEFAULT_AXIS = ("p99_s", "E2E P99", True)  # a scenario without a latency bound (offline)


def is_gpu(r: PlanRow) -> bool:
    """False for a profiled non-GPU device (`device: "other"`); plans written before that field
    existed only hold GPU rows and the profiled device's row, which cannot be told apart."""
    return getattr(r, "device", None) != "other"


def canonical(name: str) -> str:
    """`p99` and `latency_p99` -> `e2e_p99`, by ttsperf.slo's aliases; other names unchanged."""
    key = NAME_ALIASES.get(name.lower(), name.lower())
    metric, _, stat = key.rpartition("_")
    return f"{METRIC_ALIASES.get(metric, metric)}_{stat}" if metric else key


def axis(sc: ScenarioPlan) -> tuple[str, str, bool, str | None, float | None]:
    """(row field, label, seconds?, SLO metric, its limit): the scenario's first bound metric
    that a plan row holds."""
    for metric, limit in sc.slo.limits.items():
        if (name := canonical(metric)) in SLO_ROW_FIELD:
            return (*SLO_ROW_FIELD[name], metric, limit)
    return (*DEFAULT_AXIS, None, None)


def candidates(sc: ScenarioPlan, field: str) -> list[PlanRow]:
    return [
        r
        for r in sc.rows
        if r.meets_slo and is_gpu(r) and r.usd_per_audio_hour is not None and getattr(r, field) is not None
    ]


def pareto(rows: list[PlanRow], field: str = "p99_s") -> list[PlanRow]:
    """Rows not dominated on (usd_per_audio_hour, field), sorted by field."""
    front, best_cost = [], math.inf
    for r in sorted(rows, key=lambda r: (getattr(r, field), r.usd_per_audio_hour)):
        if r.usd_per_audio_hour < best_cost:  # type: ignore[operator]
            front.append(r)
            best_cost = r.usd_per_audio_hour  # type: ignore[assignment]
    return front


LABEL_SIZE = 9.5  # points


def _spots(px: float, py: float, w: float, h: float, r: float) -> list[Bbox]:
    """Where a w x h label of the point (px, py) may go, nearest first: right of the marker, left
    of it or centred above or below, stepped half a label up or down and a label's height further
    out at a time (display pixels), so a crowd's names can fan out into the empty part."""
    spots = []
    for k in range(20):
        for dy in {k * h / 2, -k * h / 2}:
            y0 = py - h / 2 + dy
            spots.append((abs(dy) + w / 4, Bbox.from_bounds(px - w / 2, y0, w, h)))
            for j in range(8):
                spots.append((math.hypot(j * h, dy), Bbox.from_bounds(px + r + j * h, y0, w, h)))
                spots.append((math.hypot(j * h, dy) + w / 3, Bbox.from_bounds(px - r - w - j * h, y0, w, h)))
    return [box for _, box in sorted(spots, key=lambda s: s[0])]


def _near(box: Bbox, pt: tuple[float, float], r: float) -> bool:
    """The label touches its marker: no leader line needed (1.5 r: room for rounding)."""
    return box.x0 - 1.5 * r <= pt[0] <= box.x1 + 1.5 * r and box.y0 - 1.5 * r <= pt[1] <= box.y1 + 1.5 * r


def _leader(box: Bbox, pt: tuple[float, float]) -> Path:
    """The line annotate draws from a label's centre to its point (clipped at the label's edge)."""
    return Path([((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2), pt])


def _free(box: Bbox, pt, r: float, pad: tuple[float, float], markers: list[Bbox], labels: list[Bbox],
          lines: list[Path] | None) -> bool:  # fmt: skip
    """Nothing under the label: no marker or SLO line, no name within `pad` of it; with `lines`
    (the leader lines drawn so far), none of them under it either, and its own leader line, if it
    needs one, crosses no name (a line through a name reads as a strike)."""
    if any(box.overlaps(m) for m in markers) or any(box.padded(*pad).overlaps(b) for b in labels):
        return False
    if lines is None:
        return True
    if any(ln.intersects_bbox(box) for ln in lines):
        return False
    return _near(box, pt, r) or not any(_leader(box, pt).intersects_bbox(b) for b in labels)


def _place_labels(fig, ax, names: list[str], pts: list[tuple[float, float]], order: list[int],
                  slo_x: float | None) -> None:  # fmt: skip
    """Each card's name beside its point, no name over another or over a marker or the SLO line.

    Greedy, in display pixels with matplotlib's own text extents: the labels in `order` (the
    Pareto front first) each take the nearest free spot inside the axes; one set off its point
    gets a leader line, which crosses no name and under which no later name goes. With no free
    spot left, the nearest one in the axes (the browser test's overlap check would then fail: it
    measures the drawn labels). The layout is computed first and then frozen, so that the pixels
    placed here are where the SVG draws them.
    """
    fig.draw_without_rendering()  # constrained layout places the axes now...
    fig.set_layout_engine("none")  # ...and keeps them there while the labels are added
    px_per_pt = fig.dpi / 72
    r = 5 * px_per_pt  # a marker's radius (6 pt across) and a gap
    area = ax.get_window_extent()
    disp = [tuple(ax.transData.transform(p)) for p in pts]
    m = 4 * px_per_pt  # a marker's box, a little inside the gap r that a label keeps from its point
    markers = [Bbox.from_bounds(x - m, y - m, 2 * m, 2 * m) for x, y in disp]
    if slo_x is not None:
        lx = ax.transData.transform((slo_x, 0))[0]
        markers.append(Bbox.from_extents(lx - px_per_pt, area.y0, lx + px_per_pt, area.y1))
    # Room between two labels: side by side, enough to read as two names ("T4 A10" reads as one);
    # above each other, more than the difference between matplotlib's box of a line (1 em high)
    # and a browser's (its font's ascent + descent, DejaVu Sans: 1.16 em).
    pads = (0.4 * LABEL_SIZE * px_per_pt, 0.2 * LABEL_SIZE * px_per_pt)  # (x, y)
    labels: list[Bbox] = []  # the names placed so far, and their leader lines
    lines: list[Path] = []
    to_data = ax.transData.inverted()
    leader = {"arrowstyle": "-", "color": "#999", "lw": 0.6}
    for i in order:
        probe = ax.text(0, 0, names[i], fontsize=LABEL_SIZE)
        ext = probe.get_window_extent()  # the figure's own renderer measures it
        probe.remove()
        inside = [b for b in _spots(*disp[i], ext.width, ext.height, r)
                  if area.contains(b.x0, b.y0) and area.contains(b.x1, b.y1)]  # fmt: skip
        # the nearest spot free of names, markers and lines; else one free of names and markers
        # (its leader line may cross a name); else the nearest
        box = next((b for b in inside if _free(b, disp[i], r, pads, markers, labels, lines)), None)
        box = box or next((b for b in inside if _free(b, disp[i], r, pads, markers, labels, None)), None)
        box = box or (inside[0] if inside else Bbox.from_bounds(disp[i][0] + r, disp[i][1], 0, 0))
        near = _near(box, disp[i], r)
        labels.append(box)
        lines += [] if near else [_leader(box, disp[i])]
        ax.annotate(names[i], pts[i], xytext=tuple(to_data.transform((box.x0, box.y0))), textcoords="data",
                    fontsize=LABEL_SIZE, ha="left", va="bottom", arrowprops=None if near else leader,
                    gid=f"card-label-{i}")  # fmt: skip


def cost_svg(sc: ScenarioPlan) -> str:
    field, label, seconds, metric, limit = axis(sc)
    rows = candidates(sc, field)
    fig = figure((7.2, 4.4))
    ax = fig.subplots()
    ax.set_title(f"{sc.scenario}: cost vs {label} at the target load (projected)")
    ax.set_xlabel(label + ("" if metric else " (this scenario has no latency bound)"))
    currency = next((r.currency for r in sc.rows), DEFAULT_CURRENCY)
    ax.set_ylabel(f"{currency} per audio hour")
    if not rows:
        ax.text(0.5, 0.5, "no GPU meets the SLO with a price", ha="center", transform=ax.transAxes)
        return to_svg(fig)
    xs = [getattr(r, field) for r in rows]
    ys = [r.usd_per_audio_hour for r in rows]
    front = pareto(rows, field)
    on_front = {r.gpu for r in front}
    hi_x = max([*xs, limit or 0.0])
    lo_x = min(xs)
    span = hi_x - lo_x or max(hi_x, 1e-3) * 0.2
    ax.set_xlim(max(0.0, lo_x - 0.15 * span), hi_x + 0.08 * span)
    ax.set_ylim(0, max(ys) * 1.25)
    if len(front) > 1:
        ax.plot([getattr(r, field) for r in front], [r.usd_per_audio_hour for r in front],
                color=LIMIT_COLOR, linewidth=1.5, label="Pareto front")  # fmt: skip
    ax.scatter(xs, ys, s=36, zorder=3, c=[LIMIT_COLOR if r.gpu in on_front else "#1f77b4" for r in rows])
    if limit is not None:
        shown = seconds_formatter(limit)(limit, 0) if seconds else f"{limit:g}"
        ax.axvline(limit, color=LIMIT_COLOR, linestyle=":", linewidth=1.8, label=f"SLO {metric} <= {shown}")
    round_ticks(ax.xaxis)
    round_ticks(ax.yaxis)
    # where both axes start at 0, the default 3.5 pt pads put "0 s" and "$0" on each other's corner
    ax.tick_params(axis="both", pad=6)
    ax.xaxis.set_major_formatter(seconds_formatter(hi_x) if seconds else plain_formatter())
    sign = unit(currency)
    ax.yaxis.set_major_formatter(plain_formatter(sign if sign == "$" else f"{sign} "))
    if ax.get_legend_handles_labels()[0]:  # below the axes: inside, it would cover card names
        fig.legend(loc="outside lower center", ncols=2, fontsize=9)
    order = sorted(range(len(rows)), key=lambda i: (rows[i].gpu not in on_front, ys[i], xs[i]))
    _place_labels(fig, ax, [r.gpu for r in rows], list(zip(xs, ys, strict=True)), order, limit)
    return to_svg(fig)
