"""Discrete-event simulation of the engine's scheduler (continuous batching) over a workload.

One worker owns the device and loops, as ttsperf's engine does (engine/runner.py):
  1. admit waiting requests while the batch has room, all of them prefilled in one call;
  2. run one decode step for every running row, taking t(B, attended tokens) + the engine's host
     cost per step and per row: B x the longest row's context, since the batch is padded to it;
  3. at a step where rows reach a chunk boundary, decode the new audio of every such row in one
     Decoder+Vocos call; chunks are emitted when that returns (the server's event loop hands them
     out one after another); a row whose last step it was leaves the batch.
A request sent is queued once the server's event loop has taken it in (HTTP, validation, the
tokenizer), after whatever the loop was doing: a wave of requests reaches the engine one by one.
Arrivals are open loop (Poisson or constant at a rate) or closed loop (N streams, each sending its
next request as soon as the previous one completes, or - a stream that is a listener, `think_s`
set - when it has played the previous reply and thought `think_s` seconds).

Three parts: the arrivals (`Arrivals`), the event loop (`_serve`, over the running rows `_Rows`)
and the summary (`_summary`); one `Request` record per request.

Steps between two events are computed in one vectorised block, so a run costs O(events), not
O(steps x rows). Deterministic for a given seed.

Example:
    simulate(EngineModel.of(step_model, max_batch=64, workload=Workload()), Load("streams", 32))
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from ttsperf import facts as F
from ttsperf.plan.memory import Workload
from ttsperf.plan.steptime import StepModel

P99_MIN_SAMPLES = 1000  # metrics.md: n < 10/(1-p) does not resolve a percentile


@dataclass
class EngineModel:
    """The serving engine as the simulator sees it: its step model, its slots and the host's work
    beside the device. `EngineModel.of(step, ...)` is ttsperf serve's engine (its host costs from
    the step model); the fields default to none, for tests that isolate one cost."""

    step: StepModel
    max_batch: int
    workload: Workload
    host_per_row_s: float = 0.0  # host seconds per row per step, on top of t(B, L)
    host_per_step_s: float = 0.0  # host seconds per step whatever its rows, on top of t(B, L)
    handoff_s: float = 0.0  # the server's event loop per chunk sent, one chunk after another
    handoff_serial: bool = False  # True: on the engine's CPU, so the engine waits for it too
    # the same event loop's work per request received, before the engine can queue it
    intake_s: float = 0.0
    # serve's --max-queue: a request that finds this many waiting for a row is refused (HTTP 503,
    # engine/admission.py); None: the queue holds every arrival (plan's search: its loads never fill it)
    max_queue: int | None = None

    @classmethod
    def of(
        cls, step: StepModel, max_batch: int, workload: Workload, max_queue: int | None = None
    ) -> EngineModel:
        """ttsperf serve's engine with this step model."""
        return cls(
            step, max_batch, workload, host_per_row_s=step.t_row, host_per_step_s=step.t_host,
            handoff_s=step.t_chunk, handoff_serial=step.chunk_serial, intake_s=step.t_request,
            max_queue=max_queue,
        )  # fmt: skip


ENGINE_HOW = (
    "ttsperf serve's engine: one prefill call for every request joining at a step, one "
    "Decoder+Vocos call per step for every row that emits, attention padded to the longest row, "
    "a host cost per row per step"
)
ENGINES = {"ttsperf": ENGINE_HOW}  # what plan's --engine setting accepts (v1 retired: git history)


@dataclass(frozen=True)
class Load:
    kind: str  # "streams" (closed loop), "rate" (Poisson), "constant" (fixed inter-arrival)
    value: float
    # a closed loop's stream: None sends its next request the moment a reply ends (bench
    # --concurrency); a number is a listener who plays each reply as it arrives and sends the
    # next one this many seconds after it has played (bench --concurrency N --think-time S)
    think_s: float | None = None
    # a cold start's streams start one after another over this many seconds (bench --ramp-up)
    ramp_s: float = 0.0

    def label(self) -> str:
        if self.kind != "streams":
            return f"{self.value:.3g} req/s ({self.kind})"
        return (
            f"{self.value:g} streams"
            + ("" if self.think_s is None else f" (think {self.think_s:g} s)")
            + (f" (ramp {self.ramp_s:g} s)" if self.ramp_s else "")
        )


