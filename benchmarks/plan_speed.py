"""How long `ttsperf plan` takes: this tree against another checkout, side by side, alternating.

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python \\
        benchmarks/plan_speed.py --base /tmp/plan-base-wt
    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python \\
        benchmarks/plan_speed.py --base /tmp/plan-base-wt \\
        --args "--scenario realtime --streams 100" --runs 5

(`git worktree add /tmp/plan-base-wt COMMIT` makes the base.) Each run is the whole command as a
user types it, in a fresh interpreter with that tree's src/ first on PYTHONPATH (imports, the
catalog, the worker processes and every simulation included), its JSON written to a file and
its wall time read around the process. The runs alternate base/this so a change in the
machine's load falls on both; the table gives each tree's median and the ratio of medians, and
how the two answers compare (each card's capacity, the recommendation).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import DocHelp, machine  # noqa: E402


def run(tree: Path, args: list[str], out: Path) -> float:
    env = {"PYTHONPATH": str(tree / "src"), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ttsperf", "plan", *args, "--json", "-o", str(out)],
        env=env, cwd=tree, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - t0


def capacities(path: Path) -> dict[str, dict[str, float]]:
    plan = json.loads(path.read_text(encoding="utf-8"))
    return {
        sc["scenario"]: {
            r["gpu"]: r["max_streams"] if r["max_streams"] is not None else r["max_rate_rps"]
            for r in sc["rows"]
        }  # fmt: skip
        for sc in plan["scenarios"]
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    ap.add_argument(
        "--base", type=Path, required=True, help="another checkout (git worktree) to compare with"
    )
    ap.add_argument("--args", default="--scenario realtime", help="plan's arguments, as typed")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    args = shlex.split(a.args)
    times: dict[str, list[float]] = {"base": [], "this": []}
    with tempfile.TemporaryDirectory() as tmp:
        outs = {k: Path(tmp) / f"{k}.json" for k in times}
        for _ in range(a.runs):
            for name, tree in (("base", a.base), ("this", ROOT)):
                times[name].append(run(tree, args, outs[name]))
        caps = {k: capacities(p) for k, p in outs.items()}
    print(f"machine: {machine()}")
    print(f"command: ttsperf plan {a.args} --json (base: {a.base}, this: {ROOT})")
    print(f"{a.runs} runs each, alternating base and this")
    print(f"{'tree':6} {'median s':>9} {'runs s':>30}")
    for k, v in times.items():
        print(f"{k:6} {statistics.median(v):9.2f} {' '.join(f'{x:.2f}' for x in v):>30}")
    ratio = statistics.median(times["base"]) / statistics.median(times["this"])
    print(f"speed-up (median base / median this): {ratio:.2f}x")
    for sc, base in caps["base"].items():
        this = caps["this"].get(sc, {})
        ratio = [this[g] / base[g] for g in base if g in this and base[g] and this[g] is not None]
        if ratio:
            print(f"{sc}: capacity this/base per card: median {statistics.median(ratio):.2f}, "
                  f"{min(ratio):.2f}-{max(ratio):.2f} over {len(ratio)} cards")  # fmt: skip


if __name__ == "__main__":
    main()
