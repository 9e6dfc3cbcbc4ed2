"""What a request hears at its end — its result or its error — and the counters that follow."""

from __future__ import annotations

import time

from ttsperf.engine.lengths import length_source
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
        started = float(table.started[slot])
        handle: RequestHandle = table.handle[slot]
        audio_seconds = int(table.emitted[slot]) / self.sample_rate
        self.stats.audio_seconds += audio_seconds
        self.stats.count("ok")
        handle.put(
            SynthResult(
                steps=steps,
                audio_seconds=audio_seconds,
                queue_seconds=started - handle.submitted,
                inference_seconds=time.monotonic() - started,
                length_source=length_source(eos, bool(table.forced[slot]), bool(table.capped[slot])),
                chunks=int(table.chunks[slot]),
            )
        )
