"""Discrete-event simulation of the engine's scheduler (continuous batching) over a workload.

One worker owns the device and loops (as ttsperf's engine does; see Engine for the options):
  1. admit waiting requests while the batch has room (ttsperf's engine: all of them prefilled in
     one call; its v1: each prefilled alone, in turn);
  2. run one decode step for every running row, taking t(B, attended tokens) + B x the engine's
     host cost per row: B x the longest row's context, since the batch is padded to it;
  3. at a step where rows reach a chunk boundary, decode the new audio (ttsperf's engine: one
     Decoder+Vocos call for every such row; v1: one call per row); chunks are emitted when that
     returns; a row whose last step it was leaves the batch (its slot is free for the next step).
Arrivals are open loop (Poisson or constant at a rate) or closed loop (N streams, each sending its
next request as soon as the previous one completes).

Steps between two events are computed in one vectorised block, so a run costs O(events), not
O(steps x rows). Deterministic for a given seed.

Example:
    simulate(Engine(step_model, max_batch=64, workload=Workload()), Load("streams", 32))
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from ttsperf import facts as F
from ttsperf.plan.memory import Workload
from ttsperf.plan.steptime import StepModel

P99_MIN_SAMPLES = 1000  # metrics.md: n < 10/(1-p) does not resolve a percentile


@dataclass
class Engine:
    """The engine being simulated. The field defaults are the plainest engine (ttsperf's v1):
    decode attention reads every row up to the longest row's length (one padded, masked batch);
    each joining request is prefilled alone; each row's chunk is decoded by its own
    Decoder+Vocos call; no host cost per row. `Engine.kind("ttsperf", ...)` is the engine as
    built (engine/runner.py): batched prefill, one audio call per step, the step model's host
    cost per row per step."""

    step: StepModel
    max_batch: int
    workload: Workload
    padded_attention: bool = True  # False: each row reads only its own context
    batched_prefill: bool = False  # True: one prefill call for everyone joining at a boundary
    batched_vocoder: bool = False  # True: one Decoder+Vocos call per step for all emitting rows
    host_per_row_s: float = 0.0  # host seconds per row per step, on top of t(B, L)
    host_per_step_s: float = 0.0  # host seconds per step whatever its rows, on top of t(B, L)
    handoff_s: float = 0.0  # the server's event loop per chunk sent, one chunk after another
    handoff_serial: bool = False  # True: on the engine's CPU, so the engine waits for it too

    @classmethod
    def kind(cls, name: str, step: StepModel, max_batch: int, workload: Workload) -> Engine:
        """'ttsperf' (the engine as built) or 'v1' (ttsperf's engine before v2, for comparison)."""
        if name == "v1":
            return cls(step, max_batch, workload)
        return cls(
            step, max_batch, workload, batched_prefill=True, batched_vocoder=True,
            host_per_row_s=step.t_row, host_per_step_s=step.t_host,
            handoff_s=step.t_chunk, handoff_serial=step.chunk_serial,
        )  # fmt: skip


ENGINES = {
    "ttsperf": "ttsperf serve's engine: one prefill call for every request joining at a step, one "
    "Decoder+Vocos call per step for every row that emits, attention padded to the longest row, "
    "a host cost per row per step",
    "v1": "ttsperf's engine before v2 (fae7d39): one prefill per joining request, one Decoder+Vocos "
    "call per row's chunk, attention padded to the longest row",
}


@dataclass(frozen=True)
class Load:
    kind: str  # "streams" (closed loop), "rate" (Poisson), "constant" (fixed inter-arrival)
    value: float

    def label(self) -> str:
        return (
            f"{self.value:g} streams" if self.kind == "streams" else f"{self.value:.3g} req/s ({self.kind})"
        )


@dataclass
class SimResult:
    n: int  # measured requests
    mean_s: float
    p50_s: float
    p99_s: float
    ttfa_p50_s: float
    ttfa_p99_s: float
    rtf_p99: float
    underrun_p99_s: float  # worst playback stall per request (player starts at first chunk)
    throughput_rps: float
    window_rps: float  # bench's req/s: the measured requests over [first sent, last done]
    audio_throughput: float  # audio seconds per wall second (RTFx)
    mean_batch: float  # rows per decode step, averaged over steps
    mean_step_s: float
    busy_fraction: float  # share of the run the worker was prefilling, stepping or vocoding
    p99_resolved: bool

    def metric(self, name: str) -> float:
        return float(getattr(self, name))


def chunk_plan(w: Workload) -> tuple[list[int], list[float]]:
    """Steps (from a row's start) at which chunks are emitted, and each chunk's audio seconds.

    A non-final chunk holds back `lookahead_steps` of audio whose right context is not decoded yet
    (engine/audio.py), so the first chunk plays (24 - 4) steps and the last one the rest.
    """
    ends, c = [], w.first_chunk_steps
    while c < w.steps:
        ends.append(c)
        c += w.chunk_steps
    ends.append(w.steps)
    played = [max(0, e - w.lookahead_steps) for e in ends[:-1]] + [w.steps]
    audio = [(b - a) / F.STEPS_PER_AUDIO_SECOND for a, b in zip([0, *played[:-1]], played, strict=True)]
    return ends, audio


def attended_tokens(padded: bool, batch: int, prompt: int, g: int, oldest_start: int, sum_start: int) -> int:
    """Tokens one decode step at global step g attends over (before it writes its own).

    A row that started at step s holds prompt + (g - s) tokens. Padded (ttsperf's engine: one
    masked batch as long as its longest row): batch x the oldest row's context. Exact: the sum.
    Either way it grows by `batch` per step, which keeps a run of steps an arithmetic series.
    """
    if padded:
        return batch * (prompt + g - oldest_start)
    return batch * (prompt + g) - sum_start


def _run_steps(c: tuple[float, ...], batch: int, ctx0: int, k: int, t_stop: float) -> tuple[float, int]:
    """Time for up to k decode steps, stopping after the step that reaches t_stop: (elapsed, steps).

    Within the run the context grows by `batch` tokens a step, so both roofline terms are linear in
    the step index j and the step time is t(j) = a + d x j while one term dominates at both ends
    (two lines cross at most once). Then the elapsed time is an arithmetic series and the stopping
    step a root of a quadratic: O(1) instead of O(k).
    """
    c0, c1, c2, c3, c4 = c

    def terms(j: int) -> tuple[float, float]:
        sc = ctx0 + batch * j
        return c1 + c2 * (sc + batch), c3 * batch + c4 * sc

    m_first, f_first = terms(0)
    m_last, f_last = terms(k - 1)
    if (m_first >= f_first) == (m_last >= f_last):
        a = c0 + max(m_first, f_first)
        d = (max(m_last, f_last) - max(m_first, f_first)) / (k - 1) if k > 1 else 0.0

        def cum(n: int) -> float:  # time of the first n steps
            return a * n + d * n * (n - 1) / 2

        total = cum(k)
        if total < t_stop:
            return total, k
        if t_stop <= a:  # already due (an arrival while prefilling): stop after one step
            return a, 1
        # smallest n with cum(n) >= t_stop
        if d > 0:
            n = math.ceil((-(a - d / 2) + math.sqrt((a - d / 2) ** 2 + 2 * d * t_stop)) / d)
        else:
            n = math.ceil(t_stop / a)
        n = min(max(n, 1), k)
        while n > 1 and cum(n - 1) >= t_stop:  # guard the float rounding either way
            n -= 1
        while n < k and cum(n) < t_stop:
            n += 1
        return cum(n), n
    elapsed, n = 0.0, 0
    while n < k:
        m, f = terms(n)
        elapsed += c0 + max(m, f)
        n += 1
        if elapsed >= t_stop:
            break
    return elapsed, n


def simulate(
    engine: Engine, load: Load, n_requests: int = 1000, seed: int = 0, cold_start: bool = False
) -> SimResult:
    """Steady state by default: a warm-up is simulated and left out, a closed loop's streams start
    staggered. cold_start: what `bench` measures after its warm-up drains: an empty engine, a
    closed loop's streams all sending at t = 0, the first n_requests sent measured, throughput
    as completions over that span (Little's law needs a steady state)."""
    if load.value <= 0:
        raise ValueError("load must be positive")
    w, sm, maxb = engine.workload, engine.step, engine.max_batch
    if maxb < 1:
        raise ValueError("max_batch must be >= 1")
    rng = np.random.default_rng(seed)
    ends, chunk_audio = chunk_plan(w)
    c0, c1, c2, c3, c4 = sm.coefficients()
    t_prefill = sm.prefill(w.prompt_tokens)
    last_chunk = len(ends) - 1
    prompt, steps = w.prompt_tokens, w.steps

    # Warm-up: a closed loop's first request per stream starts from an empty engine.
    streams = int(load.value) if load.kind == "streams" else 0
    if cold_start:
        warmup = 0
    else:
        warmup = streams if streams else max(10, n_requests // 10)
        # A closed loop is measured over at least one full wave of its streams after the warm-up one.
        n_requests = max(n_requests, streams)
    measured_end = warmup + n_requests

    arrivals: list[tuple[float, int, int]] = []  # (time, request id, stream)
    next_id = 0
    last_open_arrival = 0.0

    def new_arrival(t: float, stream: int) -> None:
        nonlocal next_id
        heapq.heappush(arrivals, (t, next_id, stream))
        next_id += 1

    def next_open_arrival() -> None:
        nonlocal last_open_arrival
        gap = rng.exponential(1.0 / load.value) if load.kind == "rate" else 1.0 / load.value
        last_open_arrival += gap
        new_arrival(last_open_arrival, -1)

    if streams and cold_start:
        for stream in range(streams):
            new_arrival(0.0, stream)
    elif streams:
        # Stagger the streams' first requests over one request's service time so they do not
        # march in lockstep.
        b0 = min(streams, maxb)
        est = steps * float(sm.step(b0, b0 * (prompt + steps / 2)))
        for s, t0 in enumerate(np.sort(rng.uniform(0.0, est, streams))):
            new_arrival(float(t0), s)
    else:
        next_open_arrival()

    arrival_t: dict[int, float] = {}
    first_t: dict[int, float] = {}
    done_t: dict[int, float] = {}
    play_end: dict[int, float] = {}
    stall: dict[int, float] = {}
    g_start: dict[int, int] = {}
    stream_of: dict[int, int] = {}
    waiting: deque[int] = deque()
    events: dict[int, list[tuple[int, int]]] = {}  # global step -> [(request, chunk index)]
    event_steps: list[int] = []
    now, g, batch, sum_start = 0.0, 0, 0, 0
    starts: deque[int] = deque()  # running rows' start steps, oldest first (all rows run S steps)
    done_measured = 0
    step_count, step_time_sum, batch_step_sum = 0, 0.0, 0
    loop_free = 0.0  # when the server's event loop has handed out every chunk so far
    debt = 0.0  # hand-off seconds still to share the engine's CPU with (handoff_serial)
    idle = 0.0  # time the worker waits with nothing to run (for the busy fraction -> power)

    def take_arrivals() -> None:
        while arrivals and arrivals[0][0] <= now:
            t, rid, s = heapq.heappop(arrivals)
            arrival_t[rid], stream_of[rid] = t, s
            waiting.append(rid)
            if s < 0:
                next_open_arrival()

    while done_measured < n_requests:
        take_arrivals()
        admitted = 0
        while waiting and batch < maxb:
            rid = waiting.popleft()
            g_start[rid] = g
            starts.append(g)
            batch += 1
            sum_start += g
            admitted += 1
            for k, off in enumerate(ends):
                # the prefill's own forward samples the first codes, so a row's n-th step of audio
                # comes from decode step n - 1 (a one-step request still takes one decode step here)
                at = g + max(off - 1, 1)
                if at not in events:
                    events[at] = []
                    heapq.heappush(event_steps, at)
                events[at].append((rid, k))
        if admitted:
            now += sm.prefill(prompt, admitted) if engine.batched_prefill else admitted * t_prefill
        if batch == 0:
            gap = max(0.0, arrivals[0][0] - now)
            idle += gap
            debt = max(0.0, debt - gap)  # the event loop has the CPU to itself meanwhile
            now = max(now, arrivals[0][0])
            continue

        g_next = event_steps[0]
        k = g_next - g
        # Run steps until the next row event, or until the first boundary after the next arrival
        # when a slot is free (so it can join).
        t_arr = arrivals[0][0] - now if (batch < maxb and arrivals) else math.inf
        # Sharing one CPU with the event loop's pending hand-offs (debt): the first `debt` seconds
        # of steps take twice as long, so an arrival t_arr away comes after t_arr - debt seconds
        # of steps (t_arr / 2 while the debt lasts).
        t_stop = t_arr / 2 if t_arr <= 2 * debt else t_arr - debt
        ctx0 = attended_tokens(engine.padded_attention, batch, prompt, g, starts[0], sum_start)
        # a measured correction of the device's step, taken constant over the run; the host's
        # per-row work comes on top of it
        f = 1.0 if sm.correction is None else sm.factor(batch, ctx0 + batch * k / 2)
        host = engine.host_per_step_s + engine.host_per_row_s * batch
        coef = (c0 * f + host, c1 * f, c2 * f, c3 * f, c4 * f)
        elapsed, stop = _run_steps(coef, batch, ctx0, k, t_stop)
        shared = min(elapsed, debt)
        debt -= shared
        elapsed += shared
        now += elapsed
        g += stop
        step_count += stop
        step_time_sum += elapsed
        batch_step_sum += batch * stop
        if g < g_next:
            continue

        heapq.heappop(event_steps)
        evs = events.pop(g)
        if engine.batched_vocoder:
            now += sm.vocoder(sum(chunk_audio[c] for _, c in evs), len(evs))
        # the event loop hands the chunks out one after another; on the engine's CPU it has half
        # of it while the engine runs, and the engine's next steps pay for the other half (debt)
        per_chunk = engine.handoff_s * (2 if engine.handoff_serial else 1)
        if engine.handoff_serial:
            debt += engine.handoff_s * len(evs)
        for rid, c in evs:
            a = chunk_audio[c]
            if not engine.batched_vocoder:  # this row's own call; its chunk is out when it returns
                now += sm.vocoder(a)
            loop_free = max(loop_free, now) + per_chunk
            out = loop_free
            if c == 0:
                first_t[rid], play_end[rid], stall[rid] = out, out + a, 0.0
            else:
                stall[rid] = max(stall[rid], out - play_end[rid])
                play_end[rid] = max(play_end[rid], out) + a
            if c == last_chunk:
                done_t[rid] = out
                batch -= 1
                start = g_start.pop(rid)
                sum_start -= start
                assert starts[0] == start  # equal lengths: rows finish in the order they started
                starts.popleft()
                if warmup <= rid < measured_end:
                    done_measured += 1
                if stream_of[rid] >= 0:
                    new_arrival(out, stream_of[rid])

    ids = range(warmup, measured_end)
    e2e = np.array([done_t[i] - arrival_t[i] for i in ids])
    ttfa = np.array([first_t[i] - arrival_t[i] for i in ids])
    stalls = np.array([stall[i] for i in ids])
    # Throughput. n / (span of the measured requests) would undercount by about
    # n / (n + requests in flight), the span holding the last requests' whole service time.
    # Closed loop: Little's law, N streams / mean E2E (no think time), exact in steady state and
    # blind to the waves equal-length requests march in. Open loop (and a cold start, which is
    # no steady state): every completion inside the measured span, over that span.
    audio_s = steps / F.STEPS_PER_AUDIO_SECOND
    if streams and not cold_start:
        mean = float(e2e.mean())
        throughput = streams / mean if mean > 0 else math.inf
    else:
        t0, t1 = min(arrival_t[i] for i in ids), max(done_t[i] for i in ids)
        # bench's definition when reproducing it: the measured successes over their window
        completed = n_requests if cold_start else sum(1 for t in done_t.values() if t0 < t <= t1)
        throughput = completed / (t1 - t0) if t1 > t0 else math.inf
    window = max(done_t[i] for i in ids) - min(arrival_t[i] for i in ids)
    return SimResult(
        n=n_requests,
        window_rps=n_requests / window if window > 0 else math.inf,
        mean_s=float(e2e.mean()),
        p50_s=float(np.percentile(e2e, 50)),
        p99_s=float(np.percentile(e2e, 99)),
        ttfa_p50_s=float(np.percentile(ttfa, 50)),
        ttfa_p99_s=float(np.percentile(ttfa, 99)),
        rtf_p99=float(np.percentile(e2e / audio_s, 99)),
        underrun_p99_s=float(np.percentile(stalls, 99)),
        throughput_rps=throughput,
        audio_throughput=throughput * audio_s,
        mean_batch=batch_step_sum / step_count if step_count else 0.0,
        mean_step_s=step_time_sum / step_count if step_count else 0.0,
        busy_fraction=1.0 - idle / now if now > 0 else 0.0,
        p99_resolved=n_requests >= P99_MIN_SAMPLES,
    )
