"""After each step: answer the rows that finished, hand out the audio chunks that are due, and
say which rows leave (finished, past their deadline, or cancelled). NumPy over the row table finds
them; Python touches only them; every row that emits shares one Decoder+Vocos call
(runner.emit)."""

from __future__ import annotations

import time
from collections import deque

import numpy as np

from ttsperf.engine.audio import Window
from ttsperf.engine.replies import Replies
from ttsperf.engine.runner import Runner, StepOutput
from ttsperf.engine.scheduler_rows import RowTable
from ttsperf.engine.stats import EngineStats
from ttsperf.engine.types import AudioChunk, RequestHandle


class Emission:
    def __init__(
        self,
        runner: Runner,
        table: RowTable,
        replies: Replies,
        stats: EngineStats,
        chunk_steps: int,
        sample_rate: int,
    ):
        self.runner, self.table, self.replies, self.stats = runner, table, replies, stats
        self.chunk_steps, self.sample_rate = chunk_steps, sample_rate

    def after(self, out: StepOutput, cancelled: deque[RequestHandle]) -> list[int]:
        """The events of step `out` -> the slots whose rows leave (answered already)."""
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
        """Decode every window in one call; hand each row its chunks, in order; answer the rows
        in `ending` once theirs are out."""
        t = self.table
        t0 = time.perf_counter()
        decoded = self.runner.emit(windows)
        if windows:
            self.stats.audio_call_seconds.observe(time.perf_counter() - t0)
        for window, samples in zip(windows, decoded, strict=True):
            slot = window.slot
            t.emitted[slot] = window.end
            if samples.size:
                t.handle[slot].put(AudioChunk(samples, self.sample_rate, int(t.chunks[slot])))
                t.chunks[slot] += 1
        for slot in ending:
            self.replies.finish(t, slot, int(out.steps[slot]), bool(out.done[slot]))
