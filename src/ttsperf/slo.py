"""One SLO grammar for every command: `ttfa_p99=300ms,e2e_p99=5s,rtf_p95=1,error_rate=1%`.

bench checks it against a run, plan projects the cards that meet it, and a plan writes its SLO back
in this syntax (`Slo.spec` in plan.json), so `ttsperf bench URL --slo SPEC` checks a plan unchanged.

    NAME[<=|>=|=]VALUE[UNIT], ...     or `none`

NAME is METRIC_STAT for a per-request distribution (`e2e_p99`, `ttfa_p50`, `rtf_p95`,
`underrun_p99`, `gap_max`, `queue_mean`) or a run-level scalar (`error_rate`, `throughput_rps`,
`gpu_util_mean`, ...). `=` means the metric's natural direction: latencies, error rate, power and
memory are upper limits, throughput and GPU utilisation lower ones. One value rule for every
command: a time takes a unit (`us`, `ms`, `s`, `min`) and a bare number is an error (is 300 ms or
300 s meant?); a fraction takes `%` or a plain 0..1; a size takes `GB`/`GiB`...; a ratio is a plain
number (`x` allowed: `rtf_p99=1x`). Documented aliases of older spellings: `latency_STAT` and
plan's bare `p50`/`p99` mean `e2e_STAT`, `underrun_max` is the worst stall of any request.
Torch-free and numpy-free: plan, bench, doctor and report all read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ttsperf.errors import UserError

# per-request distributions: metric -> unit kind
DIST_METRICS = {
    "e2e": "time",  # t_end - t_send
    "ttfa": "time",  # time to first audio
    "intended": "time",  # t_end - t_sched (coordinated-omission corrected)
    "queue": "time",  # t_send - t_sched, client-side send lag
    "gap": "time",  # between audio chunks, pooled
    "rtf": "ratio",  # e2e / audio seconds
    "underrun": "time",  # worst playback stall of a player starting at the first chunk
}
# statistic -> quantile (None: mean or max, no quantile)
STATS: dict[str, float | None] = {
    "p50": 0.50,
    "p90": 0.90,
    "p95": 0.95,
    "p99": 0.99,
    "p999": 0.999,
    "mean": None,
    "max": None,
}
# run-level scalars: name -> (unit kind, natural direction)
SCALAR_METRICS = {
    "error_rate": ("fraction", "<="),
    "throughput_rps": ("ratio", ">="),
    "goodput_rps": ("ratio", ">="),
    "audio_seconds_per_s": ("ratio", ">="),
    "gpu_util_mean": ("fraction", ">="),
    "gpu_power_mean": ("ratio", "<="),
    "gpu_mem_max": ("bytes", "<="),
}
METRIC_ALIASES = {"latency": "e2e"}  # latency_p99 = e2e_p99
NAME_ALIASES = {"p50": "e2e_p50", "p90": "e2e_p90", "p95": "e2e_p95", "p99": "e2e_p99"}  # plan's old names

_TIME = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}
_BYTES = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_ITEM = re.compile(r"^\s*([A-Za-z0-9_]+)\s*(<=|>=|=|<|>)\s*(.*?)\s*$")
_VALUE = re.compile(r"^([0-9.eE+-]+)\s*([A-Za-z%]*)$")


@dataclass(frozen=True)
class Limit:
    """One constraint: `name` is canonical (`e2e_p99`, never `p99`); `value` in seconds, a fraction
    0..1, bytes or a plain ratio."""

    name: str
    metric: str
    stat: str | None  # None for a scalar
    op: str  # "<=" or ">="
    value: float

    @property
    def quantile(self) -> float | None:
        return STATS[self.stat] if self.stat else None

    @property
    def kind(self) -> str:
        return DIST_METRICS[self.metric] if self.stat else SCALAR_METRICS[self.metric][0]

    def ok(self, v: float) -> bool:
        return v <= self.value if self.op == "<=" else v >= self.value


def _example() -> str:
    return "ttfa_p99=300ms, e2e_p99=5s, rtf_p95=1, error_rate=1%"


def _resolve(name: str, item: str) -> tuple[str, str, str | None]:
    """Typed name -> (canonical name, metric, stat)."""
    key = name.lower()
    key = NAME_ALIASES.get(key, key)
    if key == "underrun_max":
        return key, "underrun", "max"
    if key in SCALAR_METRICS:
        return key, key, None
    metric, _, stat = key.rpartition("_")
    metric = METRIC_ALIASES.get(metric, metric)
    if metric in DIST_METRICS and stat in STATS:
        return f"{metric}_{stat}", metric, stat
    raise UserError(
        f"--slo {item!r}: unknown metric {name!r}; expected METRIC_STAT with METRIC in "
        f"{', '.join(DIST_METRICS)} and STAT in {', '.join(STATS)}, or {', '.join(SCALAR_METRICS)}"
    )


def _value(kind: str, num: float, unit: str, item: str) -> float:
    u = unit.lower()
    if kind == "time":
        if u == "":
            raise UserError(
                f"--slo {item!r}: give a time unit (ms or s), e.g. 300ms; a bare number is ambiguous"
            )
        if u not in _TIME:
            raise UserError(f"--slo {item!r}: unknown time unit {unit!r}; expected one of us, ms, s, min")
        # a division keeps 300ms exactly 0.3, as a plan's spec read back must give the same limit
        return num / 1000.0 if u == "ms" else num / 1e6 if u == "us" else num * _TIME[u]
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
    if u not in ("", "x"):
        raise UserError(f"--slo {item!r}: this metric takes a plain number (a ratio), found unit {unit!r}")
    return num


def duration(text: str) -> float:
    """A duration flag's text -> seconds: a number and a unit (us, ms, s, min), as --slo writes a
    time. A bare number raises ValueError, as in --slo: is `3` meant as 3 ms or 3 s?"""
    v = _VALUE.match(text.strip())
    try:
        num, unit = float(v.group(1)), v.group(2).lower()  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        unit = ""
    if unit not in _TIME:
        raise ValueError("expected a duration with a unit (us, ms, s or min), e.g. 300ms or 2s")
    return num / 1000.0 if unit == "ms" else num / 1e6 if unit == "us" else num * _TIME[unit]


def parse(spec: str | None) -> list[Limit]:
    """`--slo` text -> limits, in the order written. Empty, None or `none` -> no limits."""
    if not spec or spec.strip().lower() == "none":
        return []
    limits: list[Limit] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        m = _ITEM.match(item)
        if not m:
            raise UserError(f"--slo {item!r}: expected NAME=VALUE, e.g. {_example()} (or 'none')")
        name, op, text = m.groups()
        v = _VALUE.match(text)
        try:
            num, unit = float(v.group(1)), v.group(2)
        except (AttributeError, ValueError):
            raise UserError(f"--slo {item!r}: {text!r} is not a number with a unit, e.g. 300ms") from None
        canonical, metric, stat = _resolve(name, item)
        kind, natural = (DIST_METRICS[metric], "<=") if stat else SCALAR_METRICS[metric]
        op = {"=": natural, "<": "<=", ">": ">="}.get(op, op)
        value = _value(kind, num, unit, item)
        if any(x.name == canonical for x in limits):
            raise UserError(f"--slo {item!r}: {canonical} is given twice")
        limits.append(Limit(canonical, metric, stat, op, value))
    return limits


def _number(v: float) -> str:
    return f"{v:.10g}"


def format_value(limit: Limit) -> str:
    """The value as `--slo` writes it (seconds from 1 s up, else milliseconds); parse() reads it
    back to the same float, to 10 significant digits."""
    v, kind = limit.value, limit.kind
    if kind == "time":
        return f"{_number(v)}s" if v >= 1 else f"{_number(v * 1000.0)}ms"
    if kind == "fraction":
        return f"{_number(v * 100.0)}%"
    if kind == "bytes":
        return f"{_number(v / 1e9)}GB"
    return _number(v)


def format_spec(limits: list[Limit]) -> str:
    """Limits -> `--slo` text that parse() reads back to the same limits; no limits -> `none`."""
    if not limits:
        return "none"
    out = []
    for x in limits:
        natural = "<=" if x.stat else SCALAR_METRICS[x.metric][1]
        out.append(f"{x.name}{'=' if x.op == natural else x.op}{format_value(x)}")
    return ",".join(out)


def upper_limits(spec: str, allowed: dict[str, str], where: str = "--slo") -> dict[str, float]:
    """For a reader that only knows some metrics as upper limits (plan): name -> limit value.

    `allowed` maps the canonical names it projects to what it calls them; the rest is an error
    that names them."""
    out: dict[str, float] = {}
    for x in parse(spec):
        if x.name not in allowed or x.op != "<=":
            raise UserError(
                f"{where} {x.name!r} ({x.op}): expected upper limits (=) on "
                f"{', '.join(allowed)}, the metrics this command projects (or 'none')"
            )
        out[x.name] = x.value
    return out


def spec_of(limits: dict[str, float]) -> str:
    """A {canonical name: upper limit} mapping (plan's) -> `--slo` text."""
    parsed = []
    for name, value in limits.items():
        canonical, metric, stat = _resolve(name, name)
        parsed.append(Limit(canonical, metric, stat, "<=", float(value)))
    return format_spec(parsed)
