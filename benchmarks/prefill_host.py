"""The engine's prefill call on the host: ms per call, ops dispatched, device syncs (issue 33 item 2).

    python benchmarks/prefill_host.py                                  # a GPU: chattts, fp16
    python benchmarks/prefill_host.py --base /tmp/base --device cpu --config tiny --dtype fp32
    python benchmarks/prefill_host.py --device cpu --config tiny --dtype fp32 --modes eager,compile

On an H200 a prefill call took 21-32 ms (1.2-3.3 rows) and 31-46% of the engine's wall; it made
3n+7 blocking host-to-device copies, each a stream synchronize. This times `Runner.prefill` for
n rows joining an empty batch (median of --repeats after 3 warm-ups, the rows dropped after
each), counts the aten ops it dispatches (each one kernel launch or more on a GPU), and on CUDA
counts the synchronizes it makes (torch.cuda.set_sync_debug_mode("warn")). With --base, the same
runs in another tree (a `git worktree` of an earlier commit), in its own process, alternating
with this one, for a side-by-side ratio. `--modes eager,compile` runs each tree once per mode
(`serve --compile`: the prefill compiled at start, where the tree compiles it; no ops counted, as
the count's dispatch mode runs compiled code eagerly) and says how many graphs the timed calls
compiled after start ("recomp": 0 when ready meant warm).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

TEXT = "四川美食确实以辣闻名，但也有不辣的选择。比如甜水面、赖汤圆、蛋烘糕、叶儿粑等，这些小吃口味温和。"


def measure(device: str, config: str, dtype: str, rows: list[int], repeats: int, mode: str) -> list[dict]:
    """In this process: the tree on sys.path (PYTHONPATH) is the one measured."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from ttsperf.engine.config import Switches
    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.engine.runner import Admission
    from ttsperf.model.config import get_config
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.sampling import SamplingParams

    class Ops(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.count += 1
            return func(*args, **(kwargs or {}))

    pipe = Pipeline.synthetic_model(get_config(config), seed=0, device=device, dtype=dtype)
    engine = Engine(
        pipe, EngineConfig(max_batch=max(rows), max_queue=max(rows)), Switches(compile=mode == "compile")
    )
    runner, cuda = engine.runner, device.startswith("cuda")
    compiled = lambda: getattr(runner.decode_step, "prefill_compiles", 0)  # noqa: E731 - older trees: none

    def admissions(n: int) -> list:
        return [Admission(TEXT, "[speed_5]", SamplingParams(seed=i), i, 200, True) for i in range(n)]

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    out = []
    with engine._contexts():
        if mode == "compile":
            runner.decode_step.compile_now(engine.switch_report["compile"])
        at_start = compiled()
        for n in rows:
            times = []
            for i in range(3 + repeats):
                sync()
                t0 = time.perf_counter()
                runner.prefill(admissions(n))
                sync()
                if i >= 3:
                    times.append(time.perf_counter() - t0)
                runner.truncate(0)
            ops = Ops()
            with ops:
                runner.prefill(admissions(n))
            runner.truncate(0)
            syncs = None
            if cuda:
                sync()
                torch.cuda.set_sync_debug_mode("warn")
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    runner.prefill(admissions(n))
                torch.cuda.set_sync_debug_mode(0)
                syncs = sum("synchroniz" in str(w.message) for w in caught)
                runner.truncate(0)
            out.append({
                "rows": n, "ms": 1000 * statistics.median(times), "ops": ops.count, "syncs": syncs,
                "recompiles": compiled() - at_start,
            })  # fmt: skip
    return out


def run_tree(src: Path, a: argparse.Namespace, mode: str) -> list[dict]:
    args = ["--device", a.device, "--config", a.config, "--dtype", a.dtype, "--rows", a.rows, "--modes", mode]
    args += ["--repeats", str(a.repeats), "--inner"]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the run in {src} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--config", default="chattts")
    p.add_argument("--dtype", default="fp16")
    p.add_argument("--rows", default="1,2,4,8,16")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--base", type=Path, help="another tree (a worktree of an earlier commit), side by side")
    p.add_argument("--rounds", type=int, default=3, help="alternating runs of each tree (--base)")
    p.add_argument("--modes", default="eager", help="eager, compile, or both: eager,compile")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    rows, modes = [int(x) for x in a.rows.split(",")], a.modes.split(",")
    if unknown := sorted(set(modes) - {"eager", "compile"}):
        p.error(f"--modes: {', '.join(unknown)} is not a mode; expected eager, compile or eager,compile")
    if a.inner:
        print(json.dumps(measure(a.device, a.config, a.dtype, rows, a.repeats, modes[0])))
        return
    here = Path(__file__).resolve().parent.parent / "src"
    trees = {"this tree": here} | ({"base": a.base / "src"} if a.base else {})
    runs: dict[tuple[str, str], list[list[dict]]] = {(t, m): [] for t in trees for m in modes}
    for _ in range(a.rounds if a.base or len(modes) > 1 else 1):
        for tree, mode in runs:
            runs[tree, mode].append(run_tree(trees[tree], a, mode))
    first = next(iter(runs))  # the ratio's reference: this tree's first mode
    print(f"{a.config} {a.device} {a.dtype}; ms: median over {len(runs[first])} run(s) of medians")
    head = f"{'tree':<10}{'mode':<8}{'rows':>5}{'ms/call':>9}{'ms/row':>8}{'ops':>7}{'syncs':>7}{'recomp':>7}"
    if len(runs) > 1:
        print(f"ratio: {' '.join(first)}'s ms / the row's (above 1: the row is faster)")
    print(head + ("  ratio" if len(runs) > 1 else ""))
    for (tree, mode), got in runs.items():
        for i, n in enumerate(rows):
            ms = statistics.median(r[i]["ms"] for r in got)
            ratio = ""
            if len(runs) > 1 and (tree, mode) != first:
                ratio = f"  {statistics.median(r[i]['ms'] for r in runs[first]) / ms:.2f}x"
            syncs = got[0][i]["syncs"]
            ops = "-" if mode == "compile" else got[0][i]["ops"]  # compiled code runs eagerly under the count
            print(
                f"{tree:<10}{mode:<8}{n:>5}{ms:>9.2f}{ms / n:>8.2f}{ops:>7}"
                f"{'-' if syncs is None else syncs:>7}{max(r[i]['recompiles'] for r in got):>7}{ratio}"
            )
    print("command: python benchmarks/prefill_host.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
