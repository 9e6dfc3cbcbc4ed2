"""An SLO (ttsperf.slo's grammar) against one load point -> pass, fail or inconclusive.

A percentile limit is judged by its distribution-free interval, not by its point estimate: pass
when the interval's far end meets the limit (for `<=`, its high end is at or under it), fail when
its near end already violates it, inconclusive otherwise, with about how many requests would settle
it if later requests behave like these. A mean, a max or a run-level scalar is judged as measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ttsperf.bench.metrics import underrun_s
from ttsperf.bench.quantiles import CONFIDENCE, interval, needed_n, percentile, settle_n
from ttsperf.bench.results import Constraint, PointResult, RequestRecord, Verdict
from ttsperf.slo import Limit
from ttsperf.slo import parse as parse_slo

__all__ = ["parse_slo", "evaluate", "meets_request_bounds", "describe", "fmt_value", "requests_to_decide"]

PER_REQUEST = ("e2e", "ttfa", "intended", "queue", "rtf", "underrun")  # one value per request


def per_request_value(metric: str, r: RequestRecord) -> float | None:
    if not r.ok or r.t_send is None or r.t_end is None:
        return None
    if metric == "e2e":
        return r.t_end - r.t_send
    if metric == "ttfa":
        return None if r.t_first_audio is None else r.t_first_audio - r.t_send
    if metric == "intended":
        return r.t_end - r.t_sched
    if metric == "queue":
        return r.t_send - r.t_sched
    if metric == "rtf":
        return (r.t_end - r.t_send) / r.audio_s if r.audio_s else None
    if metric == "underrun":
        return underrun_s(r)
    return None


def meets_request_bounds(bounds: Sequence[Limit]):
    """For goodput: a request counts when its own e2e/ttfa/rtf/... are within every such bound."""
    per_req = [b for b in bounds if b.metric in PER_REQUEST]
    if not per_req:
        return None

    def check(r: RequestRecord) -> bool:
        for b in per_req:
            v = per_request_value(b.metric, r)
            if v is None or not b.ok(v):
                return False
        return True

    return check


def _samples(metric: str, point_records: Sequence[RequestRecord]) -> list[float]:
    if metric == "gap":
        return [b - a for r in point_records if r.ok for a, b in zip(r.chunk_t, r.chunk_t[1:], strict=False)]
    return [v for r in point_records if (v := per_request_value(metric, r)) is not None]


def _scalar(metric: str, p: PointResult) -> float | None:
    if metric.startswith("gpu_"):
        return p.telemetry.get(metric)
    return getattr(p, metric)


def _percentile(c: Constraint, b: Limit, xs: list[float], confidence: float) -> None:
    q = b.quantile
    c.value = percentile(xs, q)
    lo, hi = interval(xs, q, confidence)
    c.ci = [lo, hi]
    far, near = (hi, lo) if b.op == "<=" else (lo, hi)  # the end that must meet it, the one that can break it
    if far is not None and b.ok(far):
        c.status = "pass"
    elif near is not None and not b.ok(near):
        c.status = "fail"
    else:
        settle = settle_n(xs, q, b.op, b.value, confidence)
        c.settle_n = settle[0] if settle else None
        end = "high" if b.op == "<=" else "low"
        why = (
            f"its {end} end needs n >= {needed_n(q, confidence)[1 if b.op == '<=' else 0]}"
            if far is None
            else "the interval straddles the limit"
        )
        then = (
            f"about {settle[0]} requests would settle it ({settle[1]} if later ones behave alike)"
            if settle
            else f"more requests are unlikely to settle it (the {b.stat} sits at the limit)"
        )
        c.note = f"{why}; {then}"


def evaluate(
    bounds: Sequence[Limit],
    point: PointResult,
    records: Sequence[RequestRecord],
    confidence: float = CONFIDENCE,
) -> Verdict:
    measured = [r for r in records if not r.warmup]
    out: list[Constraint] = []
    for b in bounds:
        c = Constraint(name=b.name, op=b.op, bound=b.value)
        if b.stat is None:
            c.value = _scalar(b.metric, point)
            if c.value is None:
                c.note = "not measured in this run"
        else:
            xs = _samples(b.metric, measured)
            c.n = len(xs)
            if not xs:
                c.note = "no successful samples"
            elif b.quantile is None:
                c.value = float(max(xs) if b.stat == "max" else sum(xs) / len(xs))
            else:
                _percentile(c, b, xs, confidence)
        if c.value is not None:
            c.margin = b.value - c.value if b.op == "<=" else c.value - b.value
            if c.ci is None:  # judged as measured
                c.status = "pass" if b.ok(c.value) else "fail"
        out.append(c)
    if point.requests and not point.successes:  # a dead server fails every limit it was held to
        for c in out:
            if c.value is None:
                c.status, c.note = "fail", f"no request succeeded ({point.requests} sent)"
    status = "fail" if any(c.status == "fail" for c in out) else (
        "inconclusive" if any(c.status == "inconclusive" for c in out) else "pass"
    )  # fmt: skip
    return Verdict(
        status=status,
        constraints=out,
        failures=[describe(c) for c in out if c.status == "fail"],
        undecided=[describe(c) for c in out if c.status == "inconclusive"],
    )


def fmt_value(name: str, v: float) -> str:
    metric = name.rpartition("_")[0] if "_p" in name or name.endswith(("_mean", "_max")) else name
    if name in ("error_rate", "gpu_util_mean"):
        return f"{100 * v:.2f}%"
    if metric in ("e2e", "latency", "ttfa", "intended", "queue", "gap", "underrun"):
        return f"{1000 * v:.1f} ms" if abs(v) < 1 else f"{v:.3f} s"
    if name == "gpu_mem_max":
        return f"{v / 1e9:.2f} GB"
    return f"{v:.3g}"


def _ci(name: str, ci: list[float | None]) -> str:
    return "[" + ", ".join("-" if e is None else fmt_value(name, e) for e in ci) + "]"


def describe(c: Constraint) -> str:
    """One line for the verdict: value, limit, margin, n and interval, and what would settle it."""
    if c.value is None:
        return f"{c.name}: {c.note}"
    margin = abs(c.margin or 0.0)
    rel = f" ({margin / abs(c.bound):.0%})" if c.bound else ""
    side = ("over by " if c.op == "<=" else "under by ") if (c.margin or 0.0) < 0 else "spare "
    n = f", n={c.n}" if c.n is not None else ""
    ci = f", CI {_ci(c.name, c.ci)}" if c.ci else ""
    note = f": {c.note}" if c.note else ""
    return (
        f"{c.name} = {fmt_value(c.name, c.value)}, limit {c.op} {fmt_value(c.name, c.bound)}, "
        f"{side}{fmt_value(c.name, margin)}{rel}{n}{ci}{note}"
    )


SETTLE_MARGIN = 1.1  # settle_n assumes later requests fall like these; ask a little more than it says


def requests_to_decide(verdict: Verdict, requests: int, cap: int) -> int:
    """How many more requests at the same load would decide an inconclusive verdict: 0 when it is
    decided, when more requests cannot decide it (a limit not measured, a percentile sitting at
    its limit) or at `cap` measured requests. A percentile's settle_n counts its samples; requests
    are scaled by the share that gave one (errors give none)."""
    pending = [c for c in verdict.constraints if c.status == "inconclusive"]
    if not pending or any(c.settle_n is None or not c.n for c in pending):
        return 0
    need = max(math.ceil(c.settle_n * SETTLE_MARGIN * requests / c.n) for c in pending)
    return max(0, min(cap, need) - requests)
