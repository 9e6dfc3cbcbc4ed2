"""The engine: one worker thread owns the model and the device; requests join and leave the
running batch at decode-step boundaries (continuous batching).

The scheduler decides — who joins (admission.py: the queue and the prefill token budget; lengths.py:
how long each row runs), who leaves and what it hears (emission.py, replies.py), what to do out of
memory (oom.py), how to drain (Worker, below) — and keeps its own per-row data in a row table
(scheduler_rows.py). The runner (runner.py) runs the step over the batch held in tensors and answers with a
small step output. Per step the scheduler does NumPy work over the rows, and Python work only for
the rows an event touches (joining, emitting audio, finishing). Each row keeps its own sampling
settings and seed (stateless randomness), so its output does not depend on who else is in the batch.

The worker thread and what the engine says about itself (describe) live here, beside the Engine
whose turn and state they read: as modules of their own they and engine.py imported each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from functools import partial

import torch

from ttsperf.engine import oom
from ttsperf.engine.admission import RequestQueue
from ttsperf.engine.config import EngineConfig, Switches, default_queue
from ttsperf.engine.emission import Emission
from ttsperf.engine.faults import inject_oom
from ttsperf.engine.lengths import LengthPolicy
from ttsperf.engine.replies import Replies
from ttsperf.engine.runner import Admission, Runner
from ttsperf.engine.scheduler_rows import Joining, RowTable
from ttsperf.engine.stats import EngineStats
from ttsperf.engine.switches import apply_switches
from ttsperf.engine.types import RequestHandle, SynthRequest, TextTooLong
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import row_seeds

log = logging.getLogger("ttsperf.engine")

__all__ = ["Engine", "EngineConfig"]


def free_device_bytes(device: torch.device) -> int | None:
    """The device's free memory (bytes, the model loaded), or None on a CPU or when CUDA cannot say."""
    if device.type != "cuda":
        return None
    try:
        return int(torch.cuda.mem_get_info(device)[0])
    except (RuntimeError, AssertionError):  # no driver, or no such device: the allocation will say
        return None


