"""Scenarios and SLOs: what each of the guide's three use cases asks of a card, and how it is read.

Each default here is an assumption or a quote, with its source in the text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ttsperf.errors import UserError
from ttsperf.plan.simulate import Load, SimResult

# SLO metric name (as typed in --slo) -> SimResult field.
SLO_METRICS = {
    "ttfa_p99": "ttfa_p99_s",
    "ttfa_p50": "ttfa_p50_s",
    "p99": "p99_s",
    "p50": "p50_s",
    "rtf_p99": "rtf_p99",
    "underrun_p99": "underrun_p99_s",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    slo: dict[str, float]
    slo_how: str
    load: Load
    load_how: str
    objective: str  # "usd_per_hour" (cheapest fleet for the load) or "usd_per_audio_hour"


_REALTIME_SLO = {"ttfa_p99": 0.3, "underrun_p99": 0.1}
_REALTIME_HOW = (
    "guide: real-time dialogue needs < 300 ms P99, read as time to first audio (what a listener "
    "waits for); metrics.md: playback underrun is OK at <= 0.1 s"
)
SCENARIOS = {
    "realtime": Scenario(
        "realtime",
        "real-time dialogue, streamed",
        _REALTIME_SLO,
        _REALTIME_HOW,
        Load("streams", 100),
        "assumption: 100 concurrent dialogue streams (set --streams/--rate)",
        "usd_per_hour",
    ),
    "offline": Scenario(
        "offline",
        "offline batch synthesis, no latency bound",
        {},
        "none: offline work is bound by throughput",
        Load("rate", 10.0),
        "assumption: 10 requests/s (set --streams/--rate)",
        "usd_per_audio_hour",
    ),
    "concurrency": Scenario(
        "concurrency",
        "tens of thousands of concurrent dialogue users",
        _REALTIME_SLO,
        _REALTIME_HOW,
        Load("streams", 10_000),
        "the guide's 'ten-thousand-level concurrency' (万级并发), lower end",
        "usd_per_hour",
    ),
}


def parse_duration(text: str, where: str) -> float:
    t = text.strip().lower()
    scale = 1.0
    for suffix, s in (("ms", 1e-3), ("s", 1.0)):
        if t.endswith(suffix):
            t, scale = t[: -len(suffix)], s
            break
    try:
        value = float(t) * scale
    except ValueError:
        raise UserError(f"{where}: expected a duration like 300ms or 1.5s, found {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise UserError(f"{where}: expected a positive duration, found {text!r}")
    return value


def parse_slo(text: str) -> dict[str, float]:
    """`"ttfa_p99=300ms,underrun_p99=0.1s"` -> {metric: bound}; `"none"` -> no SLO."""
    if text.strip().lower() == "none":
        return {}
    slo: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep or name not in SLO_METRICS:
            raise UserError(
                f"--slo: expected METRIC=BOUND with METRIC in {', '.join(SLO_METRICS)} (or 'none'), "
                f"found {part!r}"
            )
        # rtf_p99 is a ratio (E2E / audio seconds); the rest are durations
        slo[name] = parse_duration(value.rstrip("xX") if name == "rtf_p99" else value, f"--slo {name}")
    return slo


def meets(r: SimResult, slo: dict[str, float]) -> bool:
    return all(r.metric(SLO_METRICS[k]) <= v for k, v in slo.items())


def misses(r: SimResult, slo: dict[str, float]) -> str:
    return ", ".join(
        f"{k} {r.metric(SLO_METRICS[k]):.3g} > {v:.3g}"
        for k, v in slo.items()
        if r.metric(SLO_METRICS[k]) > v
    )
