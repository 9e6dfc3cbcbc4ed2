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
        due = t.stream[:b] & ~finished & (steps >= t.next_emit[:b])
        t.next_emit[:b][due] = steps[due] + self.chunk_steps
        leaving, emitting = [], []
        for slot in np.flatnonzero(finished | due | gone).tolist():
            if gone[slot]:
                leaving.append(slot)
                self._answer_gone(t.handle[slot], int(steps[slot]))
                continue
            if finished[slot]:
                leaving.append(slot)
            window = self.runner.window(
                slot, int(steps[slot]), int(t.emitted[slot]), final=bool(finished[slot])
            )
            if window is not None:
                emitting.append(window)
            elif finished[slot]:
                self.replies.finish(t, slot, int(steps[slot]), bool(out.done[slot]))
        self._emit(emitting, out, finished)
        return leaving

    def _answer_gone(self, handle: RequestHandle, steps: int) -> None:
        if handle.cancelled.is_set():
            self.replies.fail(handle, "cancelled", "the client went away")
        else:
            self.replies.fail(handle, "timeout", f"deadline passed after {steps} steps")

    def _emit(self, windows: list[Window], out: StepOutput, finished: np.ndarray) -> None:
        """Decode every window in one call; hand each row its chunk; answer the rows it ends."""
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
            if finished[slot]:
                self.replies.finish(t, slot, int(out.steps[slot]), bool(out.done[slot]))