@dataclass
class SimResult:
    n: int  # measured requests
    mean_s: float
    # latencies in seconds (rtf: a ratio), named as ttsperf.slo names the metrics
    e2e_p50: float
    e2e_p99: float
    ttfa_p50: float
    ttfa_p99: float
    rtf_p99: float
    underrun_p99: float  # worst playback stall per request (player starts at first chunk)
    throughput_rps: float
    window_rps: float  # bench's req/s: the measured requests over [first sent, last done]
    audio_throughput: float  # audio seconds per wall second (RTFx)
    mean_batch: float  # rows per decode step, averaged over steps
    mean_step_s: float
    busy_fraction: float  # share of the run the worker was prefilling, stepping or vocoding
    p99_resolved: bool
    audio_mean_s: float = 0.0  # audio per answered measured request, on average (several lengths: drawn)
    # bench's error_rate: the share of measured requests not answered, here those refused because
    # the queue was full (EngineModel.max_queue); the latencies above are the answered requests'
    error_rate: float = 0.0

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


def chunk_plans(w: Workload) -> list[tuple[list[int], list[float]]]:
    """chunk_plan of each of the workload's length classes, in its order."""
    return [chunk_plan(replace(w, audio_seconds=a, prompt_tokens=p, lengths=())) for a, p in w.classes()]


def attended_tokens(batch: int, prompt: int, g: int, oldest_start: int) -> int:
    """Tokens one decode step at global step g attends over (before it writes its own).

    A row that started at step s holds prompt + (g - s) tokens; the engine runs one masked batch
    as long as its longest row, so a step reads batch x the oldest row's context. It grows by
    `batch` per step, which keeps a run of steps an arithmetic series.
    """
    return batch * (prompt + g - oldest_start)


def _run_steps(c: tuple[float, ...], batch: int, ctx0: int, k: int, t_stop: float) -> tuple[float, int]:
    """Time for up to k decode steps, stopping after the step that reaches t_stop: (elapsed, steps).

    Within the run the context grows by `batch` tokens a step, so both roofline terms are linear in
    the step index j and the step time is t(j) = a + d x j while one term dominates at both ends
    (two lines cross at most once). Then the elapsed time is an arithmetic series and the stopping
    step a root of a quadratic: O(1) instead of O(k).
    """
    c0, c1, c2, c3, c4 = c
    # the memory and compute terms of step j: c1 + c2 x (ctx + batch), c3 x batch + c4 x ctx
    if k == 1:  # the next event is one step away (common at a full batch): that one step
        m, f = c1 + c2 * (ctx0 + batch), c3 * batch + c4 * ctx0
        return c0 + (m if m >= f else f), 1
    sc = ctx0
    m_first, f_first = c1 + c2 * (sc + batch), c3 * batch + c4 * sc
    sc = ctx0 + batch * (k - 1)
    m_last, f_last = c1 + c2 * (sc + batch), c3 * batch + c4 * sc
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
        sc = ctx0 + batch * n
        m, f = c1 + c2 * (sc + batch), c3 * batch + c4 * sc
        elapsed += c0 + max(m, f)
        n += 1
        if elapsed >= t_stop:
            break
    return elapsed, n


@dataclass(slots=True)
class Request:
    """One request's life in the simulation (times in seconds from the start of the run)."""

    arrival: float
    stream: int  # its closed-loop stream; -1: an open loop's
    start_step: int = 0  # the global step it joined the batch at
    first: float = 0.0  # its first chunk out
    done: float = math.nan  # its last chunk out (nan: not yet)
    play_end: float = 0.0  # when playback of what it has received so far ends
    stall: float = 0.0  # its worst playback stall so far
    pause: float = 0.0  # a listener's wait from its reply's end to its stream's next request
    taken_in: bool = False  # by the server's event loop: its heap time is when it is queued
    length: int = 0  # its class in the workload's lengths (0: the only one)
    refused: bool = False  # the queue was full: answered 503 at once (done: when)


