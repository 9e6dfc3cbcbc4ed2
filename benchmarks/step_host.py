"""The host's work per decode step outside the model's compute, in a bare launch loop, and what a
step's compute does to the host op after it (issue 33: what `--steps-per-turn` can and cannot
take off a turn on a CPU).

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/step_host.py [--batch 24] [--turns 60]

In this process, one torch thread, `tiny` (synthetic weights, max batch 64): `--batch` rows
prefilled, then per turn `Runner.launch(K)` and `Runner.collect()` for K = 1, 2, 4 and 8, the
thread's CPU less what it spent inside the step's forward and sampling (`Step.__call__`,
`Rows.accept`, timed around each call); and the thread CPU of a few small host ops (NumPy on the
host mirror, one torch op) right after a step's compute, against the same ops with no compute
before them. Medians over `--turns`. No server, no other thread: the loop's own cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import machine  # noqa: E402

TEXT = "你好，这是一段用于压测的文本。"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/step_host.py",
    )
    p.add_argument("--batch", type=int, default=24)
    p.add_argument("--turns", type=int, default=60)
    args = p.parse_args()

    import torch

    torch.set_num_threads(1)
    from ttsperf.model import step as step_module

    compute = [0]

    def timed(fn):
        def wrapper(*a, **kw):
            t0 = time.thread_time_ns()
            try:
                return fn(*a, **kw)
            finally:
                compute[0] += time.thread_time_ns() - t0

        return wrapper

    # before the engine is built: its decode step binds Step.__call__ then
    step_module.Step.__call__ = timed(step_module.Step.__call__)
    step_module.Rows.accept = timed(step_module.Rows.accept)
    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.engine.runner import Admission
    from ttsperf.model.config import TINY
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.sampling import SamplingParams

    engine = Engine(Pipeline.synthetic_model(TINY, seed=0), EngineConfig(max_batch=64))
    r, b = engine.runner, args.batch
    h = r.state.host
    turns: dict[int, list[float]] = {k: [] for k in (1, 2, 4, 8)}
    ops: dict[str, list[float]] = {}
    small = torch.zeros(b, dtype=torch.long)
    with engine._contexts():
        r.prefill([Admission(TEXT, "[speed_5]", SamplingParams(seed=i), i, 2000, True) for i in range(b)])
        for _ in range(args.turns):
            for k in turns:
                compute[0] = 0
                t0 = time.thread_time_ns()
                r.launch(k)
                r.collect()
                turns[k].append((time.thread_time_ns() - t0 - compute[0]) / 1e3)
            for after in (True, False):
                if after:  # one decode step's forward and sampling, as the engine runs them
                    hidden, logits = r.decode_step(r.state.codes[:b], r.state.positions[:b], 64)
                    r.state.accept(slice(0, b), hidden, logits, 30)
                t = [time.thread_time_ns()]
                for column in (h.positions, h.steps):
                    view = column[:b]
                    view += 0
                    t.append(time.thread_time_ns())
                small.add_(0)
                t.append(time.thread_time_ns())
                tag = "after a step's compute" if after else "no compute before"
                names = ("NumPy op 1", "NumPy op 2", "torch op")
                for name, t0, t1 in zip(names, t, t[1:], strict=False):
                    ops.setdefault(f"{name}, {tag}", []).append((t1 - t0) / 1e3)
    print(f"machine: {machine()}; tiny, batch {b}, one torch thread, medians of {args.turns}")
    print("| K steps a turn | us a turn outside compute | us a step |")
    print("|---|---|---|")
    for k, values in turns.items():
        m = statistics.median(values)
        print(f"| {k} | {m:.1f} | {m / k:.1f} |")
    print("| host op | us of thread CPU |")
    print("|---|---|")
    for name, values in ops.items():
        print(f"| {name} | {statistics.median(values):.1f} |")
    given = " ".join(sys.argv[1:])
    print(
        f"command: flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/step_host.py {given}".rstrip()
    )


if __name__ == "__main__":
    main()
