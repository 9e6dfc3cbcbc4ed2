"""The engine's step in CPU time and Python calls, which a loaded machine barely changes (wall
time does): this tree vs another checkout, side by side, driven step by step in one thread.

    .venv/bin/python benchmarks/engine_step_cpu.py --base /tmp/engine-base-wt \\
        [--batch 16] [--runs 5]

Each tree runs in its own process (its src/ on PYTHONPATH), one torch thread, `batch` streaming
requests of the tiny synthetic model, 60 steps after all have joined. Per step: thread CPU time
(time.thread_time: the host work plus the tiny model's compute) and Python function calls
(sys.setprofile 'call' events: the scheduler's and runner's own Python, deterministic).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import DocHelp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TEXT = "你好，这是一段用于压测的文本，长度八秒左右。" * 6
STEPS = 60


def child(batch: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.engine.types import SynthRequest
    from ttsperf.model.config import TINY
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.sampling import SamplingParams

    engine = Engine(Pipeline.synthetic_model(TINY, seed=0), EngineConfig(max_batch=batch, max_queue=batch))
    calls = 0

    def count(frame, event, arg) -> None:
        nonlocal calls
        calls += event == "call"

    with engine._contexts():
        for i in range(batch):
            engine.submit(SynthRequest(TEXT, SamplingParams(seed=i), stream=True))
        while engine.running() < batch:
            engine._admit()
            engine._step()
        cpu = []
        for _ in range(10):  # warm-up
            engine._step()
        sys.setprofile(count)
        engine._step()
        sys.setprofile(None)
        for _ in range(STEPS):
            t0 = time.thread_time()
            engine._step()
            cpu.append(time.thread_time() - t0)
    return {"cpu_s": statistics.median(cpu), "calls": calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    ap.add_argument("--base", type=Path, help="a checkout to compare with (its repo root)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    trees = {"new": ROOT / "src", "base": args.base / "src"}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, src in trees.items():  # alternating
            env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
            cmd = [sys.executable, __file__, "--child", str(args.batch)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"\n| tree | B | CPU ms/step (median of {args.runs} medians) | Python calls/step |")
    print("|---|---|---|---|")
    for name, rs in runs.items():
        cpu = statistics.median(r["cpu_s"] for r in rs)
        calls = statistics.median(r["calls"] for r in rs)
        print(f"| {name} | {args.batch} | {1e3 * cpu:.2f} | {calls:.0f} |")


if __name__ == "__main__":
    main()
