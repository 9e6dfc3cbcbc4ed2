"""engine/gc_pauses.py: the collector's pauses counted per generation, and the start-up heap frozen
so that no later collection walks it (what serve's front and each engine core do once ready)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

from ttsperf.engine.gc_pauses import GcPauses


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycles(n: int) -> None:
    """2n objects that only reach one another: garbage that only a collection frees."""
    for _ in range(n):
        a, b = _Node(), _Node()
        a.other, b.other = b, a


def test_each_collection_is_timed_in_its_generation_with_the_objects_it_freed():
    pauses = GcPauses()
    try:
        _cycles(500)
        gc.collect(1)
        gc.collect(2)
        taken = pauses.snapshot()
    finally:
        pauses.close()
    seconds = taken["seconds"]
    assert seconds[1].n >= 1 and seconds[2].n >= 1
    assert seconds[2].total > 0 and sum(seconds[2].counts) == seconds[2].n
    # the cycles were freed by one of the collections (an automatic one may have come first)
    assert sum(taken["collected"].values()) >= 1000
    gc.collect(2)  # closed: no longer counted, and the snapshot taken before is its own copy
    assert pauses.snapshot()["seconds"][2].n == seconds[2].n
    assert pauses._callback not in gc.callbacks


FREEZE = """
import gc, json, weakref
from ttsperf.engine.gc_pauses import freeze_startup_heap

class Node:
    pass

garbage = Node(); garbage.me = garbage; dead = weakref.ref(garbage); del garbage
kept = [Node() for _ in range(1000)]
before = len(gc.get_objects(2))
frozen = freeze_startup_heap()
print(json.dumps({"frozen": frozen, "before": before, "after": len(gc.get_objects(2)),
                  "garbage_freed": dead() is None, "kept_frozen": frozen >= 1000}))
"""


def test_freezing_frees_the_start_ups_garbage_then_leaves_nothing_for_the_oldest_generation():
    # in a process of its own: a frozen heap would stay frozen for the rest of this test run
    done = subprocess.run([sys.executable, "-c", FREEZE], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert out["garbage_freed"]  # collected first, not frozen with the rest
    assert out["kept_frozen"] and out["frozen"] > out["after"]
    assert out["after"] < out["before"] / 10  # what a collection of the oldest generation walks now
