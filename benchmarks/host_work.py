"""The host's work on the serving path, per turn, per request and per chunk, this tree beside
another (issue 33's must-show: the front's and the engine's host work measured apart).

    git worktree add /tmp/base-3dd0b04 3dd0b04
    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/host_work.py \\
        --base /tmp/base-3dd0b04 [--users 12] [--requests 48] [--rounds 3] [--engines 1] \\
        [--steps-per-turn 1,4]

Each tree serves `tiny` (`serve --synthetic --config tiny --max-batch 64 --max-queue 256`, the
tree's own code through PYTHONPATH) with one torch thread (OMP_NUM_THREADS=1: a compute call runs
on the engine's own thread), and this tree's bench sends both the same load: `--users` zh-8s
listeners, streamed, `--requests` in all (each plays its reply in real time before asking again,
so tiny's batch stays small), or with `--concurrency N` N streamed requests back to back (the
batch stays full, and requests per turn come nearer what an H200 saw at 200 listeners). Around
the load the script reads the server's /metrics (decode steps: a "turn" below is one
decode step, which `serve --steps-per-turn K` runs K of per host turn; prefill calls
and seconds; step and audio-call seconds) and every thread's CPU seconds in every server process
(psutil). Per tree:
- requests per prefill call and prefill ms per request;
- **the engine thread's CPU ms per turn**: the busiest thread of the process that holds the
  engine (the server's own where the front shares it, as in 3dd0b04; the core child in a tree with
  the front apart, found by its command line): the model's compute, sampling and
  vocoder and all the scheduler's Python, beside the wall its timers (prefill, step, audio call)
  read per turn. A thread waiting for the GIL or a core spends no CPU but its timers run, so the
  timers cannot split its CPU into compute and the rest while another thread shares the process;
- the engine process's other threads per turn (the core's pipe reader; a tree without the split
  has no such process: "-");
- **the engine process's Python per turn outside compute**: every thread's CPU in the process that
  drives the device (the base: the server, its HTTP front included, as on the H200 of issue 33;
  here: the core), less the CPU its threads spent in the model's forward, sampling and vocoder,
  timed inside that process by `_compute_timer/sitecustomize.py` (the calling thread's CPU in the
  same model calls, which every tree since 3dd0b04 has);
- **the front's CPU ms per request and per chunk** the client received: every other thread of the
  server process (the base: its HTTP event loop, in the engine's process; here: the front process).
Medians over `--rounds` runs, the trees alternating; bench shares the machine's cores with both.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import machine, serve_probed, tree_src  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
from ttsperf.cli.demo_serving import stop_server  # noqa: E402


def metrics(url: str) -> dict[str, float]:
    """The counters this needs from /metrics: histogram sums and counts, and requests answered."""
    text = urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith(("_sum", "_count")) or s.name == "ttsperf_decode_steps_total":
                out[s.name] = s.value
            elif s.name == "ttsperf_engine_requests_total":
                out["requests"] = out.get("requests", 0) + s.value
    return out


def threads_cpu(procs: list[psutil.Process]) -> dict[tuple[int, int], float]:
    """Every thread's CPU seconds, by (process, thread id)."""
    out = {}
    for proc in procs:
        for t in proc.threads():
            out[(proc.pid, t.id)] = t.user_time + t.system_time
    return out


TIMER = Path(__file__).resolve().parent / "_compute_timer"


def compute_seconds(folder: Path) -> dict[int, float]:
    """The compute CPU seconds each process that imported the model has written, by pid."""
    out = {}
    for path in folder.glob("compute-*.json"):
        try:
            out[int(path.stem.split("-")[1])] = json.loads(path.read_text())["seconds"]
        except (ValueError, KeyError):  # a write in progress is replaced whole: try the next
            continue
    return out


def settled_compute(folder: Path) -> dict[int, float]:
    """After the writers' next round (they write every 0.2 s)."""
    time.sleep(0.5)
    return compute_seconds(folder)


