"""What goes into the engine and what comes out: the contract the server (and profile) build on."""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ttsperf.audio import from_pcm16
from ttsperf.model.length import LengthSource
from ttsperf.model.sampling_params import SamplingParams

# engine_died: the front's own verdict when the engine's process is gone (engine/client.py)
ErrorKind = Literal["timeout", "cancelled", "oom", "shutdown", "too_long", "internal", "engine_died"]
_ids = itertools.count(1)


class QueueFull(Exception):
    """The bounded queue is full: the server answers 503 with Retry-After."""

    def __init__(self, depth: int, retry_after: float):
        super().__init__(f"queue full ({depth} waiting)")
        self.depth, self.retry_after = depth, retry_after

    def __reduce__(self):  # it crosses the process boundary (engine/client.py)
        return QueueFull, (self.depth, self.retry_after)


class NotAccepting(Exception):
    """The engine is draining or stopped: the server answers 503."""


class TextTooLong(Exception):
    """The prompt exceeds the engine's prompt limit: the server answers 413 with the limit."""

    def __init__(self, tokens: int, limit: int):
        super().__init__(f"text is {tokens} tokens after prompt decoration; the limit is {limit}")
        self.tokens, self.limit = tokens, limit

    def __reduce__(self):
        return TextTooLong, (self.tokens, self.limit)


@dataclass(frozen=True)
class SynthRequest:
    text: str
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_new_tokens: int | None = None  # None: the engine's limit
    fixed_length: bool = False  # length from the speech-rate model even with real weights
    stream: bool = False
    prompt: str = "[speed_5]"
    timeout: float | None = None  # seconds from submission; None: the engine's default


@dataclass(frozen=True)
class AudioChunk:
    """float32 mono samples at `sample_rate`; `index` counts chunks from 0."""

    samples: np.ndarray
    sample_rate: int
    index: int


@dataclass(frozen=True)
class PcmChunk:
    """An AudioChunk as it crosses from the engine's process to the HTTP front: 16-bit
    little-endian PCM bytes, made by the engine (the front never converts samples)."""

    pcm: bytes
    index: int


@dataclass(frozen=True)
class Accepted:
    """The engine queued the request: a front's first event for it; `prompt_tokens` is the
    decorated prompt's length, counted once by the engine (a load tester reproduces it)."""

    prompt_tokens: int


@dataclass(frozen=True)
class Rejected:
    """The engine refused the request at submission (QueueFull, NotAccepting, TextTooLong or the
    tokenizer's UserError): a front's first and only event for it."""

    error: Exception


@dataclass(frozen=True)
class SynthResult:
    steps: int
    audio_seconds: float
    queue_seconds: float  # submission -> prefill start
    inference_seconds: float  # prefill start -> last audio
    length_source: LengthSource
    chunks: int


@dataclass(frozen=True)
class SynthError:
    kind: ErrorKind
    message: str


Event = AudioChunk | PcmChunk | SynthResult | SynthError  # PcmChunk: an engine with config.pcm
FrontEvent = Accepted | Rejected | PcmChunk | SynthResult | SynthError  # what a front hears


class RequestHandle:
    """The consumer's side of one request. Events arrive in order: AudioChunk* (PcmChunk*
    from an engine with config.pcm), then exactly one SynthResult or SynthError. Works from
    asyncio (give `loop`) or from plain threads."""

    def __init__(
        self,
        request: SynthRequest,
        loop: asyncio.AbstractEventLoop | None,
        sink: Callable[[RequestHandle, Event], None] | None = None,
    ):
        self.id = next(_ids)
        self._sink = sink  # the engine's core process: events go to its outbox, not to a queue
        self.request = request
        self.submitted = time.monotonic()
        self._loop = loop
        self._aq: asyncio.Queue[Event] | None = asyncio.Queue() if loop is not None else None
        self._q: queue.Queue[Event] = queue.Queue()
        self.cancelled = threading.Event()
        # set by the engine at submission
        self.prompt_tokens = 0
        self.prompt_ids: list[int] | None = None  # the decorated text's token ids (the prefill's)
        self.seed = 0
        self.deadline = float("inf")  # time.monotonic() past which it is answered 'timeout'
        self.on_cancel: Callable[[RequestHandle], None] | None = None
        self.ended = False  # its result or error was put: nothing more is

    # -- producer (engine thread)
    def put(self, event: Event) -> None:
        """Hand the consumer an event; after its end, nothing (a failed turn answers every row it
        held, some of which may have just been answered)."""
        if self.ended:
            return
        self.ended = isinstance(event, (SynthResult, SynthError))
        if self._sink is not None:
            self._sink(self, event)
        elif self._aq is not None and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._aq.put_nowait, event)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                pass
        else:
            self._q.put(event)

    # -- consumer
    def cancel(self) -> None:
        """Free the slot at the next step boundary (a client that went away)."""
        if not self.cancelled.is_set():
            self.cancelled.set()
            if self.on_cancel is not None:
                self.on_cancel(self)  # the engine looks for it at the next step, not every row every step

    async def next_event(self) -> Event:
        assert self._aq is not None, "submit(..., loop=...) for asyncio use"
        return await self._aq.get()

    def next_event_blocking(self, timeout: float | None = None) -> Event:
        return self._q.get(timeout=timeout)

    def collect(self, timeout: float | None = None) -> tuple[np.ndarray, SynthResult | SynthError]:
        """Block until done: (all samples concatenated, final event)."""
        parts: list[np.ndarray] = []
        while True:
            event = self.next_event_blocking(timeout)
            if isinstance(event, AudioChunk):
                parts.append(event.samples)
            elif isinstance(event, PcmChunk):  # config.pcm: the samples as the front would decode them
                parts.append(from_pcm16(event.pcm))
            else:
                samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
                return samples, event
