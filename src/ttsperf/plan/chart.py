"""Cost vs P99 per scenario as a standalone SVG, Pareto front marked (no plotting dependency).

A card is on the Pareto front when no other card is both cheaper per audio hour and lower in P99
latency at the target load. Only cards that meet the SLO and have a price are drawn.
"""

from __future__ import annotations

import math
from html import escape

from ttsperf.plan.schema import PlanRow, ScenarioPlan

W, H = 720, 440
LEFT, RIGHT, TOP, BOTTOM = 80, 30, 50, 60


def pareto(rows: list[PlanRow]) -> list[PlanRow]:
    """Rows not dominated on (usd_per_audio_hour, p99_s), sorted by P99."""
    pts = sorted(rows, key=lambda r: (r.p99_s, r.usd_per_audio_hour))
    front, best_cost = [], math.inf
    for r in pts:
        if r.usd_per_audio_hour < best_cost:  # type: ignore[operator]
            front.append(r)
            best_cost = r.usd_per_audio_hour  # type: ignore[assignment]
    return front


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def svg(sc: ScenarioPlan) -> str:
    rows = [r for r in sc.rows if r.meets_slo and r.usd_per_audio_hour is not None and r.p99_s is not None]
    title = f"{sc.scenario}: cost vs P99 at the target load (projected)"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="24" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]
    if not rows:
        out.append(
            f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle">no card meets the SLO with a price</text>'
        )
        return "\n".join([*out, "</svg>"]) + "\n"
    xs = [r.p99_s for r in rows]
    ys = [r.usd_per_audio_hour for r in rows]
    x0, x1 = min(xs), max(xs)  # type: ignore[type-var]
    y0, y1 = 0.0, max(ys)  # type: ignore[type-var]
    x0, x1 = (x0 * 0.95, x1 * 1.05) if x1 > x0 else (x0 * 0.9, x0 * 1.1 + 1e-9)  # type: ignore[operator]
    y1 = y1 * 1.1 if y1 > 0 else 1.0  # type: ignore[operator]

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT)

    def py(y: float) -> float:
        return H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM)

    out.append(f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>')
    for t in _ticks(x0, x1):
        out.append(f'<text x="{px(t):.1f}" y="{H - BOTTOM + 18}" text-anchor="middle">{t:.2f}</text>')
    for t in _ticks(y0, y1):
        out.append(f'<text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{t:.4f}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 16}" text-anchor="middle">E2E P99 (s)</text>')
    out.append(
        f'<text x="18" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 18 {(TOP + H - BOTTOM) / 2})">USD per audio hour</text>'
    )
    front = pareto(rows)
    if len(front) > 1:
        pts = " ".join(f"{px(r.p99_s):.1f},{py(r.usd_per_audio_hour):.1f}" for r in front)  # type: ignore[arg-type]
        out.append(f'<polyline points="{pts}" fill="none" stroke="#d62728" stroke-width="1.5"/>')
    on_front = {r.gpu for r in front}
    for r in rows:
        x, y = px(r.p99_s), py(r.usd_per_audio_hour)  # type: ignore[arg-type]
        color = "#d62728" if r.gpu in on_front else "#1f77b4"
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}"/>')
        out.append(f'<text x="{x + 6:.1f}" y="{y - 6:.1f}">{escape(r.gpu)}</text>')
    out.append(
        f'<text x="{W - RIGHT}" y="{TOP - 8}" text-anchor="end" fill="#d62728">red: Pareto front</text>'
    )
    return "\n".join([*out, "</svg>"]) + "\n"