@dataclass(slots=True)
class EventLoop:
    """The server's event loop: one thread, one thing at a time. It takes each request in before
    the engine can queue it, and hands each chunk out after its audio call returns.

    On the engine's own CPU (serial) a chunk's hand-off has half the CPU while the engine runs, so
    it takes twice as long (calibrated on plan_accuracy.py's points, docs/VALIDATION.md); a wave of
    requests is taken in at full speed (measured by benchmarks/intake_trace.py: ~25 requests 27 ms
    from their bytes arriving to the engine's queue, docs/PERFORMANCE.md) and the engine's next
    steps pay for it (owed)."""

    intake_s: float = 0.0  # per request received
    handoff_s: float = 0.0  # per chunk sent
    serial: bool = False
    free: float = 0.0  # when it has done everything handed to it so far
    owed: float = 0.0  # its CPU seconds the engine's steps have yet to share (serial)

    @classmethod
    def of(cls, engine: EngineModel) -> EventLoop:
        return cls(engine.intake_s, engine.handoff_s, engine.handoff_serial)

    def take_in(self, sent: float) -> float:
        """When a request sent at `sent` is in the engine's queue."""
        if self.intake_s == 0.0:
            return sent
        self.free = (self.free if self.free > sent else sent) + self.intake_s
        if self.serial:
            self.owed += self.intake_s
        return self.free


class Arrivals:
    """Requests to come, earliest first: a closed loop's streams each send the next request when
    the previous one completes; an open loop's arrive at a rate (Poisson or constant gaps). A
    request sent is queued once the server's event loop has taken it in."""

    def __init__(
        self,
        load: Load,
        rng: np.random.Generator,
        loop: EventLoop | None = None,
        lengths: int = 1,
        seed: int = 0,
        ordered: bool = False,
        audio: tuple[float, ...] = (),
    ) -> None:
        self.load, self.rng = load, rng
        # each length class's audio seconds: a refused listener waits as long as its reply would
        # have played (bench's playback_end of a reply without chunks), then thinks, then asks again
        self.audio = audio
        self.loop = EventLoop() if loop is None else loop
        self.requests: list[Request] = []  # by id, in the order they were scheduled
        self.heap: list[tuple[float, int]] = []  # (time sent, or queued once taken in; id)
        self._last_open = 0.0
        # Request i's length class: i mod n in order (bench's order), or drawn apart from the
        # arrivals; either way every card and setting of one plan is simulated on the same
        # sequence of lengths (common random numbers).
        self.n_lengths = lengths
        # bench sends --requests in all (refused ones count) and then stops: its run's last
        # requests drain a thinning batch. None: a steady state, whose streams never stop.
        self.limit: int | None = None
        self._length_rng = np.random.default_rng([seed, 1]) if lengths > 1 and not ordered else None
        self._ordered = ordered and lengths > 1
        self._length_of: list[int] = []

    def add(self, t: float, stream: int) -> None:
        i = len(self.requests)
        if self.limit is not None and i >= self.limit:
            return
        heapq.heappush(self.heap, (t, i))
        q = Request(t, stream)
        if self._ordered:
            q.length = i % self.n_lengths
        elif self._length_rng is not None:
            if i >= len(self._length_of):
                self._length_of.extend(self._length_rng.integers(0, self.n_lengths, 4096).tolist())
            q.length = self._length_of[i]
        self.requests.append(q)

    def add_open(self) -> None:
        gap = (
            self.rng.exponential(1.0 / self.load.value) if self.load.kind == "rate" else 1.0 / self.load.value
        )
        self._last_open += gap
        self.add(self._last_open, -1)

    def start(self, streams: int, cold_start: bool, service_s: float) -> None:
        """The first arrivals: a cold start's streams as bench starts them (at t = 0, or one after
        another over its ramp), or staggered over one request's service time so they do not march
        in lockstep, or an open loop's first."""
        if streams and cold_start:
            gap = self.load.ramp_s / streams
            for stream in range(streams):
                self.add(stream * gap, stream)
        elif streams:
            for s, t0 in enumerate(np.sort(self.rng.uniform(0.0, service_s, streams))):
                self.add(float(t0), s)
        else:
            self.add_open()

    def next_time(self) -> float:
        return self.heap[0][0] if self.heap else math.inf

    def due(self, now: float, waiting: deque[int], max_queue: int | None = None) -> list[int]:
        """Move every request queued by `now` to `waiting`, in the order they reach it; one sent by
        then is taken in by the event loop first (and an open loop's next one scheduled). One that
        finds `max_queue` waiting is refused, as serve's queue refuses it -> the refused ids.

        Waiting requests leave only at a step boundary (admission), so the queue each arrival
        between two boundaries finds is exactly what this replay in arrival order counts."""
        heap, loop = self.heap, self.loop
        refused: list[int] = []
        while heap and heap[0][0] <= now:
            at, rid = heapq.heappop(heap)
            q = self.requests[rid]
            if not q.taken_in:
                q.taken_in = True
                if q.stream < 0:
                    self.add_open()
                at = loop.take_in(at)
                if at > now:
                    heapq.heappush(heap, (at, rid))
                    continue
            if max_queue is not None and len(waiting) >= max_queue:
                q.refused, q.first, q.done = True, at, at
                refused.append(rid)
                continue
            waiting.append(rid)
        for rid in refused:  # after the loop: a stream that asks again at once is not refused twice now
            self._again(self.requests[rid])
        return refused

    def _again(self, q: Request) -> None:
        """A refused closed-loop stream asks again as bench's user does after an error: at once, or
        a listener after the reply's length (it "plays" a reply without chunks from its end) and
        its think time (bench/runner.py, bench/metrics.py playback_end)."""
        if q.stream < 0:
            return
        think = self.load.think_s
        q.pause = 0.0 if think is None else (self.audio[q.length] if self.audio else 0.0) + think
        self.add(q.done + q.pause, q.stream)


