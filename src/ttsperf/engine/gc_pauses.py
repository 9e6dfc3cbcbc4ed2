"""Python's cyclic garbage collector in a serving process: the startup heap frozen, the pauses counted.

A collection stops every thread of its process for as long as it walks the objects of the
generations it collects. Once a server is up, nearly all of its objects are the startup's:
torch, transformers, the model's modules, compiled graphs, FastAPI's routes. They live as long as
the process, yet each collection of the oldest generation walks them all again, while every stream
in flight waits (ROCm/ATOM#1991 measured 265-979 ms a pass over 0.6-1M startup objects, which
freed nothing; vLLM freezes its engine core's and its API server's heaps after start,
vllm-project/vllm#14902 and #24008). Python triggers such a pass when the objects that outlived two
younger collections reach a quarter of the old generation: a request's handles and queues live for
its seconds of audio, so under load they do, again and again.

`freeze_startup_heap` moves every object alive at the end of the warm-up to the permanent
generation (gc.freeze), which no collection walks; what is made later is collected as before.
`GcPauses` counts each collection's pause per generation (gc.callbacks) for `/metrics`.
"""

from __future__ import annotations

import gc
import time

from ttsperf.engine.stats import STEP_BUCKETS, Histogram

GENERATIONS = (0, 1, 2)


def freeze_startup_heap() -> int:
    """Collect what the start-up left (once), then freeze the rest -> the objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class GcPauses:
    """Each collection's pause in this process, per generation, from now until `close`. The
    callback runs inside the collection, on whichever thread triggered it, so it takes no lock (a
    thread holding that lock could be the one collecting): a snapshot may miss one pause in progress."""

    def __init__(self) -> None:
        self.seconds = {g: Histogram(STEP_BUCKETS) for g in GENERATIONS}
        self.collected = dict.fromkeys(GENERATIONS, 0)
        self._started: float | None = None
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            generation = info["generation"]
            self.seconds[generation].observe(time.perf_counter() - self._started)
            self.collected[generation] += info["collected"]
            self._started = None

    def close(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def snapshot(self) -> dict:
        """Picklable: {"seconds": {generation: Histogram}, "collected": {...}, "frozen": objects}."""
        seconds = {g: h.copy() for g, h in self.seconds.items()}
        return {"seconds": seconds, "collected": dict(self.collected), "frozen": gc.get_freeze_count()}


_recorder: list[GcPauses] = []


def this_process() -> GcPauses:
    """The process's one recorder, counting from its first call (a serving process: once it is
    warm and frozen, so start-up's collections are not counted)."""
    if not _recorder:
        _recorder.append(GcPauses())
    return _recorder[0]
