"""The most zh-8s listeners `ttsperf serve` holds on this machine at the realtime SLO, this tree
beside another (issue 33: the engine in its own process against 3dd0b04's one process).

    git worktree add /tmp/base-3dd0b04 3dd0b04
    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/listeners_cpu.py \
        --base /tmp/base-3dd0b04 [--config tiny] [--max-batch 64] [--users 4,96] [--repeats 1] \
        [--engines 1,2] [--threads 1] [--steps-per-turn 1,4] [--serve-flags=--compile --warm-users 32]

For each tree, in turn (`--repeats` times, alternating): `ttsperf serve --synthetic --config tiny
--max-batch 64 --max-queue 256` (the same flags for both trees; the tree's own code through
PYTHONPATH), then on the same machine, at each load N of `--users` in turn until one misses,
`ttsperf bench URL --adapter openai --stream --text-set zh-8s --users N --ramp-up 8s
--no-until-decided --requests 3N --slo ttfa_p99=300ms,underrun_p99=100ms` (bench is this tree's for
both). A load meets the SLO when every request succeeded and the point estimates do (TTFA P99 <=
300 ms, underrun P99 <= 100 ms, over 3N requests): bench's own verdict wants more requests than a
2-core machine serves in minutes (its --find-max took over 15 minutes for one tree). `tiny` is the cheap
step a card gives: what binds is the host (the event loop, the engine's loop, the chunk hand-off),
as on a GPU. Nothing is pinned: the server's processes and bench share the cores alike for both.
`--engines 1,2` runs this tree once per count (`serve --engines N`, --max-batch each); the base
runs one engine. `--threads 1` sets OMP_NUM_THREADS for every server (torch's intra-op threads;
serve --engines N gives each engine cores / N by itself). `--steps-per-turn 1,4` runs this tree once
per value as well (`serve --steps-per-turn K`). `--serve-flags` adds flags to every server of both
trees (`--serve-flags=--compile`: a cheaper step, nearer a card's). `--warm-users N` sends N
listeners one request each before the loads, unmeasured, so that a tree which compiles inside
requests (3dd0b04 does not warm before ready) is measured warm as well. Prints a table and the
command; each tree's bench output is kept in a printed temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import machine, tree_src, wait_ready  # noqa: E402

from ttsperf.cli.demo_serving import free_port, stop_server  # noqa: E402

SLO = "ttfa_p99=300ms,underrun_p99=100ms"


def serve(
    src: Path, args: argparse.Namespace, log: Path, engines: int = 1, steps: int = 1
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-c", "from ttsperf.cli.main import app; app()", "serve", "--synthetic"]
    cmd += ["--config", args.config, "--max-batch", str(args.max_batch), "--max-queue", "256"]
    cmd += ["--engines", str(engines)] if engines > 1 else []  # the base tree has no such flag
    cmd += ["--steps-per-turn", str(steps)] if steps > 1 else []  # nor this one
    cmd += args.serve_flags.split()
    cmd += ["--port", str(port), "--log-level", "warning"]
    env = {**os.environ, "PYTHONPATH": str(src)}
    if args.threads:  # torch's intra-op threads in every server process, both trees alike
        env["OMP_NUM_THREADS"] = str(args.threads)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc=proc, log=log)  # a flag the tree refuses (--serve-flags) ends it at once
    return proc, url


def point(url: str, users: int, args: argparse.Namespace, out: Path) -> dict:
    """One closed-loop point: `users` listeners, `--cycles` requests each, measured whole."""
    cmd = [sys.executable, "-m", "ttsperf", "bench", url, "--adapter", "openai", "--stream"]
    cmd += ["--text-set", "zh-8s", "--users", str(users), "--ramp-up", "8s", "--no-until-decided"]
    cmd += ["--requests", str(args.cycles * users), "--slo", SLO, "-o", str(out)]
    subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, capture_output=True, check=False)
    p = json.loads((out / "run.json").read_text())["points"][-1]
    ttfa, underrun = p["ttfa_s"]["p99"], p["underrun_s"]["p99"] or 0.0
    ok = p["successes"] == p["requests"] and ttfa is not None and ttfa <= 0.3 and underrun <= 0.1
    return {"users": users, "ttfa_p99": ttfa, "underrun_p99": underrun, "ok": p["successes"], "met": ok}


def most_listeners(url: str, args: argparse.Namespace, out: Path) -> tuple[int, list[dict]]:
    """Ascending loads until one misses the SLO (point estimates: P99s of n = cycles x users)."""
    if args.warm_users:  # unmeasured: whatever the tree compiles or captures on first use
        warm = [sys.executable, "-m", "ttsperf", "bench", url, "--adapter", "openai", "--stream"]
        warm += ["--text-set", "zh-8s", "--users", str(args.warm_users), "--ramp-up", "2s"]
        warm += ["--no-until-decided", "--requests", str(args.warm_users), "-o", str(out / "warm")]
        subprocess.run(warm, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, capture_output=True)
    best, points = 0, []
    for users in (int(u) for u in args.users.split(",")):
        points.append(point(url, users, args, out / f"users-{users}"))
        print(f"  {points[-1]}", flush=True)
        if not points[-1]["met"]:
            break
        best = users
    return best, points


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, required=True, help="a worktree of the tree to compare with")
    p.add_argument("--config", default="tiny")
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--users", default="16,24,32,48,64,96,128", help="the loads, ascending")
    p.add_argument("--cycles", type=int, default=3, help="requests per listener at each load")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument(
        "--threads", type=int, default=0, help="OMP_NUM_THREADS for the servers (0: torch's default)"
    )
    p.add_argument(
        "--engines", default="1", help="this tree's `serve --engines` counts, e.g. 1,2 (each a run)"
    )
    p.add_argument(
        "--steps-per-turn", default="1", help="this tree's `serve --steps-per-turn`, e.g. 1,4 (each a run)"
    )
    p.add_argument("--serve-flags", default="", help="more serve flags for both trees, e.g. --compile")
    p.add_argument("--warm-users", type=int, default=0, help="listeners sent once, unmeasured, first")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="listeners-"))
    # (label, source, engines, steps a turn): the base always one engine, one step a turn
    runs = [("base", tree_src(args.base), 1, 1)]
    runs += [
        (f"this-{n}-{k}", ROOT / "src", n, k)
        for n in (int(e) for e in args.engines.split(","))
        for k in (int(s) for s in args.steps_per_turn.split(","))
    ]
    found: dict[str, list[float]] = {name: [] for name, *_ in runs}
    for r in range(args.repeats):
        for name, src, engines, steps in runs:
            proc, url = serve(src, args, work / f"{name}-{r}-serve.log", engines, steps)
            print(f"{name} run {r}:", flush=True)
            try:
                best, _ = most_listeners(url, args, work / f"{name}-{r}")
            finally:
                stop_server(proc)
            found[name].append(best)
    print()
    threads = f"{args.threads} torch thread(s)" if args.threads else "torch's default threads"
    print(
        f"machine: {machine()}; {args.config}, max batch {args.max_batch}, {threads}, SLO {SLO}; "
        f"{'serve ' + args.serve_flags + '; ' if args.serve_flags else ''}"
        f"kept in {work}"
    )
    print("| tree | most listeners meeting the SLO (each run) | median |")
    print("|---|---|---|")
    base = statistics.median(found["base"])
    for name, values in found.items():
        n, k = name.split("-")[1:] if name != "base" else ("1", "1")
        label = f"{args.base.name} (base)" if name == "base" else f"this tree, --engines {n}"
        label += f", --steps-per-turn {k}" if k != "1" else ""
        ratio = f" ({statistics.median(values) / base:.2f}x)" if base and name != "base" else ""
        print(f"| {label} | {', '.join(f'{v:g}' for v in values)} | {statistics.median(values):g}{ratio} |")
    if not base:
        print("base met the SLO at no load probed")
    print(
        "command: flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/listeners_cpu.py "
        + " ".join(sys.argv[1:])
    )


if __name__ == "__main__":
    main()