class _Chunk(NamedTuple):
    """One chunk of a length class, as an event carries it: what the emit needs, looked up once."""

    audio: float  # seconds of audio it holds
    played: int  # the same in whole steps (a Decoder+Vocos call's audio is their sum)
    first: bool
    last: bool


class _Rows:
    """The running batch: when each row started (the oldest is the longest context the batch is
    padded to) and the global steps at which rows emit a chunk. Rows of one length finish in the
    order they started; of several, a short one leaves before a long one that started earlier."""

    def __init__(self, plans: list[tuple[list[int], list[float]]]) -> None:
        # the prefill's own forward samples the first codes, so a row's n-th step of audio comes
        # from decode step n - 1 (a one-step request still takes one decode step here)
        self.emit_after = [[max(off - 1, 1) for off in ends] for ends, _ in plans]  # per length class
        # the chunks every length class emits alike (at the same steps, none of them a class's
        # last): rows that join together share one event for each, whatever their lengths
        first = self.emit_after[0]
        if len(plans) == 1:
            self.shared = len(first)
        else:
            shortest = min(len(e) for e in self.emit_after) - 1
            self.shared = next(
                (k for k in range(shortest) if any(e[k] != first[k] for e in self.emit_after)), shortest
            )
        # (decode steps from a row's start, chunk) of each class's chunks: all of them; the
        # shared ones; those after the shared ones
        self._all = [
            [
                (off, _Chunk(a, round(a * F.STEPS_PER_AUDIO_SECOND), k == 0, k == len(e) - 1))
                for k, (off, a) in enumerate(zip(e, audio, strict=True))
            ]
            for e, (_, audio) in zip(self.emit_after, plans, strict=True)
        ]
        self._head = self._all[0][: self.shared]
        self._tail = [chunks[self.shared :] for chunks in self._all]
        self.g = 0  # global decode step
        self.starts: deque[int] = deque()  # running rows' start steps, oldest first
        self.running = 0  # rows in the batch (starts also holds rows that left out of order)
        self._left: dict[int, int] = {}  # start step -> rows of it that left out of order
        # global step -> [(ids of rows that joined together, their chunk)]
        self.events: dict[int, list[tuple[list[int], _Chunk]]] = {}
        self.event_steps: list[int] = []  # heap of the keys of `events`

    def admit(self, rids: list[int], lengths: list[int] | None = None) -> None:
        """Rows joining at this step (one prefill call): rows of one length emit at the same
        steps. `lengths`: each row's class (None: all of class 0)."""
        self.starts.extend([self.g] * len(rids))
        self.running += len(rids)
        if lengths is None or len(rids) == 1:  # one class: all its chunks at once
            self._schedule(rids, self._all[0 if lengths is None else lengths[0]])
            return
        self._schedule(rids, self._head)  # the chunks every class emits alike, once for all
        by: dict[int, list[int]] = {}
        for rid, c in zip(rids, lengths, strict=True):
            by.setdefault(c, []).append(rid)
        for c, ids in by.items():
            self._schedule(ids, self._tail[c])

    def _schedule(self, ids: list[int], chunks: list[tuple[int, _Chunk]]) -> None:
        """Events for `chunks` (steps from the start, chunk) of rows `ids`, started now."""
        g, events = self.g, self.events
        for off, chunk in chunks:
            at = g + off
            evs = events.get(at)
            if evs is None:
                events[at] = [(ids, chunk)]
                heapq.heappush(self.event_steps, at)
            else:
                evs.append((ids, chunk))

    def leave(self, start: int) -> None:
        """A row that started at `start` has finished."""
        self.running -= 1
        starts = self.starts
        if starts[0] != start:  # a shorter row than some older one: the oldest still runs
            self._left[start] = self._left.get(start, 0) + 1
            return
        starts.popleft()
        left = self._left
        while starts and left and left.get(starts[0]):
            s0 = starts.popleft()
            if left[s0] == 1:
                del left[s0]
            else:
                left[s0] -= 1


