"""The engine's scheduler: one worker thread owns the model and the device; requests join and
leave the running batch at decode-step boundaries (continuous batching).

The scheduler decides — who joins (admission under a prefill token budget), who leaves (EOS,
length limit, cancellation, deadline), what to do out of memory, how to drain — and the runner
(runner.py) runs the step over the batch held in tensors. Per step the scheduler does NumPy work
over the rows, and Python work only for the rows an event touches (joining, emitting audio,
finishing). Each row keeps its own sampling settings and seed (stateless randomness), so its
output does not depend on who else is in the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass

import numpy as np
import psutil
import torch

from ttsperf.engine.config import EngineConfig, Switches
from ttsperf.engine.runner import Admission, Runner
from ttsperf.engine.stats import EngineStats
from ttsperf.engine.switches import apply_switches
from ttsperf.engine.types import (
    AudioChunk,
    NotAccepting,
    QueueFull,
    RequestHandle,
    SynthError,
    SynthRequest,
    SynthResult,
    TextTooLong,
)
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import row_seeds


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


AUTO_BATCH_CAP = 64  # --max-batch auto never goes past this, whatever the memory


def auto_max_batch(pipe: Pipeline, max_len: int, *, headroom: float = 0.5, cap: int = AUTO_BATCH_CAP) -> int:
    """The largest batch whose KV slots fit in `headroom` of the free memory (device or host)."""
    g = pipe.cfg.gpt
    elem = next(pipe.model.gpt.parameters()).element_size()
    per_row = g.kv_bytes_per_token(elem) * max_len + 4 * g.hidden_size * max_len  # KV + kept states
    if pipe.device.type == "cuda":
        free = torch.cuda.mem_get_info(pipe.device)[0]
    else:
        free = psutil.virtual_memory().available
    return int(max(1, min(cap, free * headroom // per_row)))


@dataclass
class _Row:
    """What the host keeps of a running request: only what events (audio, finishing) need."""

    handle: RequestHandle
    forced: bool
    started: float
    emitted: int = 0  # samples handed out
    chunks: int = 0
    capped: bool = False  # its speech-rate length was cut to max_new_tokens


class Engine:
    def __init__(self, pipe: Pipeline, config: EngineConfig | None = None, switches: Switches | None = None):
        self.pipe = pipe
        self.config = (config or EngineConfig()).validate()
        self.switches = (switches or Switches(dtype=pipe.dtype_name)).validate()
        self.switch_report = apply_switches(self.switches, pipe.model, pipe.device)
        self.max_len = self.config.max_prompt_tokens + self.config.max_new_tokens
        self.max_batch = self.config.max_batch or auto_max_batch(pipe, self.max_len)
        self.effective_max_batch = self.max_batch  # shrinks after an out-of-memory
        self.runner = Runner(
            pipe,
            max_batch=self.max_batch,
            max_prompt_tokens=self.config.max_prompt_tokens,
            max_new_tokens=self.config.max_new_tokens,
            lookahead_steps=self.config.lookahead_steps,
            switch_report=self.switch_report,
        )
        self.stats = EngineStats()
        self._waiting: deque[RequestHandle] = deque()
        self._cancelled: deque[RequestHandle] = deque()  # handles whose client went away
        self._admitting = 0  # taken off the queue, not yet a row (being prefilled): still pending
        self._rows: list[_Row] = []  # row i is slot i of the runner's batch
        self._cv = threading.Condition()
        self._accepting = True
        self._stop = False
        self._step_count = 0
        self._thread = threading.Thread(target=self._run, name="ttsperf-engine", daemon=True)

    # ------------------------------------------------------------------ public API

    @property
    def decode_step(self):
        return self.runner.decode_step

    @property
    def slots(self):
        return self.runner.slots

    def start(self) -> Engine:
        """Compile first (if asked), so no request waits for it; then start the worker."""
        if self.decode_step.compiled:
            with self._contexts():  # the worker's grad and autocast state: compiled code guards on it
                self.decode_step.compile_now(self.switch_report["compile"])
                self.runner.audio.compile_now(self.runner.state.hidden, self.switch_report["compile"])
        self._thread.start()
        return self

    @property
    def ready(self) -> bool:
        return self._thread.is_alive() and self._accepting

    def submit(self, request: SynthRequest, loop: asyncio.AbstractEventLoop | None = None) -> RequestHandle:
        """Queue a request (thread-safe). Raises NotAccepting, QueueFull or TextTooLong."""
        tokens = self.prompt_tokens(request)
        if tokens > self.config.max_prompt_tokens:
            raise TextTooLong(tokens, self.config.max_prompt_tokens)
        handle = RequestHandle(request, loop)
        handle.prompt_tokens = tokens
        # drawn once: a request put back after an out-of-memory restarts identically
        handle.seed = int(row_seeds([request.sampling.seed])[0])
        handle.on_cancel = self._cancelled.append
        with self._cv:
            if not self._accepting:
                raise NotAccepting("the engine is draining or stopped")
            if len(self._waiting) >= self.config.max_queue:
                self.stats.rejected += 1
                raise QueueFull(len(self._waiting), self.config.retry_after)
            self._waiting.append(handle)
            self._cv.notify()
        return handle

    def prompt_tokens(self, request: SynthRequest) -> int:
        tok = self.pipe.tokenizer
        return len(tok.ids(tok.decorate_code_prompt(request.text, request.prompt)))

    def stop(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop admitting; with drain, answer everything accepted first, else fail it (shutdown)."""
        with self._cv:
            self._accepting = False
            if not drain:
                self._stop = True
            self._cv.notify()
        if drain:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.pending() and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.01)
            with self._cv:
                self._stop = True
                self._cv.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def pending(self) -> int:
        with self._cv:
            return len(self._waiting) + self._admitting + len(self._rows)

    def queue_depth(self) -> int:
        with self._cv:
            return len(self._waiting)

    def running(self) -> int:
        return len(self._rows)

    def describe(self) -> dict:
        graphed = self.runner.graphed
        return {
            "config": {**asdict(self.config), "inject_oom_at_steps": sorted(self.config.inject_oom_at_steps)},
            "max_batch": self.max_batch,
            "effective_max_batch": self.effective_max_batch,
            "kv_bytes": self.slots.nbytes,
            "switches": self.switch_report,
            "decode_step": {
                "compiled_graphs": self.decode_step.compiles,
                "compile_seconds": round(self.decode_step.compile_seconds, 3),
                "cuda_graphs": sorted(graphed.graphs) if graphed else [],
                "eager_fallback_steps": graphed.eager_steps if graphed else 0,
            },
            "device": str(self.pipe.device),
            "model": self.pipe.cfg.name,
            "weights": "synthetic" if self.pipe.synthetic else "assets",
        }

    # ------------------------------------------------------------------ worker thread

    def _contexts(self) -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode() if self.switches.inference_mode else torch.no_grad())
        if self.switches.autocast:
            half = torch.bfloat16 if self.pipe.device.type == "cpu" else torch.float16
            stack.enter_context(torch.autocast(self.pipe.device.type, dtype=half))
        return stack

    def _run(self) -> None:
        with self._contexts():
            while True:
                with self._cv:
                    while not self._waiting and not self._rows and not self._stop:
                        self._cv.wait()
                    if self._stop:
                        break
                try:
                    self._admit()
                    if self._rows:
                        self._step()
                except Exception as exc:  # noqa: BLE001 - a bug must not leave requests unanswered
                    for row in self._rows:
                        self._fail(row.handle, "internal", f"{type(exc).__name__}: {exc}")
                    self._drop_all()
        with self._cv:  # stopped without drain: everything left is answered, not dropped
            left = list(self._waiting) + [r.handle for r in self._rows]
            self._waiting.clear()
            self._rows.clear()
        for handle in left:
            self._fail(handle, "shutdown", "the server is shutting down")

    def _deadline(self, handle: RequestHandle) -> float:
        return handle.submitted + (handle.request.timeout or self.config.request_timeout)

    def _admit(self) -> None:
        """Take every waiting request that fits (rows and the prefill token budget) and prefill
        them together: one forward, whatever their number."""
        joining: list[RequestHandle] = []
        with self._cv:
            longest = 0
            while self._waiting and len(self._rows) + len(joining) < self.effective_max_batch:
                tokens = max(longest, self._waiting[0].prompt_tokens)
                if joining and tokens * (len(joining) + 1) > self.config.prefill_tokens:
                    break
                longest = tokens
                joining.append(self._waiting.popleft())
            self._admitting += len(joining)
        try:
            now = time.monotonic()
            ready = []
            for handle in joining:
                if handle.cancelled.is_set():
                    self._fail(handle, "cancelled", "the client went away")
                elif now > self._deadline(handle):
                    self._fail(handle, "timeout", "deadline passed while queued")
                else:
                    ready.append(handle)
            if ready:
                try:
                    self._prefill(ready)
                except Exception as exc:
                    if not _is_oom(exc):
                        raise
                    self._on_oom(requeue=ready)
        finally:
            with self._cv:
                self._admitting -= len(joining)

    def _admission(self, handle: RequestHandle) -> Admission:
        req = handle.request
        max_new = min(req.max_new_tokens or self.config.max_new_tokens, self.config.max_new_tokens)
        forced = self.pipe.synthetic or req.fixed_length
        wanted = self.pipe.speech_rate.steps(req.text) if forced else max_new
        return Admission(
            text=req.text,
            prompt=req.prompt,
            params=req.sampling,
            seed=handle.seed,
            limit=min(wanted, max_new),
            forced=forced,
            deadline=self._deadline(handle),
            stream=req.stream,
            first_emit=self.config.first_chunk_steps,
            capped=wanted > max_new,
        )

    def _prefill(self, handles: list[RequestHandle]) -> None:
        admissions = [self._admission(h) for h in handles]
        started = time.monotonic()
        t0 = time.perf_counter()
        self.runner.prefill(admissions)
        self.stats.prefill_seconds.observe(time.perf_counter() - t0)
        with self._cv:
            self._rows.extend(
                _Row(h, a.forced, started, capped=a.capped) for h, a in zip(handles, admissions, strict=True)
            )

    def _step(self) -> None:
        state = self.runner.state
        b = state.size
        before = int(state.host["steps"][:b].sum())
        t0 = time.perf_counter()
        try:
            if self._step_count in self.config.inject_oom_at_steps:
                self._step_count += 1
                raise torch.OutOfMemoryError("injected out of memory (fault injection)")
            self.runner.step()
        except Exception as exc:
            if not _is_oom(exc):
                raise
            self._on_oom()
            return
        self._step_count += 1
        self.stats.observe_step(b, time.perf_counter() - t0)
        self.stats.decode_steps += int(state.host["steps"][:b].sum()) - before
        self._events()

    def _events(self) -> None:
        """After a step: answer the rows that finished, emit the chunks that are due, drop the
        rows that left. NumPy finds them; Python touches only them."""
        h, b = self.runner.state.host, len(self._rows)
        steps = h["steps"][:b]
        finished = h["done"][:b] | (steps >= h["limits"][:b])
        gone = h["deadline"][:b] < time.monotonic()
        while self._cancelled:
            handle = self._cancelled.popleft()
            gone |= np.fromiter((r.handle is handle for r in self._rows), bool, b)
        due = h["stream"][:b] & ~finished & (steps >= h["next_emit"][:b])
        h["next_emit"][:b][due] = steps[due] + self.config.chunk_steps
        leaving, emitting = [], []
        for slot in np.flatnonzero(finished | due | gone).tolist():
            row = self._rows[slot]
            if gone[slot]:
                leaving.append(slot)
                if row.handle.cancelled.is_set():
                    self._fail(row.handle, "cancelled", "the client went away")
                else:
                    self._fail(row.handle, "timeout", f"deadline passed after {steps[slot]} steps")
                continue
            if finished[slot]:
                leaving.append(slot)
            window = self.runner.audio.window(slot, int(steps[slot]), row.emitted, final=bool(finished[slot]))
            if window is not None:
                emitting.append(window)
            elif finished[slot]:
                self._finish(row, int(steps[slot]), bool(h["done"][slot]))
        t0 = time.perf_counter()
        decoded = self.runner.emit(emitting)
        if emitting:
            self.stats.audio_call_seconds.observe(time.perf_counter() - t0)
        for window, samples in zip(emitting, decoded, strict=True):
            row = self._rows[window.slot]
            row.emitted = window.end
            if samples.size:
                row.handle.put(AudioChunk(samples, self.pipe.cfg.sample_rate, row.chunks))
                row.chunks += 1
            if finished[window.slot]:
                self._finish(row, int(steps[window.slot]), bool(h["done"][window.slot]))
        if leaving:
            self._remove(leaving)

    def _remove(self, slots: list[int]) -> None:
        moves = self.runner.remove(slots)
        rows = self._rows
        for src, dst in moves:
            rows[dst] = rows[src]
        with self._cv:
            del rows[len(rows) - len(slots) :]

    def _drop_all(self) -> None:
        self.runner.state.truncate(0)
        with self._cv:
            self._rows.clear()

    def _finish(self, row: _Row, steps: int, eos: bool) -> None:
        audio_seconds = row.emitted / self.pipe.cfg.sample_rate
        self.stats.audio_seconds += audio_seconds
        self.stats.count("ok")
        row.handle.put(
            SynthResult(
                steps=steps,
                audio_seconds=audio_seconds,
                queue_seconds=row.started - row.handle.submitted,
                inference_seconds=time.monotonic() - row.started,
                length_source=(
                    "eos" if eos else "max-new-tokens" if row.capped or not row.forced else "speech-rate"
                ),
                chunks=row.chunks,
            )
        )

    def _fail(self, handle: RequestHandle, kind: str, message: str) -> None:
        self.stats.count(kind)
        handle.put(SynthError(kind, message))  # type: ignore[arg-type]

    def _on_oom(self, requeue: list[RequestHandle] | None = None) -> None:
        """Out of memory: shrink the batch and go on. The newest rows that have streamed nothing
        yet go back to the front of the queue (they restart identically: same seed); a row that
        already streamed audio cannot restart unnoticed and is answered 'oom', as is a request
        that cannot run even alone."""
        self.stats.ooms += 1
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        back = list(requeue or [])
        if not back:
            if len(self._rows) <= 1:
                for row in self._rows:
                    self._fail(row.handle, "oom", "out of memory even alone in the batch")
                self._drop_all()
                return
            keep = max(1, len(self._rows) // 2)
            for row in self._rows[keep:]:
                if row.chunks:
                    self._fail(row.handle, "oom", "out of memory after audio was streamed")
                else:
                    back.append(row.handle)
            self.runner.state.truncate(keep)
            with self._cv:
                del self._rows[keep:]
        elif not self._rows and len(back) == 1:
            self._fail(back[0], "oom", "out of memory prefilling alone")
            return
        # a prefill of several that failed alone retries with half as many
        self.effective_max_batch = max(1, len(self._rows) or len(back) // 2)
        with self._cv:
            self._waiting.extendleft(reversed(back))
