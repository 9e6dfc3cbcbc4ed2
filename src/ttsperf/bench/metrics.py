"""The metrics of docs/reference/metrics.md, computed from per-request records of one load point.

Throughput is successes over the run window, never n / sum(latencies) (the guide's formula, which
is kept as `naive_throughput_rps` only to show how far off it is).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from ttsperf.bench.quantiles import CONFIDENCE, interval, percentile
from ttsperf.bench.results import Dist, PointResult, RequestRecord, Strategy

PERCENTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
UNDERRUN_OK_S = 0.1


def dist(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> Dist:
    """Every percentile from any n >= 1, each beside its distribution-free interval: a small n
    shows as a wide (or half-open) interval, never as a refusal or a false precision."""
    a = np.asarray(values, dtype=np.float64)
    n = int(a.size)
    if n == 0:
        return Dist(n=0)
    out = Dist(n=n, mean=float(a.mean()), min=float(a.min()), max=float(a.max()))
    for name, p in PERCENTILES.items():
        setattr(out, name, percentile(a, p))
        setattr(out, f"{name}_ci", list(interval(a, p, confidence)))
    return out


def underrun_s(r: RequestRecord) -> float | None:
    """Worst starvation of a player that starts at the first audio chunk and plays in real time.

    Chunk k (arriving at t_k) is needed once the audio before it has played: at t_1 + a_{k-1}. The
    largest lateness t_k - t_1 - a_{k-1} is how long such a player would have sat silent in total.
    """
    if len(r.chunk_t) < 1:
        return None
    t1 = r.chunk_t[0]
    worst, before = 0.0, 0.0
    for t, cum in zip(r.chunk_t, r.chunk_audio_s, strict=True):
        worst = max(worst, t - t1 - before)
        before = cum
    return worst


def playback_end(r: RequestRecord) -> float:
    """When a player that starts at the first audio chunk and plays in real time has played the
    whole reply: after the last chunk's audio, later by every stall. A reply without chunk times
    plays from its end; its length is the checked audio's, else the server's, else the text's."""
    audio = r.audio_s or r.server_audio_s or r.expected_audio_s
    if not r.chunk_t:
        return (r.t_end or 0.0) + audio
    end, before = r.chunk_t[0], 0.0
    for t, cum in zip(r.chunk_t, r.chunk_audio_s, strict=True):
        end = max(end, t) + (cum - before)
        before = cum
    return end + max(0.0, audio - before)


def window(records: Sequence[RequestRecord]) -> float:
    sends = [r.t_send for r in records if r.t_send is not None]
    ends = [r.t_end for r in records if r.t_end is not None]
    if not sends or not ends:
        return 0.0
    return max(ends) - min(sends)


def max_in_flight(records: Sequence[RequestRecord]) -> int:
    """Largest number of requests between send and end at once (client side), from the records."""
    events = []
    for r in records:
        if r.t_send is not None:
            events.append((r.t_send, 1))
            events.append((r.t_end if r.t_end is not None else r.t_send, -1))
    events.sort(key=lambda e: (e[0], e[1]))  # an end and a send at the same instant do not overlap
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


RequestCheck = Callable[[RequestRecord], bool]


def summarize(
    strategy: Strategy,
    records: Sequence[RequestRecord],
    meets_slo: RequestCheck | None = None,
    telemetry: dict[str, float] | None = None,
    confidence: float = CONFIDENCE,
) -> PointResult:
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok and r.t_send is not None]
    T = window(measured)
    e2e = [r.t_end - r.t_send for r in ok]
    audio = [r.audio_s or 0.0 for r in ok]
    sum_audio = float(sum(audio))
    steps = [r.decode_steps for r in ok if r.decode_steps is not None]
    ttfa = [r.t_first_audio - r.t_send for r in ok if r.t_first_audio is not None]
    gaps = [b - a for r in ok for a, b in zip(r.chunk_t, r.chunk_t[1:], strict=False)]
    stalls = [u for r in ok if (u := underrun_s(r)) is not None]
    errors = Counter(r.error for r in measured if r.error)
    examples: dict[str, str] = {}
    for r in measured:
        if r.error and r.error not in examples:
            examples[r.error] = r.detail[:200]
    sent = sorted(r.t_send for r in measured if r.t_send is not None)
    lag = [r.t_send - r.t_sched for r in measured if r.t_send is not None]
    achieved = (len(sent) - 1) / (sent[-1] - sent[0]) if len(sent) > 1 and sent[-1] > sent[0] else None
    return PointResult(
        strategy=strategy,
        label=strategy.label,
        requests=len(measured),
        warmup=len(records) - len(measured),
        successes=len(ok),
        window_s=T,
        throughput_rps=len(ok) / T if T > 0 else 0.0,
        audio_seconds_per_s=sum_audio / T if T > 0 else 0.0,
        system_rtf=T / sum_audio if sum_audio > 0 else None,
        decode_steps_per_s=sum(steps) / T if steps and T > 0 else None,
        goodput_rps=(sum(1 for r in ok if meets_slo(r)) / T if T > 0 else 0.0) if meets_slo else None,
        naive_throughput_rps=len(e2e) / sum(e2e) if e2e and sum(e2e) > 0 else None,
        latency_s=dist(e2e, confidence),
        latency_from_intended_s=dist([r.t_end - r.t_sched for r in ok], confidence),
        queue_s=dist(lag, confidence),
        ttfa_s=dist(ttfa, confidence),
        gap_s=dist(gaps, confidence),
        rtf=dist([e / a for e, a in zip(e2e, audio, strict=True) if a > 0], confidence),
        underrun_s=dist(stalls, confidence),
        underrun={
            "n": len(stalls),
            "worst_s": max(stalls) if stalls else None,
            "over_0.1s": sum(1 for s in stalls if s > UNDERRUN_OK_S),
        },
        errors=dict(errors),
        error_rate=(len(measured) - len(ok)) / len(measured) if measured else 0.0,
        error_examples=examples,
        max_in_flight=max_in_flight(measured),
        achieved_send_rate=achieved,
        telemetry=telemetry or {},
    )