@dataclass(slots=True)
class _Totals:
    """What the worker did over the run, for the summary."""

    now: float  # the run's length
    idle: float  # waiting with nothing to run (for the busy fraction -> power)
    steps: int
    step_time: float
    batch_steps: int  # sum of the batch over steps


_Emit = Callable[[list[tuple[list[int], _Chunk]], float, float], tuple[int, float, float]]


def _emitter(engine: EngineModel, arrivals: Arrivals, rows: _Rows, measured: range) -> _Emit:
    """Chunks out: one Decoder+Vocos call for every row at a chunk boundary, then the server's
    event loop hands the chunks out one after another; rows that finish leave the batch (a closed
    loop's stream sends again).

    The emit runs at nearly every step of a run, so it is a closure over what it reads (local
    names, not attributes: the hot loop of the simulator)."""
    step, requests, loop = engine.step, arrivals.requests, arrivals.loop
    handoff_s, serial, think_s = loop.handoff_s, loop.serial, arrivals.load.think_s
    # on the engine's CPU the event loop has half of it while the engine runs (2 x per chunk),
    # and the engine's next steps pay for the other half (debt)
    per_chunk = handoff_s * (2 if serial else 1)
    calls: dict[tuple[int, int], float] = {}  # Decoder+Vocos call by (audio steps, rows)
    leave, send = rows.leave, arrivals.add

    def emit(groups: list[tuple[list[int], _Chunk]], now: float, debt: float) -> tuple[int, float, float]:
        """-> (measured requests done, the worker's time after the call, its hand-off debt)."""
        if len(groups) == 1:  # the common case: rows that joined together, at one chunk
            rids, chunk = groups[0]
            n = len(rids)
            key = (chunk.played * n, n)
        else:
            steps = n = 0
            for r, chunk in groups:
                k = len(r)
                steps += chunk.played * k
                n += k
            key = (steps, n)
        call = calls.get(key)
        if call is None:  # calls repeat: the same chunks of the same number of rows
            calls[key] = call = step.vocoder(key[0] / F.STEPS_PER_AUDIO_SECOND, n)
        now += call
        if serial:
            debt += handoff_s * n
        done = 0
        # chunks go out one after another from when the call returns, or when the loop is free
        free = loop.free
        if free < now:
            free = now
        for rids, (a, _, first, last) in groups:
            if last:
                for rid in rids:
                    free += per_chunk
                    q = requests[rid]
                    if first:
                        q.first, q.play_end, q.stall = free, free + a, 0.0
                    else:
                        late = free - q.play_end
                        if late > q.stall:
                            q.stall = late
                        q.play_end = (free if late > 0 else q.play_end) + a
                    q.done = free
                    leave(q.start_step)
                    done += rid in measured
                    if q.stream >= 0:
                        if think_s is not None:  # a listener: after the reply has played, and thought
                            q.pause = max(free, q.play_end) + think_s - free
                        send(free + q.pause, q.stream)
            elif first:
                for rid in rids:
                    free += per_chunk
                    q = requests[rid]
                    q.first, q.play_end, q.stall = free, free + a, 0.0
            else:  # most chunks: playback goes on, or stalled until this one came
                for rid in rids:
                    free += per_chunk
                    q = requests[rid]
                    late = free - q.play_end
                    if late > 0:
                        if late > q.stall:
                            q.stall = late
                        q.play_end = free + a
                    else:
                        q.play_end += a
        loop.free = free
        return done, now, debt

    return emit