def run(src: Path, args: argparse.Namespace, work: Path, engines: int, steps: int = 1) -> dict:
    """One tree under the load. Where its engine runs in child processes (the front apart: every
    tree since the split), those are the engine's process; otherwise the server's own."""
    flags = ["--config", "tiny", "--max-batch", "64", "--max-queue", "256"]
    flags += ["--engines", str(engines)] if engines > 1 else []
    flags += ["--steps-per-turn", str(steps)] if steps > 1 else []
    timed = work / "compute"
    timed.mkdir()
    proc, url = serve_probed(src, TIMER, ("TTSPERF_COMPUTE_DIR", timed), work / "serve.log", *flags)
    try:
        front = psutil.Process(proc.pid)
        procs = [front, *front.children(recursive=True)]
        cores = [p for p in procs[1:] if "spawn_main" in " ".join(p.cmdline())]  # engine/client.py's
        before = metrics(url), threads_cpu(procs), settled_compute(timed)
        bench = [sys.executable, "-m", "ttsperf", "bench", url, "--adapter", "openai", "--stream"]
        bench += ["--text-set", "zh-8s", "--no-until-decided"]
        if args.concurrency:  # back to back: the batch stays full, as on a saturated card
            bench += ["--concurrency", str(args.concurrency)]
        else:
            bench += ["--users", str(args.users), "--ramp-up", "4s"]
        bench += ["--requests", str(args.requests), "--no-gpu", "-o", str(work / "bench")]
        benv = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        subprocess.run(bench, env=benv, capture_output=True, check=True)
        after = metrics(url), threads_cpu(procs), settled_compute(timed)
    finally:
        stop_server(proc)
    d = {k: after[0].get(k, 0.0) - before[0].get(k, 0.0) for k in after[0]}
    cpu = {k: v - before[1].get(k, 0.0) for k, v in after[1].items()}
    # The thread that drives the device: the busiest of the process that holds the engine (the
    # server's own without the split, its engine children with it); the rest of that process's
    # threads (without the split: the HTTP front's event loop; with it: the pipe reader) and the
    # front apart.
    split = bool(cores)
    engine_pids = {p.pid for p in cores} if split else {front.pid}
    engine_threads = {k: v for k, v in cpu.items() if k[0] in engine_pids}
    worker = max(engine_threads, key=engine_threads.get)
    front_s = sum(v for k, v in cpu.items() if k[0] == front.pid and k != worker)
    with (work / "bench" / "requests.csv").open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["status"] == "200" and r["warmup"] != "True"]
    chunks = sum(int(r["chunks"] or 0) for r in rows)
    turns = d["ttsperf_step_seconds_count"]
    timers = sum(d[f"ttsperf_{n}_seconds_sum"] for n in ("prefill", "step", "audio_call"))
    compute = sum(v - before[2].get(pid, 0.0) for pid, v in after[2].items() if pid in engine_pids)
    if not after[2]:
        raise SystemExit(f"no compute timings from {src}'s server: is {TIMER} on its PYTHONPATH?")
    requests = d["requests"]
    return {
        "requests": requests,
        "per_prefill": requests / d["ttsperf_prefill_seconds_count"],
        "prefill_ms_per_request": 1000 * d["ttsperf_prefill_seconds_sum"] / requests,
        "turns": turns,
        "timers_ms_per_turn": 1000 * timers / turns,
        "compute_ms_per_turn": 1000 * compute / turns,
        "python_ms_per_turn": 1000 * (sum(engine_threads.values()) - compute) / turns,
        "worker_ms_per_turn": 1000 * cpu[worker] / turns,
        "engine_other_ms_per_turn": 1000 * (sum(engine_threads.values()) - cpu[worker]) / turns
        if split
        else None,
        "front_ms_per_request": 1000 * front_s / requests,
        "front_ms_per_chunk": 1000 * front_s / chunks if chunks else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, required=True, help="a worktree of the tree to compare with")
    p.add_argument("--users", type=int, default=12, help="zh-8s listeners (closed loop)")
    p.add_argument(
        "--concurrency", type=int, help="a closed loop of N in flight instead of listeners (no playback)"
    )
    p.add_argument("--requests", type=int, default=48)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--engines", type=int, default=1, help="this tree's `serve --engines`")
    p.add_argument(
        "--steps-per-turn",
        default="1",
        help="this tree's `serve --steps-per-turn`, or several (1,4: a row each)",
    )
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="host-work-"))
    steps = [int(k) for k in args.steps_per_turn.split(",")]
    trees = {"base": (tree_src(args.base), 1, 1)}
    for k in steps:
        trees["this" if k == 1 else f"this, {k} steps a turn"] = (ROOT / "src", args.engines, k)
    found: dict[str, list[dict]] = {name: [] for name in trees}
    for r in range(args.rounds):
        for i, (name, (src, engines, k)) in enumerate(trees.items()):
            (work / f"{i}-{r}").mkdir()
            found[name].append(run(src, args, work / f"{i}-{r}", engines, k))
            print(f"{name} round {r}: {found[name][-1]}", flush=True)

    def med(name: str, key: str, digits: int = 2) -> str:
        values = [x[key] for x in found[name] if x[key] is not None]
        return f"{statistics.median(values):.{digits}f}" if values else "-"

    print()
    load = f"{args.concurrency} in flight" if args.concurrency else f"{args.users} zh-8s listeners"
    print(f"machine: {machine()}; tiny, {load}, {args.requests} requests, "
          f"1 torch thread, medians of {args.rounds}; kept in {work}")  # fmt: skip
    print("| tree | req per prefill | prefill ms/req | engine thread CPU ms/turn | its timers' wall ms/turn "
          "| engine's other threads ms/turn | engine process: compute ms/turn | engine process: Python "
          "outside compute ms/turn | front CPU ms/req | front CPU ms/chunk |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in trees:
        label = f"{args.base.name} (base)" if name == "base" else name.replace("this", "this tree")
        keys = ("per_prefill", "prefill_ms_per_request", "worker_ms_per_turn", "timers_ms_per_turn",
                "engine_other_ms_per_turn", "compute_ms_per_turn", "python_ms_per_turn",
                "front_ms_per_request", "front_ms_per_chunk")  # fmt: skip
        cells = [med(name, k) for k in keys]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for key, what in (
        ("worker_ms_per_turn", "engine thread CPU per turn"),
        ("python_ms_per_turn", "engine process's Python outside compute per turn"),
        ("front_ms_per_request", "front CPU per request"),
    ):
        base = statistics.median(x[key] for x in found["base"])
        for name in list(trees)[1:]:
            print(f"{what}, base / {name}: {base / statistics.median(x[key] for x in found[name]):.2f}x")
    print(
        "command: flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/host_work.py "
        + " ".join(sys.argv[1:])
    )


if __name__ == "__main__":
    main()
