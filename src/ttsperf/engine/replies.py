"""What a request hears at its end — its result or its error — and the counters that follow."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ttsperf.engine.lengths import LengthSource, length_source
from ttsperf.engine.scheduler_rows import RowTable
from ttsperf.engine.stats import EngineStats
from ttsperf.engine.types import ErrorKind, RequestHandle, SynthError, SynthResult


class Replies:
    def __init__(self, stats: EngineStats, sample_rate: int):
        self.stats, self.sample_rate = stats, sample_rate

    def fail(self, handle: RequestHandle, kind: ErrorKind, message: str) -> None:
        self.stats.count(kind)
        handle.put(SynthError(kind, message))

    def finish(self, table: RowTable, slot: int, steps: int, eos: bool) -> None:
        """Row `slot` finished after `steps` steps (`eos`: it sampled EOS), all its audio out."""
        self.answer(self.finished(table, slot, steps, eos))

    def finished(self, table: RowTable, slot: int, steps: int, eos: bool) -> Finished:
        """Row `slot`'s end as its table row says now (it may leave before its last audio is out)."""
        return Finished(
            handle=table.handle[slot],
            steps=steps,
            audio_seconds=int(table.emitted[slot]) / self.sample_rate,
            started=float(table.started[slot]),
            length_source=length_source(eos, bool(table.forced[slot]), bool(table.capped[slot])),
            chunks=int(table.chunks[slot]),
        )

    def answer(self, end: Finished) -> None:
        """The request's result, once its audio is out."""
        self.stats.audio_seconds += end.audio_seconds
        self.stats.count("ok")
        end.handle.put(
            SynthResult(
                steps=end.steps,
                audio_seconds=end.audio_seconds,
                queue_seconds=end.started - end.handle.submitted,
                inference_seconds=time.monotonic() - end.started,
                length_source=end.length_source,
                chunks=end.chunks,
            )
        )


@dataclass(frozen=True)
class Finished:
    """A row that finished, taken from its table row: answered once its audio is out."""

    handle: RequestHandle
    steps: int
    audio_seconds: float
    started: float
    length_source: LengthSource
    chunks: int