def simulate(
    engine: EngineModel, load: Load, n_requests: int = 1000, seed: int = 0, cold_start: bool = False
) -> SimResult:
    """Steady state by default: a warm-up is simulated and left out, a closed loop's streams start
    staggered. cold_start: what `bench` measures after its warm-up drains: an empty engine, a
    closed loop's streams all sending at t = 0 (or one after another over load.ramp_s), the
    first n_requests sent measured, throughput as completions over that span (Little's law
    needs a steady state)."""
    if load.value <= 0:
        raise ValueError("load must be positive")
    if engine.max_batch < 1:
        raise ValueError("max_batch must be >= 1")
    run = _one_run(engine, load, n_requests, seed, cold_start)
    return _summary(run, load, cold_start, engine.workload)


def _one_run(
    engine: EngineModel, load: Load, n_requests: int, seed: int, cold_start: bool
) -> tuple[list[Request], range, _Totals]:
    """One simulated run: its requests, which of them are measured, and the worker's totals."""
    w, sm, maxb = engine.workload, engine.step, engine.max_batch
    # Warm-up: a closed loop's first request per stream starts from an empty engine.
    streams = int(load.value) if load.kind == "streams" else 0
    if cold_start:
        warmup = 0
    else:
        warmup = streams if streams else max(10, n_requests // 10)
        # A closed loop is measured over at least one full wave of its streams after the warm-up one.
        n_requests = max(n_requests, streams)
    arrivals = Arrivals(
        load,
        np.random.default_rng(seed),
        EventLoop.of(engine),
        len(w.classes()),
        seed,
        w.ordered,
        tuple(a for a, _ in w.classes()),
    )
    b0 = min(streams, maxb)  # one request's service time, to stagger a closed loop's streams over
    service = (
        w.steps * float(sm.step(b0, b0 * (w.prompt_tokens + w.steps / 2)))
        if streams and not cold_start
        else 0.0
    )
    if load.think_s is not None:  # a listener's cycle holds its reply's playback and its thinking
        service = max(service, w.audio_seconds) + load.think_s
    if cold_start:
        arrivals.limit = n_requests
    arrivals.start(streams, cold_start, service)
    measured = range(warmup, warmup + n_requests)
    return arrivals.requests, measured, _serve(engine, arrivals, measured)


def _admit(
    waiting: deque[int], requests, rows: _Rows, maxb: int, prompt: int, prompts, sm, prefills: dict
) -> float:
    """Every waiting request that fits joins, prefilled together -> the prefill's seconds (one
    call per (longest prompt, rows joining), cached in `prefills`)."""
    joining = []
    lengths = None if prompts is None else []
    while waiting and rows.running + len(joining) < maxb:
        rid = waiting.popleft()
        q = requests[rid]
        q.start_step = rows.g
        joining.append(rid)
        if lengths is not None:
            lengths.append(q.length)
    n = len(joining)
    rows.admit(joining, lengths)
    key = (prompt, n) if lengths is None else (max(map(prompts.__getitem__, lengths)), n)
    t = prefills.get(key)
    if t is None:
        prefills[key] = t = sm.prefill(*key)
    return t


def _serve(engine: EngineModel, arrivals: Arrivals, measured: range) -> _Totals:
    """The worker's loop until every measured request is done: admit, run steps up to the next
    event (a chunk boundary, or an arrival that can join), emit."""
    w, sm, maxb = engine.workload, engine.step, engine.max_batch
    c0, c1, c2, c3, c4 = sm.coefficients()
    host_step, host_row = engine.host_per_step_s, engine.host_per_row_s
    classes = w.classes()
    # a step attends over the batch padded to its oldest row, whose prompt is taken as the
    # longest (one length: exactly its prompt); a prefill of rows joining together, likewise
    prompt = max(p for _, p in classes)
    prompts = [p for _, p in classes] if len(classes) > 1 else None
    rows = _Rows(chunk_plans(w))
    starts, event_steps, requests, heap = rows.starts, rows.event_steps, arrivals.requests, arrivals.heap
    emit = _emitter(engine, arrivals, rows, measured)
    loop = arrivals.loop
    waiting: deque[int] = deque()
    now = idle = debt = step_time = 0.0  # debt: hand-off seconds still to share the CPU with
    done = steps = batch_steps = 0
    n_measured = len(measured)
    prefills: dict[tuple[int, int], float] = {}  # one prefill call by (prompt, rows joining)
    plain = sm.correction is None
    while done < n_measured:
        if heap and heap[0][0] <= now:
            for rid in arrivals.due(now, waiting, engine.max_queue):  # refused: answered, done
                done += rid in measured
            debt += loop.owed  # the requests it took in, on the engine's CPU
            loop.owed = 0.0
        if waiting and rows.running < maxb:
            now += _admit(waiting, requests, rows, maxb, prompt, prompts, sm, prefills)
        batch = rows.running
        if batch == 0:
            t_next = arrivals.next_time()
            gap = max(0.0, t_next - now)
            idle += gap
            debt = max(0.0, debt - gap)  # the event loop has the CPU to itself meanwhile
            now = max(now, t_next)
            continue
        g, g_next = rows.g, event_steps[0]
        k = g_next - g
        ctx0 = batch * (prompt + g - starts[0])  # attended_tokens(), inlined: the hot loop
        if plain and k == 1:  # the next event one step away (most steps at a full batch):
            m, f = c1 + c2 * (ctx0 + batch), c3 * batch + c4 * ctx0  # _run_steps's k == 1, inlined
            elapsed, stop = c0 + (host_step + host_row * batch) + (m if m >= f else f), 1
        else:
            # Run steps until the next row event, or until the first boundary after the next
            # arrival when a slot is free (so it can join).
            t_arr = heap[0][0] - now if (batch < maxb and heap) else math.inf
            # Sharing one CPU with the event loop's pending hand-offs (debt): the first `debt`
            # seconds of steps take twice as long, so an arrival t_arr away comes after
            # t_arr - debt seconds of steps (t_arr / 2 while the debt lasts).
            t_stop = t_arr / 2 if t_arr <= 2 * debt else t_arr - debt
            # a measured correction of the device's step, taken constant over the run; the
            # host's per-row work comes on top of it
            if plain:
                coef = (c0 + (host_step + host_row * batch), c1, c2, c3, c4)
            else:
                f = sm.factor(batch, ctx0 + batch * k / 2)
                coef = (c0 * f + (host_step + host_row * batch), c1 * f, c2 * f, c3 * f, c4 * f)
            elapsed, stop = _run_steps(coef, batch, ctx0, k, t_stop)
        if debt:  # only with the event loop on the engine's CPU
            shared = elapsed if elapsed < debt else debt
            debt -= shared
            elapsed += shared
        now += elapsed
        rows.g = g = g + stop
        steps += stop
        step_time += elapsed
        batch_steps += batch * stop
        if g >= g_next:
            heapq.heappop(event_steps)
            n, now, debt = emit(rows.events.pop(g), now, debt)
            done += n
    return _Totals(now, idle, steps, step_time, batch_steps)


def _summary(
    run: tuple[list[Request], range, _Totals], load: Load, cold_start: bool, w: Workload
) -> SimResult:
    """Latency percentiles over the measured requests answered, throughput, the share refused and
    the worker's averages."""
    streams = int(load.value) if load.kind == "streams" else 0
    requests, measured, totals = run
    every = [requests[i] for i in measured]
    ms = [q for q in every if not q.refused]  # bench's percentiles are over the answered (ok) ones
    if not ms:
        raise ValueError(f"every one of the {len(every)} measured requests was refused (the queue full)")
    arrival = np.array([q.arrival for q in ms])
    e2e = np.array([q.done for q in ms]) - arrival
    ttfa = np.array([q.first for q in ms]) - arrival
    stalls = np.array([q.stall for q in ms])
    n = len(ms)
    # Throughput. n / (span of the measured requests) would undercount by about
    # n / (n + requests in flight), the span holding the last requests' whole service time.
    # Closed loop: Little's law, N streams / mean cycle (E2E + a listener's pause), exact in
    # steady state and blind to the waves equal-length requests march in. Open loop (and a cold
    # start, which is no steady state): every completion inside the measured span, over that
    # span.
    # each request's audio, by its length class
    of_class = np.array([F.steps_for_audio(a) / F.STEPS_PER_AUDIO_SECOND for a, _ in w.classes()])
    audio_s = of_class[[q.length for q in ms]]
    # bench's window: from the first measured request sent to the last answered, refused ones too
    t0 = min(q.arrival for q in every)
    t1 = max(q.done for q in every)
    window = t1 - t0
    # bench's definition when reproducing it: the measured successes over their window
    completed = len(ms) if cold_start else sum(1 for q in requests if t0 < q.done <= t1 and not q.refused)
    if streams and not cold_start:
        # every cycle a stream makes, a refused one's too, at the share answered
        cycle = np.array([q.done for q in every]) - np.array([q.arrival for q in every])
        mean = float(cycle.mean()) + float(np.mean([q.pause for q in every]))
        throughput = streams / mean if mean > 0 else math.inf
        if n < len(every):
            throughput *= n / len(every)
    else:
        throughput = completed / window if window > 0 else math.inf
    steps_run, clock = totals.steps, totals.now
    return SimResult(
        n=n,
        window_rps=n / window if window > 0 else math.inf,
        mean_s=float(e2e.mean()),
        e2e_p50=float(np.percentile(e2e, 50)),
        e2e_p99=float(np.percentile(e2e, 99)),
        ttfa_p50=float(np.percentile(ttfa, 50)),
        ttfa_p99=float(np.percentile(ttfa, 99)),
        rtf_p99=float(np.percentile(e2e / audio_s, 99)),
        underrun_p99=float(np.percentile(stalls, 99)),
        throughput_rps=throughput,
        audio_throughput=throughput * float(audio_s.mean()),
        mean_batch=totals.batch_steps / steps_run if steps_run else 0.0,
        mean_step_s=totals.step_time / steps_run if steps_run else 0.0,
        busy_fraction=1.0 - totals.idle / clock if clock > 0 else 0.0,
        p99_resolved=n >= P99_MIN_SAMPLES,
        audio_mean_s=float(audio_s.mean()),
        error_rate=(len(every) - n) / len(every),
    )
