"""The engine: one worker thread owns the model and the device; requests join and leave the
running batch at decode-step boundaries (continuous batching).

A finished sequence frees its slot at once and a waiting request is prefilled into it. Each row
keeps its own sampling settings, seed, length limit and generator, so its output does not depend
on who else is in the batch. Streaming rows emit audio every `chunk_steps` steps, decoding only
the new frames (see stream.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field

import psutil
import torch

from ttsperf.engine.stats import EngineStats
from ttsperf.engine.step import DecodeStep, GraphedStep
from ttsperf.engine.stream import AudioDecoder
from ttsperf.engine.switches import Switches, apply_switches
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
from ttsperf.errors import UserError
from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import PENALTY_WINDOW, sample


@dataclass(frozen=True)
class EngineConfig:
    max_batch: int | None = None  # None: from free memory (auto_max_batch)
    max_queue: int = 64
    max_new_tokens: int = 2048  # 43.7 s of audio, the official default
    max_prompt_tokens: int = 512
    first_chunk_steps: int = 24  # 0.51 s of audio before the first streamed chunk
    chunk_steps: int = 24
    lookahead_steps: int = 4
    request_timeout: float = 300.0
    retry_after: float = 1.0
    inject_oom_at_steps: frozenset[int] = field(default_factory=frozenset)  # fault injection (tests)

    def validate(self) -> EngineConfig:
        for name in ("max_queue", "max_new_tokens", "max_prompt_tokens", "first_chunk_steps", "chunk_steps"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} {getattr(self, name)}: expected at least 1")
        if self.max_batch is not None and self.max_batch < 1:
            raise UserError(f"--max-batch {self.max_batch}: expected at least 1 (or auto)")
        if self.lookahead_steps < 0 or self.lookahead_steps >= self.first_chunk_steps:
            raise UserError(f"lookahead_steps {self.lookahead_steps}: expected 0 <= it < first_chunk_steps")
        return self


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


AUTO_BATCH_CAP = 64  # --max-batch auto never goes past this, whatever the memory


def auto_max_batch(pipe: Pipeline, max_len: int, *, headroom: float = 0.5, cap: int = AUTO_BATCH_CAP) -> int:
    """The largest batch whose KV slots fit in `headroom` of the free memory (device or host)."""
    g = pipe.cfg.gpt
    elem = next(pipe.model.gpt.parameters()).element_size()
    per_row = g.kv_bytes_per_token(elem) * max_len
    if pipe.device.type == "cuda":
        free = torch.cuda.mem_get_info(pipe.device)[0]
    else:
        free = psutil.virtual_memory().available
    return int(max(1, min(cap, free * headroom // per_row)))


@dataclass
class _Row:
    handle: RequestHandle
    limit: int
    forced: bool
    generator: torch.Generator | None
    audio: AudioDecoder
    position: int = 0
    started: float = 0.0
    hidden: list[torch.Tensor] = field(default_factory=list)
    history: torch.Tensor | None = None  # (num_vq, <= PENALTY_WINDOW)
    last_codes: torch.Tensor | None = None
    next_emit: int = 0
    chunks: int = 0
    done: bool = False


class Engine:
    def __init__(self, pipe: Pipeline, config: EngineConfig | None = None, switches: Switches | None = None):
        self.pipe = pipe
        self.config = (config or EngineConfig()).validate()
        self.switches = (switches or Switches(dtype=pipe.dtype_name)).validate()
        self.switch_report = apply_switches(self.switches, pipe.model, pipe.device)
        g = pipe.cfg.gpt
        self.max_len = self.config.max_prompt_tokens + self.config.max_new_tokens
        self.max_batch = self.config.max_batch or auto_max_batch(pipe, self.max_len)
        self.effective_max_batch = self.max_batch  # shrinks after an out-of-memory
        dtype = next(pipe.model.gpt.parameters()).dtype
        if not dtype.is_floating_point:  # int8-quantised linear layers keep fp32 activations
            dtype = torch.float32
        # Compiled: one spare position, so no step's KV view is ever the whole (contiguous) buffer,
        # which would be a shape of its own to compile.
        capacity = self.max_len + int(self.switch_report["compile"]["applied"])
        self.slots = KVSlots(
            g.num_hidden_layers, self.max_batch, g.num_key_value_heads, capacity,
            g.hidden_size // g.num_attention_heads, dtype=dtype, device=pipe.device,
        )  # fmt: skip
        self.forward = SlotForward(pipe.model.gpt)
        compile = self.switch_report["compile"]["applied"]
        self.decode_step = DecodeStep(pipe.model, self.forward, self.slots, compile=compile)
        self.graphed: GraphedStep | None = None
        if self.switch_report["cuda_graphs"]["applied"]:
            self.graphed = GraphedStep(self.decode_step, self.slots, g.num_vq)
        self.stats = EngineStats()
        self._waiting: deque[RequestHandle] = deque()
        self._admitting = 0  # taken off the queue, not yet a row (being prefilled): still pending
        self._rows: list[_Row] = []
        self._cv = threading.Condition()
        self._accepting = True
        self._stop = False
        self._step_count = 0
        self._thread = threading.Thread(target=self._run, name="ttsperf-engine", daemon=True)

    # ------------------------------------------------------------------ public API

    def start(self) -> Engine:
        """Compile first (if asked), so no request waits for it; then start the worker."""
        if self.decode_step.compiled:
            with self._contexts():  # the worker's grad and autocast state: compiled code guards on it
                self.decode_step.compile_now(self.switch_report["compile"])
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
        return {
            "config": {**asdict(self.config), "inject_oom_at_steps": sorted(self.config.inject_oom_at_steps)},
            "max_batch": self.max_batch,
            "effective_max_batch": self.effective_max_batch,
            "kv_bytes": self.slots.nbytes,
            "switches": self.switch_report,
            "decode_step": {
                "compiled_graphs": self.decode_step.compiles,
                "compile_seconds": round(self.decode_step.compile_seconds, 3),
                "cuda_graphs": sorted(self.graphed.graphs) if self.graphed else [],
                "eager_fallback_steps": self.graphed.eager_steps if self.graphed else 0,
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
                    self._rows.clear()
        with self._cv:  # stopped without drain: everything left is answered, not dropped
            left = list(self._waiting) + [r.handle for r in self._rows]
            self._waiting.clear()
            self._rows.clear()
        for handle in left:
            self._fail(handle, "shutdown", "the server is shutting down")

    def _expired(self, handle: RequestHandle) -> bool:
        limit = handle.request.timeout or self.config.request_timeout
        return time.monotonic() - handle.submitted > limit

    def _admit(self) -> None:
        while len(self._rows) < self.effective_max_batch:
            with self._cv:
                if not self._waiting:
                    return
                handle = self._waiting.popleft()
                self._admitting += 1
            try:
                if handle.cancelled.is_set():
                    self._fail(handle, "cancelled", "the client went away")
                    continue
                if self._expired(handle):
                    self._fail(handle, "timeout", "deadline passed while queued")
                    continue
                try:
                    self._prefill(handle)
                except Exception as exc:
                    if not _is_oom(exc):
                        raise
                    self._on_oom(requeue=[handle])
                    return
            finally:
                with self._cv:
                    self._admitting -= 1

    def _new_row(self, handle: RequestHandle) -> _Row:
        req = handle.request
        max_new = min(req.max_new_tokens or self.config.max_new_tokens, self.config.max_new_tokens)
        forced = self.pipe.synthetic or req.fixed_length
        limit = min(self.pipe.speech_rate.steps(req.text), max_new) if forced else max_new
        seed = req.sampling.seed
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        return _Row(handle, limit, forced, gen, AudioDecoder(self.pipe.model, self.config.lookahead_steps))

    def _prefill(self, handle: RequestHandle) -> None:
        row = self._new_row(handle)
        row.started = time.monotonic()
        ids, _, text_mask = self.pipe.prompt([handle.request.text], handle.request.prompt)
        embeds = self.pipe.model.embed.embed_prompt(ids, text_mask)
        t0 = time.perf_counter()
        hidden = self.forward.prefill(embeds, self.slots, len(self._rows))
        self.stats.prefill_seconds.observe(time.perf_counter() - t0)
        row.position = ids.shape[1]
        self._rows.append(row)
        codes = self._sample([row], self.pipe.model.embed.code_logits(hidden.unsqueeze(0)))
        self._accept(row, hidden, codes[0], codes[0].to(self.pipe.device))
        self._retire()

    def _step(self) -> None:
        rows = self._rows
        t0 = time.perf_counter()
        try:
            if self._step_count in self.config.inject_oom_at_steps:
                self._step_count += 1
                raise torch.OutOfMemoryError("injected out of memory (fault injection)")
            codes = torch.stack([r.last_codes for r in rows])
            positions = torch.tensor([r.position for r in rows], device=self.pipe.device)
            length = max(r.position for r in rows) + 1  # from Python: no device sync
            hidden, logits = (self.graphed or self.decode_step)(codes, positions, length)
        except Exception as exc:
            if not _is_oom(exc):
                raise
            self._on_oom()
            return
        codes = self._sample(rows, logits)
        on_device = codes.to(self.pipe.device)  # one copy for the batch, the next step's input
        self._step_count += 1
        self.stats.observe_step(len(rows), time.perf_counter() - t0)
        for r, row in enumerate(rows):
            row.position += 1
            self._accept(row, hidden[r], codes[r], on_device[r])
        self._retire()

    def _sample(self, rows: list[_Row], logits: torch.Tensor) -> torch.Tensor:
        """All rows' next codes in one pass, each with its own settings, history and generator."""
        g = self.pipe.cfg.gpt
        history = torch.full((len(rows), g.num_vq, PENALTY_WINDOW), -1, dtype=torch.long)
        for r, row in enumerate(rows):
            if row.history is not None and row.history.shape[1]:
                history[r, :, -row.history.shape[1] :] = row.history
        allow = [not row.forced or len(row.hidden) >= row.limit for row in rows]
        params = [row.handle.request.sampling for row in rows]
        return sample(logits.cpu(), history, params, allow, g.eos_token, [row.generator for row in rows])

    def _accept(self, row: _Row, hidden: torch.Tensor, codes: torch.Tensor, on_device: torch.Tensor) -> None:
        """Take the row's sampled codes (on the CPU, and `on_device` for the next step); finish it on
        EOS, limit, cancellation or deadline."""
        handle = row.handle
        if handle.cancelled.is_set():
            row.done = True
            self._fail(handle, "cancelled", "the client went away")
            return
        if self._expired(handle):
            row.done = True
            self._fail(handle, "timeout", f"deadline passed after {len(row.hidden)} steps")
            return
        g = self.pipe.cfg.gpt
        history = row.history if row.history is not None else torch.zeros(g.num_vq, 0, dtype=torch.long)
        if not row.forced and bool((codes == g.eos_token).any()):
            self._finish(row, "eos")
            return
        row.hidden.append(hidden.float())
        row.history = torch.cat([history, codes.unsqueeze(-1)], dim=-1)[:, -PENALTY_WINDOW:]
        row.last_codes = on_device
        self.stats.decode_steps += 1
        if len(row.hidden) >= row.limit:
            self._finish(row, "speech-rate" if row.forced else "eos")
            return
        if handle.request.stream and len(row.hidden) >= max(row.next_emit, self.config.first_chunk_steps):
            self._emit(row, final=False)
            row.next_emit = len(row.hidden) + self.config.chunk_steps

    def _emit(self, row: _Row, final: bool) -> None:
        samples = row.audio.emit(row.hidden, final)
        if samples.size:
            row.handle.put(AudioChunk(samples, self.pipe.cfg.sample_rate, row.chunks))
            row.chunks += 1

    def _finish(self, row: _Row, source: str) -> None:
        row.done = True
        self._emit(row, final=True)
        audio_seconds = row.audio.emitted / self.pipe.cfg.sample_rate
        self.stats.audio_seconds += audio_seconds
        self.stats.count("ok")
        row.handle.put(
            SynthResult(
                steps=len(row.hidden),
                audio_seconds=audio_seconds,
                queue_seconds=row.started - row.handle.submitted,
                inference_seconds=time.monotonic() - row.started,
                length_source="speech-rate" if row.forced else "eos",  # type: ignore[arg-type]
                chunks=row.chunks,
            )
        )

    def _fail(self, handle: RequestHandle, kind: str, message: str) -> None:
        self.stats.count(kind)
        handle.put(SynthError(kind, message))  # type: ignore[arg-type]

    def _retire(self) -> None:
        """Drop finished rows, moving the last row into each freed slot to keep rows 0..B-1 dense."""
        i = 0
        while i < len(self._rows):
            if self._rows[i].done:
                last = len(self._rows) - 1
                if i != last:
                    self.slots.move(last, i, self._rows[last].position)
                    self._rows[i] = self._rows[last]
                self._rows.pop()
            else:
                i += 1

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
                self._rows.clear()
                return
            keep = max(1, len(self._rows) // 2)
            for row in self._rows[keep:]:
                if row.chunks:
                    self._fail(row.handle, "oom", "out of memory after audio was streamed")
                else:
                    back.append(row.handle)
            del self._rows[keep:]
        elif not self._rows:
            for handle in back:
                self._fail(handle, "oom", "out of memory prefilling alone")
            return
        self.effective_max_batch = max(1, len(self._rows))
        with self._cv:
            self._waiting.extendleft(reversed(back))
