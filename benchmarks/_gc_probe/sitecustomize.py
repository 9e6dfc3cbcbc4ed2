"""Counts the garbage collector's pauses in whatever process imports it, for benchmarks/gc_pauses.py.

On PYTHONPATH (this folder first) with TTSPERF_GC_DIR set, Python imports this at start-up in every
process of a server, whichever tree's code it runs (a tree without engine/gc_pauses.py has no
counter of its own). A gc.callbacks hook times each collection; a daemon thread writes, five times
a second, TTSPERF_GC_DIR/gc-<pid>.json: per generation the passes, their seconds and the longest,
the objects they freed, and the objects frozen (gc.freeze) in the process. Once the file
TTSPERF_GC_DIR/collect exists, that thread runs one full collection (gc.collect(), as Python's own
oldest-generation pass would, every thread of the process stopped) and writes its seconds apart,
as `forced`, not among the passes.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time

OUT = os.environ.get("TTSPERF_GC_DIR")
_passes = {g: {"n": 0, "seconds": 0.0, "max": 0.0, "collected": 0} for g in (0, 1, 2)}
_started: list[float] = []
_forced: dict[str, float] = {}


def _callback(phase: str, info: dict) -> None:
    if "running" in _forced:  # the forced collection: timed apart
        return
    if phase == "start":
        _started[:] = [time.perf_counter()]
    elif _started:
        took, p = time.perf_counter() - _started.pop(), _passes[info["generation"]]
        p["n"] += 1
        p["seconds"] += took
        p["max"] = max(p["max"], took)
        p["collected"] += info["collected"]


def _write_forever() -> None:
    path = os.path.join(OUT, f"gc-{os.getpid()}.json")
    while True:
        if "seconds" not in _forced and os.path.exists(os.path.join(OUT, "collect")):
            _forced["running"] = time.perf_counter()
            gc.collect()
            _forced["seconds"] = time.perf_counter() - _forced.pop("running")
        state = {"passes": _passes, "frozen": gc.get_freeze_count(), "forced": _forced.get("seconds")}
        with open(path + ".tmp", "w") as fh:
            json.dump(state, fh)
        os.replace(path + ".tmp", path)
        time.sleep(0.2)


if OUT:
    gc.callbacks.append(_callback)
    threading.Thread(target=_write_forever, name="gc-probe", daemon=True).start()
