"""Scenarios and SLOs: what each of the guide's three use cases asks of a card, and how it is read.

Each default here is an assumption or a quote, with its source in the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttsperf.errors import UserError
from ttsperf.plan.simulate import Load, SimResult
from ttsperf.slo import duration, upper_limits

# The SLO metrics plan projects: ttsperf.slo's canonical names (as bench reads them), which are
# also SimResult's fields.
SLO_METRICS = ("ttfa_p99", "ttfa_p50", "e2e_p99", "e2e_p50", "rtf_p99", "underrun_p99")


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    slo: dict[str, float]
    slo_how: str
    load: Load
    load_how: str
    objective: str  # "usd_per_hour" (cheapest fleet for the load) or "usd_per_audio_hour"
    # a stream of this scenario: None sends back to back; a number is a listener who plays each
    # reply and thinks this long before the next request (simulate.Load.think_s)
    think_s: float | None = None
    think_how: str = ""


_REALTIME_SLO = {"ttfa_p99": 0.3, "underrun_p99": 0.1}
# A dialogue stream is a listener: a request sent back to back would ask for audio faster than
# anyone hears it, so a faster card would be sent more work per stream (and carry fewer streams).
_LISTENER_HOW = (
    "a stream is a listener: it plays each reply as it arrives and sends its next request when it "
    "has played it (think time 0 s; set --think-time)"
)
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
        0.0,
        _LISTENER_HOW,
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
        0.0,
        _LISTENER_HOW,
    ),
}


def parse_duration(text: str, where: str, most: float = 1.0) -> float:
    """--step-overhead / --vocoder-overhead: a positive duration with a unit, at most `most`
    seconds (a fixed cost of a decode step or a vocoder call is milliseconds, never seconds)."""
    try:
        value = duration(text)
    except ValueError as exc:
        raise UserError(f"{where} {text!r}: {exc}") from None
    if not 0 < value <= most:
        raise UserError(f"{where} {text!r}: expected a positive duration of at most {most:g}s, e.g. 3ms")
    return value


def parse_slo(text: str) -> dict[str, float]:
    """`"ttfa_p99=300ms,underrun_p99=100ms"` -> {metric: upper limit}; `"none"` -> no SLO.

    bench's grammar (ttsperf.slo), limited to what the simulator projects; `p99=10s` still reads
    as e2e_p99 (a documented alias)."""
    return upper_limits(text, {m: m for m in SLO_METRICS})


def meets(r: SimResult, slo: dict[str, float]) -> bool:
    return all(r.metric(k) <= v for k, v in slo.items())


def misses(r: SimResult, slo: dict[str, float]) -> str:
    return ", ".join(f"{k} {r.metric(k):.3g} > {v:.3g}" for k, v in slo.items() if r.metric(k) > v)
