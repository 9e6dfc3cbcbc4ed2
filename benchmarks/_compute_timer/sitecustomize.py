"""Times the model's compute in whatever process imports it, for benchmarks/host_work.py.

On PYTHONPATH (this folder first) with TTSPERF_COMPUTE_DIR set, Python imports this at start-up in
every process of a server, whichever tree's code it runs. It wraps, as their modules load, the
calls that are the model's forward, sampling and vocoder in every tree since 3dd0b04: the decode
forward and code heads (`Step.__call__`), the prefill's forward (`Embed.embed_prompt`,
`SlotForward.prefill_many`, `Embed.code_logits`), sampling and the state update (`Rows.accept`) and
the audio call's Decoder+Vocos (`BatchedAudio.synthesize`; `synthesize_pcm` where the call also
makes the 16-bit PCM, which a card's device does). The calling thread's CPU seconds inside
the outermost of them (one torch thread: an op computes on the thread that calls it) add up, and a
daemon thread writes the total to `TTSPERF_COMPUTE_DIR/compute-<pid>.json` five times a second.
A process that never imports the model writes nothing (this tree's front).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time

TARGETS = {
    "ttsperf.model.step": [("Step", "__call__"), ("Rows", "accept")],
    "ttsperf.model.forward": [("SlotForward", "prefill_many")],
    "ttsperf.model.gpt": [("Embed", "embed_prompt"), ("Embed", "code_logits")],
    "ttsperf.engine.audio": [("BatchedAudio", "synthesize"), ("BatchedAudio", "synthesize_pcm")],
}
OUT = os.environ.get("TTSPERF_COMPUTE_DIR")
_total = {"seconds": 0.0, "calls": 0}
_depth = threading.local()
_writer: list[threading.Thread] = []


def _timed(fn):
    def wrapper(*args, **kwargs):
        if getattr(_depth, "n", 0):  # inside another timed call: counted there
            return fn(*args, **kwargs)
        _depth.n = 1
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _total["seconds"] += time.thread_time() - t0
            _total["calls"] += 1
            _depth.n = 0

    return wrapper


def _write_forever() -> None:
    path = os.path.join(OUT, f"compute-{os.getpid()}.json")
    while True:
        with open(path + ".tmp", "w") as fh:
            json.dump(_total, fh)
        os.replace(path + ".tmp", path)
        time.sleep(0.2)


def _patch(module, names) -> None:
    for cls, attr in names:
        owner = getattr(module, cls, None)
        if owner is not None and hasattr(owner, attr):
            setattr(owner, attr, _timed(getattr(owner, attr)))
    if not _writer:
        _writer.append(threading.Thread(target=_write_forever, name="compute-timer", daemon=True))
        _writer[0].start()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in TARGETS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module, _run=run, _name=name):
            _run(module)
            _patch(module, TARGETS[_name])

        spec.loader.exec_module = exec_module
        return spec


if OUT:
    sys.meta_path.insert(0, _Finder())
