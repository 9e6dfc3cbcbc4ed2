"""The engine thread's Python per turn, by part of the turn, without the model's compute.

This tree beside another (issue 33: where the host's work per turn goes, measured apart from the
compute that hides it on a CPU).

    git worktree add /tmp/base-48b02e7 48b02e7
    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/turn_sections.py \\
        --base /tmp/base-48b02e7 [--clients 24] [--requests 96] [--rounds 3] [--steps-per-turn 1,4] \\
        [--base-steps-per-turn 4] [--config tiny] [--max-batch 64]

Each tree (its own code through PYTHONPATH, in a process of its own, one torch thread) runs the
engine in that process on `--config` (synthetic weights, `--max-batch`): `--clients` threads each
submit streamed zh-8s requests back to back until `--requests` are answered. A sink does the core
process's per-chunk work (int16 PCM: made on the host, or by the audio call where the tree's engine
can, as the core process has it do) and each turn pickles the turn's chunks, as the core's
message does. Wrapped around the engine's own calls (the parts of a turn: the step's launch and
its status read, the events that answer and hand out audio, rows leaving, admission, the sink
and the turn's message), the engine thread's CPU seconds in each, less the CPU spent inside the
model's forward, sampling and vocoder there (`_compute_timer/sitecustomize.py`, as
host_work.py). Parts nest (`launch` holds `send`; `after` holds `emit` and `sink`); `turn` is the
whole turn. Figures are per decode step (a turn runs `--steps-per-turn` of them: this tree once
per value given). Each wrapper adds about a microsecond: compare trees, not absolute values.
Medians over `--rounds`, the trees alternating.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _bench_common import tree_src  # noqa: E402

# (module, class, method) -> the part's name; what a tree lacks is left out
PARTS = [
    ("ttsperf.engine.engine", "Engine", "_turn", "turn"),
    ("ttsperf.engine.runner", "Runner", "launch", "launch"),
    ("ttsperf.engine.device_batch", "BatchState", "send", "launch: send status"),
    ("ttsperf.engine.runner", "Runner", "collect", "collect"),
    ("ttsperf.engine.device_batch", "BatchState", "receive", "collect: receive status"),
    ("ttsperf.engine.emission", "Emission", "after", "events (after)"),
    ("ttsperf.engine.runner", "Runner", "emit", "events: audio call"),
    ("ttsperf.engine.runner", "Runner", "launch_audio", "events: audio call"),  # since emit's split
    ("ttsperf.engine.engine", "Engine", "_remove", "rows leave"),
    ("ttsperf.engine.engine", "Engine", "_admit", "admission"),
]


def inner(clients: int, requests: int, steps: int, config_name: str, max_batch: int) -> dict[str, float]:
    """In this process (the tree on PYTHONPATH, the compute timer imported first)."""
    import importlib

    import sitecustomize as compute  # benchmarks/_compute_timer: wraps the model's calls on import
    import torch

    torch.set_num_threads(1)
    from ttsperf.audio import to_pcm16
    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.engine.types import AudioChunk, SynthRequest
    from ttsperf.model.config import get_config
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.sampling import SamplingParams
    from ttsperf.textsets import TEXT_SETS

    spent: collections.Counter[str] = collections.Counter()

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            if threading.current_thread().name != "ttsperf-engine":
                return fn(*args, **kwargs)
            t0, c0 = time.thread_time(), compute._total["seconds"]
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.thread_time() - t0 - (compute._total["seconds"] - c0)

        return wrapper

    for module, cls, method, name in PARTS:
        owner = getattr(importlib.import_module(module), cls)
        if hasattr(owner, method):
            setattr(owner, method, timed(name, getattr(owner, method)))
    more = {"steps_per_turn": steps} if steps > 1 else {}  # a base without the setting: 1
    if "pcm" in EngineConfig.__dataclass_fields__:  # the audio call makes the PCM, as in serve's core
        more["pcm"] = True
    config = EngineConfig(max_batch=max_batch, max_queue=256, **more)
    engine = Engine(Pipeline.synthetic_model(get_config(config_name), seed=0), config)
    outbox: list[bytes] = []

    def flush() -> None:
        pickle.dumps(outbox)
        outbox.clear()

    engine.after_turn = timed("the turn's message", flush)
    answered = threading.Semaphore(0)
    texts = TEXT_SETS["zh-8s"]

    def sink(handle, event) -> None:
        if isinstance(event, AudioChunk):
            outbox.append(to_pcm16(event.samples))
        elif hasattr(event, "pcm"):  # PcmChunk: made by the audio call
            outbox.append(event.pcm)
        else:  # its last event, SynthResult or SynthError
            answered.release()

    timed_sink = timed("events: sink (PCM)", sink)
    left = iter(range(requests))

    def client() -> None:
        for i in left:  # shared: each request once, whichever client is free
            request = SynthRequest(texts[i % len(texts)], SamplingParams(seed=i), stream=True)
            engine.submit(request, sink=timed_sink)
            answered.acquire()

    engine.start()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    decode_steps = engine.stats.step_seconds.n  # every step of every turn
    engine.stop(drain=False, timeout=10)
    return {"steps": decode_steps, **{name: 1e6 * s / decode_steps for name, s in spent.items()}}


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/turn_sections.py "
        "--base /tmp/base-48b02e7",
    )
    p.add_argument(
        "--base", type=Path, help="a worktree of a tree to compare with (one with the core's sink)"
    )
    p.add_argument(
        "--config", default="tiny", choices=("tiny", "skeleton", "chattts"), help="the model (synthetic)"
    )
    p.add_argument(
        "--max-batch", type=int, default=64, help="its KV slots are allocated whole: chattts at 64, ~20 GB"
    )
    p.add_argument("--clients", type=int, default=24)
    p.add_argument("--requests", type=int, default=96)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--steps-per-turn", default="1", help="this tree's engine setting, or several (1,4: a column each)"
    )
    p.add_argument(
        "--base-steps-per-turn", default="1", help="the base's setting (1: also a base without it)"
    )
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inner:
        steps = int(args.steps_per_turn)
        print(json.dumps(inner(args.clients, args.requests, steps, args.config, args.max_batch)))
        return
    trees = {
        ("this tree" if k == "1" else f"this, {k} a turn"): (ROOT / "src", k)
        for k in args.steps_per_turn.split(",")
    }
    if args.base:
        k = args.base_steps_per_turn
        trees[f"{args.base.name} (base)" + ("" if k == "1" else f", {k} a turn")] = (tree_src(args.base), k)
    found: dict[str, list[dict]] = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, (src, k) in trees.items():
            env = {**os.environ, "PYTHONPATH": f"{HERE / '_compute_timer'}{os.pathsep}{src}"}
            env.update(OMP_NUM_THREADS="1", TTSPERF_COMPUTE_DIR=os.environ.get("TMPDIR", "/tmp"))
            cmd = [sys.executable, __file__, "--inner", "--clients", str(args.clients)]
            cmd += ["--config", args.config, "--max-batch", str(args.max_batch)]
            cmd += ["--requests", str(args.requests), "--steps-per-turn", k]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if res.returncode:
                raise SystemExit(f"{name}: {res.stderr.strip()[-2000:]}")
            found[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(f"round {r}, {name}: {found[name][-1]['steps']} steps", file=sys.stderr, flush=True)
    names = list(dict.fromkeys(part[3] for part in PARTS)) + ["events: sink (PCM)", "the turn's message"]
    print(f"{args.config}, max batch {args.max_batch}, {args.clients} clients, {args.requests} streamed\n"
          f"zh-8s requests, one torch thread; the engine thread's CPU us per step outside compute,\n"
          f"medians of {args.rounds}")  # fmt: skip
    print("| part | " + " | ".join(trees) + " |")
    print("|---|" + "---|" * len(trees))
    for part in names:
        cells = []
        for name in trees:
            values = [x[part] for x in found[name] if part in x]
            cells.append(f"{statistics.median(values):.1f}" if values else "-")
        print(f"| {part} | " + " | ".join(cells) + " |")
    print(
        "command: flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/turn_sections.py "
        + " ".join(sys.argv[1:])
    )


if __name__ == "__main__":
    main()
