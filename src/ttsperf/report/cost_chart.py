"""Cost per audio hour against the scenario's own SLO metric, one point per card, Pareto front
marked and the SLO limit drawn (matplotlib, inline SVG).

The x-axis is the metric the scenario bounds (realtime: TTFA P99), so a card's distance from the
line is its headroom. A card is on the Pareto front when no other card is both cheaper per audio
hour and lower on that metric. Only GPU rows that meet the SLO and have a price are drawn: a
profiled non-GPU device is never a candidate.
"""

from __future__ import annotations

import math

from matplotlib.transforms import offset_copy

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


def _label_heights(pts: list[tuple[float, float]], xr: float, sep: float) -> list[float]:
    """Label y per point, pushed up until no label near it in x sits within `sep` of it in y."""
    placed: list[tuple[float, float]] = []
    out = [0.0] * len(pts)
    for i in sorted(range(len(pts)), key=lambda i: pts[i][1]):
        x, y = pts[i]
        while any(abs(x - px) < 0.18 * xr and abs(y - py) < sep for px, py in placed):
            y += sep / 2
        placed.append((x, y))
        out[i] = y
    return out


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
    sep = max(ys) * 0.08  # about one label's height at this chart's size
    heights = _label_heights(list(zip(xs, ys, strict=True)), span, sep)
    ax.set_ylim(0, max(max(ys) * 1.25, max(heights) + sep))
    if len(front) > 1:
        ax.plot([getattr(r, field) for r in front], [r.usd_per_audio_hour for r in front],
                color=LIMIT_COLOR, linewidth=1.5, label="Pareto front")  # fmt: skip
    ax.scatter(xs, ys, s=36, zorder=3, c=[LIMIT_COLOR if r.gpu in on_front else "#1f77b4" for r in rows])
    if limit is not None:
        shown = seconds_formatter(limit)(limit, 0) if seconds else f"{limit:g}"
        ax.axvline(limit, color=LIMIT_COLOR, linestyle=":", linewidth=1.8, label=f"SLO {metric} <= {shown}")
    beside = offset_copy(ax.transData, fig=fig, x=5, units="points")  # the label starts 5 pt right
    leader = {"arrowstyle": "-", "color": "#999", "lw": 0.6}  # from a label moved off its point
    for r, x, y, ly in zip(rows, xs, ys, heights, strict=True):
        ax.annotate(r.gpu, (x, y), xytext=(x, ly), textcoords=beside, fontsize=9.5, va="center", ha="left",
                    arrowprops=leader if ly != y else None)  # fmt: skip
    round_ticks(ax.xaxis)
    round_ticks(ax.yaxis)
    ax.xaxis.set_major_formatter(seconds_formatter(hi_x) if seconds else plain_formatter())
    sign = unit(currency)
    ax.yaxis.set_major_formatter(plain_formatter(sign if sign == "$" else f"{sign} "))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=9)
    return to_svg(fig)
