"""`serve --compile` cold: how long to /readyz, and does any request compile? This tree beside
another (issue 33 item 4: ready means warm, "captured, or compiled, before /readyz").

    git worktree add /tmp/base-a366a4c a366a4c
    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python \\
        benchmarks/compile_ready.py --base /tmp/base-a366a4c [--config tiny] \\
        [--concurrency 64] [--requests 192] [--rounds 2]

Each tree serves `--synthetic --config CONFIG --compile --max-batch 64 --max-queue 256` (its own
code through PYTHONPATH; one torch thread) with TORCH_LOGS=recompiles, so torch logs every graph it
compiles after a function's first, and an empty inductor cache of its own (inductor keeps compiled
graphs on disk: a start after another that compiled the same graph would be faster). The script
times start to /readyz, then sends one load right after it: `--concurrency` streamed zh-8s
requests back to back (the batch fills, so audio calls hold many rows at once), and counts the
recompiles logged before ready and during the load. On a CPU, ATen picks a conv's backend by its
input's size and a compiled audio call guards on that: a request whose call crosses a guard
compiles inside the load, and the requests behind it wait.
Prints the table and the command; the trees alternate over `--rounds`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import DocHelp, machine, tree_src, wait_ready  # noqa: E402

from ttsperf.cli.demo_serving import free_port, stop_server  # noqa: E402

RECOMPILE = "Recompiling function"


def run(src: Path, args: argparse.Namespace, work: Path) -> dict:
    """One cold start and one load; the recompiles read from the server's log."""
    port, log = free_port(), work / "serve.log"
    cmd = [sys.executable, "-c", "from ttsperf.cli.main import app; app()", "serve", "--synthetic"]
    cmd += ["--config", args.config, "--compile", "--max-batch", "64", "--max-queue", "256"]
    cmd += ["--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "TORCH_LOGS": "recompiles"}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor")  # cold: no graph another run compiled
    t0 = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, timeout=900, proc=proc, log=log)
        ready = time.perf_counter() - t0
        before = log.read_text().count(RECOMPILE)
        bench = [sys.executable, "-m", "ttsperf", "bench", url, "--adapter", "openai", "--stream"]
        bench += ["--text-set", "zh-8s", "--no-until-decided", "--concurrency", str(args.concurrency)]
        bench += ["--requests", str(args.requests), "--no-gpu", "-o", str(work / "bench")]
        benv = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        done = subprocess.run(bench, env=benv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"bench failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        during = log.read_text().count(RECOMPILE) - before
    finally:
        stop_server(proc)
    p = json.loads((work / "bench" / "run.json").read_text())["points"][-1]
    return {
        "ready_s": ready, "before": before, "during": during, "ok": p["successes"], "n": p["requests"],
        "ttfa_p50": p["ttfa_s"]["p50"], "ttfa_p99": p["ttfa_s"]["p99"], "e2e_p99": p["latency_s"]["p99"],
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    ap.add_argument("--base", type=Path, required=True, help="a worktree of the tree to compare with")
    ap.add_argument("--config", default="tiny", help="model config (default tiny)")
    ap.add_argument("--concurrency", type=int, default=64, help="streamed requests in flight")
    ap.add_argument("--requests", type=int, default=192, help="requests in the load")
    ap.add_argument("--rounds", type=int, default=2, help="cold starts per tree, alternating")
    args = ap.parse_args()
    trees = {"base": tree_src(args.base), "this tree": ROOT / "src"}
    rows: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, src in trees.items():
                work = Path(tmp) / f"{r}-{name.replace(' ', '-')}"
                work.mkdir()
                rows.append((name, run(src, args, work)))
                print(f"  round {r + 1}, {name}: {rows[-1][1]}", flush=True)
    print(f"\n{machine()}")
    print(f"{args.config}, --compile, one torch thread; load: {args.concurrency} streamed zh-8s requests")
    print(f"back to back, {args.requests} in all, right after /readyz\n")
    head = f"{'server':<10} {'ready s':>8} {'recompiles':>10} {'in load':>8} {'ok':>8}"
    print(head + f" {'TTFA p50':>9} {'p99':>7} {'e2e p99':>8}")
    print(f"{'':<10} {'':>8} {'to ready':>10} {'':>8} {'':>8} {'ms':>9} {'ms':>7} {'ms':>8}")
    for name, d in rows:
        print(
            f"{name:<10} {d['ready_s']:>8.1f} {d['before']:>10} {d['during']:>8} {d['ok']:>4}/{d['n']:<3} "
            f"{d['ttfa_p50'] * 1e3:>9.0f} {d['ttfa_p99'] * 1e3:>7.0f} {d['e2e_p99'] * 1e3:>8.0f}"
        )
    print(f"\n(base: {args.base}) " + " ".join(["python", *sys.argv]))


if __name__ == "__main__":
    main()
