"""The garbage collector's pauses in each server process under load, this tree beside another
(issue 33: host work on the critical path; a collection stops every stream its process serves).

    git worktree add /tmp/base-dc1df66 dc1df66
    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python \\
        benchmarks/gc_pauses.py --base /tmp/base-dc1df66 [--users 64] \\
        [--requests 384] [--rounds 2] [--config tiny]

Each tree serves `--config` (`serve --synthetic --max-batch 64 --max-queue 256`, the tree's own code
through PYTHONPATH, one torch thread) with `_gc_probe/sitecustomize.py` first on PYTHONPATH: in
every process of the server it times each collection (gc.callbacks), whichever tree runs. Once
/readyz says ready, this tree's bench sends `--users` zh-8s listeners, streamed, `--requests` in
all; the probe's counts before the load are subtracted from those after it. Per tree and process
(the front; the engine core, a child process): collections per generation, their milliseconds in
all and the longest, the objects they freed, and the objects frozen at start; beside them bench's
TTFA and underrun P99. After the load, each process runs one full collection (the probe's
`collect` file): what one pass of the oldest generation costs there, whenever Python starts one.
Medians over `--rounds`, the trees alternating (and which goes first). Prints a table and the command.

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python \\
        benchmarks/gc_pauses.py --in-process 10

instead times the engine's own work with its start-up heap frozen and without, no HTTP: in a
process of its own each time (the two alternating, and which goes first), this tree's engine on
`tiny` (max batch 48, one torch thread) serves 8 requests to warm up, freezes its heap or not, then
serves 128 streamed requests; wall and CPU seconds of those, medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import DocHelp, machine, serve_probed, tree_src  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
from ttsperf.cli.demo_serving import stop_server  # noqa: E402

PROBE = Path(__file__).resolve().parent / "_gc_probe"


def probes(folder: Path) -> dict[int, dict]:
    """What each process's probe last wrote, by pid (after its next write: every 0.2 s)."""
    time.sleep(0.5)
    out = {}
    for path in folder.glob("gc-*.json"):
        try:
            out[int(path.stem.split("-")[1])] = json.loads(path.read_text())
        except (ValueError, KeyError):  # a write in progress is replaced whole
            continue
    return out


def full_passes(folder: Path, pids: list[int], timeout: float = 60.0) -> dict[int, dict]:
    """The probes' readings once every process in `pids` has timed its forced full collection
    (a process with a large heap takes longer than one write's interval)."""
    deadline = time.monotonic() + timeout
    while True:
        out = probes(folder)
        waiting = [pid for pid in pids if out.get(pid, {}).get("forced") is None]
        if not waiting:
            return out
        if time.monotonic() > deadline:
            raise SystemExit(f"processes {waiting} did not time a full collection in {timeout:.0f} s")


def during(before: dict, after: dict) -> dict:
    """One process's collections between two probe readings (the longest: over the process's life,
    unless no pass of that generation ran in the load)."""
    out = {"frozen": after["frozen"]}
    for g, p in after["passes"].items():
        b = before["passes"][g] if before else {"n": 0, "seconds": 0.0, "collected": 0, "max": 0.0}
        n = p["n"] - b["n"]
        out[f"gen{g}"] = n
        out[f"gen{g}_ms"] = 1000 * (p["seconds"] - b["seconds"])
        out[f"gen{g}_max_ms"] = 1000 * p["max"] if n else 0.0
        out[f"gen{g}_freed"] = p["collected"] - b["collected"]
    return out


def run(src: Path, args: argparse.Namespace, work: Path) -> dict:
    folder = work / "gc"
    folder.mkdir()
    flags = ["--config", args.config, "--max-batch", "64", "--max-queue", "256"]
    proc, url = serve_probed(src, PROBE, ("TTSPERF_GC_DIR", folder), work / "serve.log", *flags)
    try:
        front = psutil.Process(proc.pid)
        cores = [p.pid for p in front.children(recursive=True) if "spawn_main" in " ".join(p.cmdline())]
        before = probes(folder)
        bench = [sys.executable, "-m", "ttsperf", "bench", url, "--adapter", "openai", "--stream"]
        bench += ["--text-set", "zh-8s", "--no-until-decided", "--users", str(args.users)]
        bench += ["--ramp-up", "4s", "--requests", str(args.requests), "--no-gpu", "-o", str(work / "bench")]
        benv = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        subprocess.run(bench, env=benv, capture_output=True, check=True)
        after = probes(folder)
        (folder / "collect").touch()  # then one full collection in each process, timed apart
        forced = full_passes(folder, [proc.pid, *cores])
    finally:
        stop_server(proc)
    point = json.loads((work / "bench" / "run.json").read_text())["points"][-1]
    out = {
        "ok": f"{point['successes']}/{point['requests']}",
        "ttfa_p99_ms": 1000 * point["ttfa_s"]["p99"],
        "underrun_p99_ms": 1000 * (point["underrun_s"]["p99"] or 0.0),
    }
    for name, pids in (("front", [proc.pid]), ("engine", cores)):
        part = [during(before.get(pid, {}), after[pid]) for pid in pids if pid in after]
        out[name] = {k: sum(p[k] for p in part) for k in part[0]} if part else {}
        out[name]["full_ms"] = max(1000 * forced[pid]["forced"] for pid in pids)
    return out


