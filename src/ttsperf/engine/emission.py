"""After each step: answer the rows that finished, hand out the audio chunks that are due, and
say which rows leave (finished, past their deadline, or cancelled). NumPy over the row table finds
them; Python touches only them; every row that emits shares one Decoder+Vocos call
(runner.launch_audio).

`defer` (the engine's one step ahead, a GPU's default): the host does not wait for the audio call
it launched; its chunks, and the ends of the rows they finish, are handed out at the next turn's
events (or once the engine has nothing left to run), first, so every request hears its chunks in
order and its end after them. The call runs on the device meanwhile, beside the next step."""

from __future__ import annotations

import time
from collections import deque
from typing import NamedTuple

import numpy as np

from ttsperf.engine.audio import Decoding, Window
from ttsperf.engine.replies import Finished, Replies
from ttsperf.engine.runner import Runner, StepOutput
from ttsperf.engine.scheduler_rows import RowTable
from ttsperf.engine.stats import EngineStats
from ttsperf.engine.types import AudioChunk, PcmChunk, RequestHandle


class Emission:
    def __init__(
        self,
        runner: Runner,
        table: RowTable,
        replies: Replies,
        stats: EngineStats,
        chunk_steps: int,
        sample_rate: int,
        defer: bool = False,
    ):
        self.runner, self.table, self.replies, self.stats = runner, table, replies, stats
        self.chunk_steps, self.sample_rate = chunk_steps, sample_rate
        self.defer = defer
        self._launched: Launched | None = None  # the audio launched and not handed out yet

    def after(self, out: StepOutput, cancelled: deque[RequestHandle]) -> list[int]:
        """The events of step `out` -> the slots whose rows leave (answered already, or once the
        audio launched for them is out)."""
        self.hand_out()  # the last turn's audio, before anything this turn says
        t, steps = self.table, out.steps
        b = len(steps)
        finished = out.done | (steps >= t.limit[:b])
        gone = t.gone(time.monotonic(), cancelled)
        due = t.stream[:b] & (steps >= t.next_emit[:b])
        leaving, emitting, ending = [], [], []
        for slot in np.flatnonzero(finished | due | gone).tolist():
            if gone[slot]:
                leaving.append(slot)
                self._answer_gone(t.handle[slot], int(steps[slot]))
                continue
            n, final = int(steps[slot]), bool(finished[slot])
            emitted = int(t.emitted[slot])
            if due[slot]:
                emitted = self._chunks(slot, n, final and not out.done[slot], emitted, emitting)
            if not final:
                continue
            leaving.append(slot)
            window = self.runner.window(slot, n, emitted, final=True)
            if window is not None:
                emitting.append(window)
            if emitting and emitting[-1].slot == slot:
                ending.append(slot)  # answered once its chunks are out
            else:
                self.replies.finish(t, slot, n, bool(out.done[slot]))
        self._emit(emitting, out, ending)
        return leaving

    def _chunks(self, slot: int, steps: int, at_limit: bool, emitted: int, into: list[Window]) -> int:
        """A streaming row's chunks due by `steps`, each cut at its own boundary (next_emit), not
        where the row is now: a turn of several steps, or a status read a step late, cuts the same
        chunks as reading every step at once. A row that reached its length limit on a boundary
        ends there with its final chunk instead, as when read at once. -> samples emitted after them."""
        t, boundary = self.table, int(self.table.next_emit[slot])
        while boundary < steps or (boundary == steps and not at_limit):
            window = self.runner.window(slot, boundary, emitted, final=False)
            if window is not None:
                into.append(window)
                emitted = window.end
            boundary += self.chunk_steps
        t.next_emit[slot] = boundary
        return emitted

    def _answer_gone(self, handle: RequestHandle, steps: int) -> None:
        if handle.cancelled.is_set():
            self.replies.fail(handle, "cancelled", "the client went away")
        else:
            self.replies.fail(handle, "timeout", f"deadline passed after {steps} steps")

    def _emit(self, windows: list[Window], out: StepOutput, ending: list[int]) -> None:
        """Launch one call for every window; each row's chunks keep its order, and the rows in
        `ending` are answered once theirs are out (now, or at the next turn with `defer`)."""
        t = self.table
        decoding = self.runner.launch_audio(windows)
        chunks = []
        for window in windows:  # a window always has samples (end > start: Runner.window)
            slot = window.slot
            t.emitted[slot] = window.end
            chunks.append((t.handle[slot], int(t.chunks[slot])))
            t.chunks[slot] += 1
        ends = [self.replies.finished(t, slot, int(out.steps[slot]), bool(out.done[slot])) for slot in ending]
        self._launched = Launched(decoding, chunks, ends)
        if not self.defer:
            self.hand_out()

    def hand_out(self) -> None:
        """The audio launched last, to its rows (waiting for it, on CUDA), then the ends it was
        for. Kept until all is out: if the device fails here, `settle` answers who is left."""
        launched = self._launched
        if launched is None:
            return
        if launched.chunks:
            samples = launched.decoding.samples()
            self.stats.audio_call_seconds.observe(launched.decoding.seconds)
            pcm = self.runner.audio.pcm  # made on the device: the bytes the front sends
            for (handle, index), part in zip(launched.chunks, samples, strict=True):
                handle.put(
                    PcmChunk(part.astype("<i2", copy=False).tobytes(), index)
                    if pcm
                    else AudioChunk(part, self.sample_rate, index)
                )
            launched.chunks.clear()
        while launched.ends:
            self.replies.answer(launched.ends[0])
            launched.ends.pop(0)
        self._launched = None

    def waiting(self) -> int:
        """Requests whose rows left and whose end waits for their audio."""
        launched = self._launched
        return len(launched.ends) if launched else 0

    def settle(self) -> list[RequestHandle]:
        """After a failed turn: hand out the audio launched if it can still be read -> the
        requests waiting for it that could not be answered (their rows left the table already)."""
        try:
            self.hand_out()
        except Exception:  # noqa: BLE001 - the device failed too: their audio is lost
            launched, self._launched = self._launched, None
            return [end.handle for end in launched.ends] if launched else []
        return []


class Launched(NamedTuple):
    """An audio call launched and what waits for it: (request, chunk index) per window, in order,
    then the ends of the rows it finishes."""

    decoding: Decoding
    chunks: list[tuple[RequestHandle, int]]
    ends: list[Finished]
