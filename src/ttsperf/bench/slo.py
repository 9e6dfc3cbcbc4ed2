"""`--slo ttfa_p99=300ms,e2e_p99=5s,rtf_p95=1,error_rate=1%,gpu_util_mean=85%` -> a verdict.

Each constraint names a metric and a statistic. Latency-like ones are upper bounds, throughput and
GPU utilisation lower bounds (the guide's "GPU-Util above 85%"); `<=`/`>=` may be written to say so
explicitly. A percentile that n cannot resolve never passes: the verdict says how many requests
it needs instead of trusting a number that is really the maximum of a few samples.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ttsperf.bench.metrics import PERCENTILES, bootstrap_ci, min_n, percentile, resolved
from ttsperf.bench.results import Constraint, PointResult, RequestRecord, Verdict
from ttsperf.errors import UserError

# metric -> (unit kind, default op, per-request value for percentile metrics)
DIST_METRICS = {
    "e2e": "time",
    "latency": "time",
    "ttfa": "time",
    "intended": "time",
    "queue": "time",
    "gap": "time",
    "rtf": "ratio",
}
STATS = {**PERCENTILES, "p999": 0.999, "mean": None, "max": None}
SCALAR_METRICS = {  # name -> (unit kind, default op)
    "error_rate": ("fraction", "<="),
    "throughput_rps": ("ratio", ">="),
    "goodput_rps": ("ratio", ">="),
    "audio_seconds_per_s": ("ratio", ">="),
    "underrun_max": ("time", "<="),
    "gpu_util_mean": ("fraction", ">="),
    "gpu_power_mean": ("ratio", "<="),
    "gpu_mem_max": ("bytes", "<="),
}
_TIME = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}
_BYTES = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_ITEM = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|=|<|>)\s*([0-9.eE+-]+)\s*([a-zA-Z%]*)\s*$")


@dataclass(frozen=True)
class Bound:
    name: str
    metric: str
    stat: str | None
    op: str
    value: float

    def ok(self, v: float) -> bool:
        return v <= self.value if self.op == "<=" else v >= self.value


def _unit(kind: str, num: float, unit: str, item: str) -> float:
    u = unit.lower()
    if kind == "time":
        if u == "":
            raise UserError(f"--slo {item!r}: give a time unit (ms or s), e.g. 300ms")
        if u not in _TIME:
            raise UserError(f"--slo {item!r}: unknown time unit {unit!r}; expected one of us, ms, s, min")
        return num * _TIME[u]
    if kind == "fraction":
        if u == "%":
            return num / 100.0
        if u == "" and 0 <= num <= 1:
            return num
        raise UserError(f"--slo {item!r}: expected a percentage like 1% (or a fraction 0..1)")
    if kind == "bytes":
        if u not in _BYTES:
            raise UserError(f"--slo {item!r}: expected a size like 20GB or 16GiB")
        return num * _BYTES[u]
    if u:
        raise UserError(f"--slo {item!r}: this metric takes a plain number, found unit {unit!r}")
    return num


def parse_slo(spec: str | None) -> list[Bound]:
    if not spec:
        return []
    bounds: list[Bound] = []
    for item in spec.split(","):
        if not item.strip():
            continue
        m = _ITEM.match(item)
        if not m:
            raise UserError(
                f"--slo {item.strip()!r}: expected NAME=VALUE, e.g. ttfa_p99=300ms or error_rate=1%"
            )
        name, op, num_s, unit = m.groups()
        try:
            num = float(num_s)
        except ValueError:
            raise UserError(f"--slo {item.strip()!r}: {num_s!r} is not a number") from None
        metric, _, stat = name.rpartition("_")
        if metric in DIST_METRICS and stat in STATS:
            kind, default_op = DIST_METRICS[metric], "<="
            metric = "e2e" if metric == "latency" else metric
        elif name in SCALAR_METRICS:
            metric, stat = name, None
            kind, default_op = SCALAR_METRICS[name]
        else:
            known = [f"{m}_p99" for m in DIST_METRICS] + list(SCALAR_METRICS)
            raise UserError(
                f"--slo {item.strip()!r}: unknown metric {name!r}; expected e.g. {', '.join(known)}"
            )
        op = {"=": default_op, "<": "<=", ">": ">="}.get(op, op)
        bounds.append(Bound(name, metric, stat, op, _unit(kind, num, unit, item.strip())))
    return bounds


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
    return None


def meets_request_bounds(bounds: Sequence[Bound]):
    """For goodput: a request counts when its own e2e/ttfa/rtf/... are within every such bound."""
    per_req = [b for b in bounds if b.metric in ("e2e", "ttfa", "intended", "queue", "rtf")]
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
    if metric == "underrun_max":
        return p.underrun.get("worst_s")
    if metric.startswith("gpu_"):
        return p.telemetry.get(metric)
    return getattr(p, metric)


def evaluate(bounds: Sequence[Bound], point: PointResult, records: Sequence[RequestRecord]) -> Verdict:
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
            p = STATS[b.stat]
            if not xs:
                c.note = "no successful samples"
            elif p is None:
                c.value = float(max(xs) if b.stat == "max" else sum(xs) / len(xs))
            elif not resolved(p, len(xs)):
                c.note = f"{b.stat} not resolved: n={len(xs)}, needs n >= {min_n(p)}"
            else:
                c.value = percentile(xs, p)
                lo, hi = bootstrap_ci(xs, p)
                c.ci95 = [lo, hi]
                if b.ok(lo) != b.ok(hi):
                    c.note = "the 95% interval straddles the bound: verdict not certain"
        if c.value is not None:
            c.margin = b.value - c.value if b.op == "<=" else c.value - b.value
            c.passed = b.ok(c.value)
        out.append(c)
    return Verdict(
        passed=all(c.passed for c in out),
        constraints=out,
        failures=[describe(c) for c in out if not c.passed],
    )


def fmt_value(name: str, v: float) -> str:
    metric = name.rpartition("_")[0] if "_p" in name or name.endswith(("_mean", "_max")) else name
    if name in ("error_rate", "gpu_util_mean"):
        return f"{100 * v:.2f}%"
    if metric in ("e2e", "latency", "ttfa", "intended", "queue", "gap") or name == "underrun_max":
        return f"{1000 * v:.1f} ms" if abs(v) < 1 else f"{v:.3f} s"
    if name == "gpu_mem_max":
        return f"{v / 1e9:.2f} GB"
    return f"{v:.3g}"


def describe(c: Constraint) -> str:
    if c.value is None:
        return f"{c.name}: {c.note}"
    word = "over" if c.op == "<=" else "under"
    rel = f", {abs(c.margin) / abs(c.bound):.0%}" if c.bound else ""
    ci = f"; 95% CI {fmt_value(c.name, c.ci95[0])}..{fmt_value(c.name, c.ci95[1])}" if c.ci95 else ""
    note = f"; {c.note}" if c.note else ""
    return (
        f"{c.name} = {fmt_value(c.name, c.value)}, bound {c.op} {fmt_value(c.name, c.bound)} "
        f"({word} by {fmt_value(c.name, abs(c.margin or 0))}{rel}{ci}{note})"
    )