def engine_alone(freeze: bool) -> dict:
    """In this process: the engine's 128 streamed requests after warming up, its heap frozen or not."""
    import gc

    import torch

    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.engine.gc_pauses import freeze_startup_heap
    from ttsperf.engine.types import SynthRequest
    from ttsperf.model.config import get_config
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.sampling import SamplingParams

    torch.set_num_threads(1)
    model = Pipeline.synthetic_model(get_config("tiny"), seed=0)
    engine = Engine(model, EngineConfig(max_batch=48, max_queue=512)).start()
    text = "今天天气很好，我们一起去公园散步吧。"
    for seed in range(8):
        engine.submit(SynthRequest(text, SamplingParams(seed=seed))).collect(120)
    if freeze:
        freeze_startup_heap()
    wall, cpu = time.perf_counter(), time.process_time()
    handles = [engine.submit(SynthRequest(text * 3, SamplingParams(seed=s), stream=True)) for s in range(128)]
    for handle in handles:
        handle.collect(300)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    engine.stop(drain=False, timeout=10)
    return {"wall": wall, "cpu": cpu, "frozen": gc.get_freeze_count()}


def in_process(rounds: int) -> None:
    runs: dict[str, list[dict]] = {"frozen": [], "not frozen": []}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    for r in range(rounds):
        for name in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            child = [sys.executable, __file__, "--child", "freeze" if name == "frozen" else "none"]
            done = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}, {name}: {runs[name][-1]}", flush=True)
    print(f"\n{machine()}; tiny in process, 128 streamed requests at max batch 48, one torch thread; "
          f"medians of {rounds} rounds\n")  # fmt: skip
    print("| engine heap | objects frozen | wall s (each round) | median wall s | median CPU s |")
    print("|---|---|---|---|---|")
    for name, rs in runs.items():
        each = ", ".join(f"{r['wall']:.2f}" for r in rs)
        print(f"| {name} | {rs[0]['frozen']:,} | {each} | {statistics.median(r['wall'] for r in rs):.2f} | "
              f"{statistics.median(r['cpu'] for r in rs):.2f} |")  # fmt: skip
    print("\ncommand:", " ".join([Path(sys.executable).name, *sys.argv]))


def median(runs: list[dict], process: str, key: str) -> float:
    return statistics.median(r[process][key] for r in runs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    p.add_argument("--base", type=Path, help="a worktree of the tree to compare with")
    p.add_argument("--config", default="tiny")
    p.add_argument("--users", type=int, default=64)
    p.add_argument("--requests", type=int, default=384)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--in-process", type=int, metavar="ROUNDS", help="the engine alone, frozen or not")
    p.add_argument("--child", choices=["freeze", "none"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(engine_alone(args.child == "freeze")), flush=True)
        os._exit(0)  # the engine's threads and torch's teardown: nothing left to wait for
    if args.in_process:
        in_process(args.in_process)
        return
    if args.base is None:
        p.error("--base: expected a worktree of the tree to compare with (or --in-process ROUNDS)")
    trees = {f"base ({args.base.name})": tree_src(args.base), "this tree": ROOT / "src"}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="gc-pauses-") as tmp:
        for r in range(args.rounds):
            order = list(trees.items())
            for name, src in order if r % 2 == 0 else order[::-1]:  # neither always runs first
                work = Path(tmp) / f"{len(runs[name])}-{name.split()[0]}"
                work.mkdir()
                result = run(src, args, work)
                runs[name].append(result)
                print(f"round {r + 1}, {name}: {json.dumps(result)}", flush=True)
    print(f"\n{machine()}; {args.config}, {args.users} zh-8s listeners, {args.requests} streamed "
          f"requests, one torch thread; medians of {args.rounds} rounds\n")  # fmt: skip
    print("| server | process | objects frozen | gen-0 / gen-1 / gen-2 passes | ms in all | "
          "longest gen-2 ms | gen-2 freed | a full pass ms | TTFA P99 ms | underrun P99 ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, rs in runs.items():
        ttfa = statistics.median(r["ttfa_p99_ms"] for r in rs)
        underrun = statistics.median(r["underrun_p99_ms"] for r in rs)
        for process in ("front", "engine"):
            passes = " / ".join(f"{median(rs, process, f'gen{g}'):.0f}" for g in (0, 1, 2))
            total = sum(median(rs, process, f"gen{g}_ms") for g in (0, 1, 2))
            print(
                f"| {name} | {process} | {median(rs, process, 'frozen'):,.0f} | {passes} | {total:.0f} | "
                f"{median(rs, process, 'gen2_max_ms'):.0f} | {median(rs, process, 'gen2_freed'):.0f} | "
                f"{median(rs, process, 'full_ms'):.1f} | {ttfa:.0f} | {underrun:.0f} |"
            )
    print("\ncommand:", " ".join([Path(sys.executable).name, *sys.argv]))


if __name__ == "__main__":
    main()