class Engine:
    def __init__(self, pipe: Pipeline, config: EngineConfig | None = None, switches: Switches | None = None):
        self.pipe = pipe
        self.config = c = (config or EngineConfig()).validate()
        self.switches = (switches or Switches(dtype=pipe.dtype_name)).validate()
        self.switch_report = apply_switches(self.switches, pipe.model, pipe.device)
        self.max_len = c.max_prompt_tokens + c.max_new_tokens
        # before the runner allocates: a --max-batch whose slots cannot fit is refused in one line
        g, device = pipe.cfg.gpt, pipe.device
        kv_elem = next(pipe.model.gpt.parameters()).dtype.itemsize  # the KV slots' dtype (runner.py)
        c.check_fits(free_device_bytes(device), g.kv_bytes_per_token(kv_elem), g.hidden_size, str(device))
        self.runner = Runner(
            pipe,
            max_batch=c.max_batch,
            max_prompt_tokens=c.max_prompt_tokens,
            max_new_tokens=c.max_new_tokens,
            lookahead_steps=c.lookahead_steps,
            switch_report=self.switch_report,
            graphs_without_capture=c.graphs_without_capture,
            memory_share=c.memory_share,
            prefill_rows=c.prefill_rows,
            pcm=c.pcm,
        )
        self.max_batch = self.runner.max_batch
        self.effective_max_batch = self.max_batch  # shrinks after an out-of-memory
        self.stats = EngineStats()
        self.max_queue = c.max_queue or default_queue(self.max_batch)
        self.queue = RequestQueue(self.max_queue, c.prefill_tokens, c.retry_after, self.stats)
        self.table = RowTable.empty(self.max_batch)  # row i is slot i of the runner's batch
        self.lengths = LengthPolicy(c.max_new_tokens, pipe.synthetic, pipe.speech_rate)
        self.replies = Replies(self.stats, pipe.cfg.sample_rate)
        # a turn's steps (config.steps_per_turn), the runner's own launch when no fault is injected
        self._launch_step = inject_oom(partial(self.runner.launch, c.steps_per_turn), c.inject_oom_at_steps)
        self._launches: deque[tuple[int, float]] = deque()  # (batch, launch seconds) not yet read
        # on a GPU the host reads step N while step N+1 runs; on a CPU a step is done when its
        # launch returns, so reading it a step later would only delay every event by a step
        self.overlap = c.overlap if c.overlap is not None else pipe.device.type == "cuda"
        # one step ahead, the host does not wait for the audio call either: handed out next turn
        self.emission = Emission(
            self.runner, self.table, self.replies, self.stats, c.chunk_steps, pipe.cfg.sample_rate,
            defer=self.overlap,
        )  # fmt: skip
        # called by the worker after each turn and once it stops: the core process sends the
        # turn's events then, in one message (engine/core.py)
        self.after_turn: Callable[[], None] = lambda: None
        self.worker = Worker(self)
        self.warmed: dict = {}  # start(): the graphs captured before the first request

    # ------------------------------------------------------------------ public API

    @property
    def decode_step(self):
        return self.runner.decode_step

    @property
    def slots(self):
        return self.runner.slots

    def start(self) -> Engine:
        """Compile and capture first (what is asked), so no request waits for it; then start the
        worker. `warmed` says what was built."""
        with self._contexts():  # the worker's grad and autocast state: compiled code guards on it
            if self.decode_step.compiled:
                self.decode_step.compile_now(self.switch_report["compile"])
                self.runner.audio.compile_now(self.runner.state.hidden, self.switch_report["compile"])
            self.warmed = self.runner.warm()
        self.worker.thread.start()
        return self

    @property
    def ready(self) -> bool:
        return self.worker.thread.is_alive() and self.queue.accepting

    def submit(
        self,
        request: SynthRequest,
        loop: asyncio.AbstractEventLoop | None = None,
        sink=None,
        prompt_ids: list[int] | None = None,
    ) -> RequestHandle:
        """Queue a request (thread-safe). Raises NotAccepting, QueueFull or TextTooLong. Events go
        to `loop` (asyncio), to `sink(handle, event)` (the core's outbox), or to a thread queue;
        `prompt_ids`: prompt_ids(request), when the caller tokenized it already. The prefill uses
        them: a text is tokenized once."""
        ids = self.prompt_ids(request) if prompt_ids is None else prompt_ids
        if len(ids) > self.config.max_prompt_tokens:
            raise TextTooLong(len(ids), self.config.max_prompt_tokens)
        handle = RequestHandle(request, loop, sink)
        handle.prompt_tokens, handle.prompt_ids = len(ids), ids
        handle.deadline = handle.submitted + (request.timeout or self.config.request_timeout)
        # drawn once: a request put back after an out-of-memory restarts identically
        handle.seed = int(row_seeds([request.sampling.seed])[0])
        self.queue.put(handle)
        return handle

    def prompt_ids(self, request: SynthRequest) -> list[int]:
        """The decorated prompt's token ids (what the prefill embeds)."""
        tok = self.pipe.tokenizer
        return tok.ids(tok.decorate_code_prompt(request.text, request.prompt))

    def stop(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop admitting; with drain, answer everything accepted first, else fail it (shutdown)."""
        self.worker.stop(drain, timeout)

    def pending(self) -> int:
        with self.queue.lock:
            return self.queue.held() + self.table.size + self.emission.waiting()

    def queue_depth(self) -> int:
        return self.queue.depth()

    def running(self) -> int:
        return self.table.size

    def describe(self) -> dict:
        """What the engine says about itself (/healthz, profiles): its settings, batch limits,
        memory, switches and what its decode step compiled or captured."""
        config, runner, step = self.config, self.runner, self.decode_step
        graphed, prefill, audio = runner.graphed, runner.graphed_prefill, runner.graphed_audio
        return {
            "config": {**asdict(config), "inject_oom_at_steps": sorted(config.inject_oom_at_steps)},
            "max_batch": self.max_batch,
            "effective_max_batch": self.effective_max_batch,
            "max_queue": self.max_queue,
            "kv_bytes": runner.slots.nbytes,
            "switches": self.switch_report,
            "decode_step": {
                "compiled_graphs": step.compiles,
                "compile_seconds": round(step.compile_seconds, 3),
                "cuda_graphs": sorted(graphed.graphs) if graphed else [],
                "eager_fallback_steps": graphed.eager_steps if graphed else 0,
            },
            "overlap": self.overlap,  # step N's status read while step N+1 runs
            "prefill_graphs": sorted(prefill.graphs) if prefill else [],  # (rows, prompt tokens)
            "prefill_compiled_graphs": step.prefill_compiles,  # --compile: one row, rows >= 2
            "first_code_graphs": sorted(prefill.first_codes) if prefill else [],  # (rows, candidates)
            "eager_prefill_calls": prefill.eager_calls if prefill else 0,
            "audio_graphs": sorted(k[1:] for k in audio.graphs) if audio else [],
            "warmed": self.warmed,  # what start() built before the first request
            "device": str(self.pipe.device),
            "model": self.pipe.cfg.name,
            "sample_rate": self.pipe.cfg.sample_rate,
            "weights": "synthetic" if self.pipe.synthetic else "assets",
        }

    # ------------------------------------------------------------------ the worker's turn

    def _contexts(self) -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode() if self.switches.inference_mode else torch.no_grad())
        if self.switches.autocast:
            half = torch.bfloat16 if self.pipe.device.type == "cpu" else torch.float16
            stack.enter_context(torch.autocast(self.pipe.device.type, dtype=half))
        return stack

    def _turn(self) -> None:
        """Launch step N, then the host's work while it runs: step N-1's events (audio out, rows
        leave) and the joiners for step N+1. On a GPU the device always has the next step queued
        while the host works (issue 33 item 3; `overlap` off: launch and read step N at once)."""
        if self.table.size:
            self._step()
        elif self.runner.launched:  # every row left: nothing in flight is read
            self._events()
        self._admit()
        if not self.table.size:  # no rows: no next turn may come soon to hand it out
            self.emission.hand_out()

    def _admit(self) -> None:
        """Prefill, in one forward, every waiting request that fits (queue.take); answer those
        cancelled or past their deadline while they waited."""
        free, c = self.effective_max_batch - self.table.size, self.config
        if not self.queue.due(free, self.table.size, time.monotonic(), c.prefill_wait, c.prefill_rows):
            return
        joining = self.queue.take(free)
        try:
            now = time.monotonic()
            ready = []
            for handle in joining:
                if handle.cancelled.is_set():
                    self.replies.fail(handle, "cancelled", "the client went away")
                elif now > handle.deadline:
                    self.replies.fail(handle, "timeout", "deadline passed while queued")
                else:
                    ready.append(handle)
            if ready:
                try:
                    self._prefill(ready)
                except Exception as exc:
                    if not oom.is_oom(exc):  # a bug: taken from the queue, not yet in the table
                        for handle in ready:
                            self.replies.fail(handle, "internal", _internal(exc))
                        raise
                    self._shrink(oom.after_prefill(ready, self.table.size))
        finally:
            self.queue.admitted(len(joining))

    def _prefill(self, handles: list[RequestHandle]) -> None:
        joining, admissions = [], []
        for h in handles:
            req, length = h.request, self.lengths.of(h.request)
            joining.append(Joining(h, length.limit, length.forced, length.capped, req.stream, h.deadline))
            admissions.append(
                Admission(
                    req.text, req.prompt, req.sampling, h.seed, length.limit, length.forced, h.prompt_ids
                )
            )
        started = time.monotonic()
        t0 = time.perf_counter()
        self.runner.prefill(admissions)
        self.stats.prefill_seconds.observe(time.perf_counter() - t0)
        with self.queue.lock:
            self.table.add(joining, started=started, first_emit=self.config.first_chunk_steps)

    def _step(self) -> None:
        b = self.table.size
        t0 = time.perf_counter()
        try:
            self._launch_step()
        except Exception as exc:
            if not oom.is_oom(exc):
                raise
            while self.runner.launched:  # what ran before the failed step is answered first
                self._events()
            self._shrink(oom.after_step(self.table, b))
            return
        self._launches.append((b, time.perf_counter() - t0))
        if not self.overlap or self.runner.launched > 1:
            self._events()  # with overlap step N-1's, while step N runs

    def _events(self) -> None:
        """The oldest launched turn's status: answer and hand out what it says, rows leave. Its
        steps' seconds: on a GPU their time on the device (events around them), on a CPU their
        launch, which computes them, and this wait."""
        batch, launch_seconds = self._launches.popleft()
        t0 = time.perf_counter()
        out = self.runner.collect()
        seconds = out.seconds if out.seconds is not None else launch_seconds + time.perf_counter() - t0
        self.stats.observe_step(batch, seconds, self.config.steps_per_turn)
        self.stats.decode_steps += out.taken
        leaving = self.emission.after(out, self.queue.cancelled)
        if leaving:
            self._remove(leaving)

    # ------------------------------------------------------------------ slot bookkeeping

    def _remove(self, slots: list[int]) -> None:
        """Rows leave: the runner compacts its batch, the row table follows its moves."""
        moves = self.runner.remove(slots)
        with self.queue.lock:
            self.table.apply(moves, self.table.size - len(slots))

    def _keep(self, size: int) -> None:
        """Rows 0..size-1 go on; the rest are answered or back in the queue already."""
        self.runner.truncate(size)
        with self.queue.lock:
            self.table.truncate(size)

    def _reset(self) -> None:
        """After a failed turn, every running row answered: no rows, and no step in flight read
        (a step launched before the failure would be read against rows that are gone)."""
        self._keep(0)
        self.runner.abandon()
        self._launches.clear()

    def _shrink(self, shrink: oom.Shrink) -> None:
        """Apply the OOM policy's decision."""
        self.emission.hand_out()  # the audio launched before: out before a row it was for fails
        self.stats.ooms += 1
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        for handle, why in shrink.fail:
            self.replies.fail(handle, "oom", why)
        if shrink.keep is not None:
            self._keep(shrink.keep)
        if shrink.max_batch is not None:
            self.effective_max_batch = shrink.max_batch
        self.queue.put_back(shrink.back)


def _internal(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


class Worker:
    """The one thread that owns the model and the device: it waits for work, runs the scheduler's
    turns (admit, then one step), and on stop either drains — answers everything accepted first — or
    answers what is left 'shutdown'. A bug in a turn answers the running rows 'internal' and goes on:
    no request is left unanswered."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.thread = threading.Thread(target=self._run, name="ttsperf-engine", daemon=True)

    def _run(self) -> None:
        e, queue = self.engine, self.engine.queue
        with e._contexts():
            while queue.wait_for_work(e.running()):
                try:
                    e._turn()
                except Exception as exc:  # noqa: BLE001 - a bug must not leave requests unanswered
                    log.exception("a turn failed; its running requests are answered 'internal'")
                    for handle in e.emission.settle() + e.table.handles():
                        e.replies.fail(handle, "internal", _internal(exc))
                    e._reset()
                e.after_turn()
        stranded = e.emission.settle()  # the audio launched last, handed out if it can be
        with queue.lock:  # stopped without drain: everything left is answered, not dropped
            left = stranded + queue.clear() + e.table.handles()
            e.table.truncate(0)
        for handle in left:
            e.replies.fail(handle, "shutdown", "the server is shutting down")
        e.after_turn()

    def stop(self, drain: bool, timeout: float | None) -> None:
        """Stop admitting; with drain, answer everything accepted first, else fail it (shutdown)."""
        queue = self.engine.queue
        queue.close(stop=not drain)
        if drain:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.engine.pending() and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.01)
            queue.close(stop=True)
        if self.thread.is_alive():
            self.thread.join(timeout)
