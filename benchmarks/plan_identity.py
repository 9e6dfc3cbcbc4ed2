"""Plan JSON before and after a refactor of plan/: run a fixed list of `ttsperf plan` commands into
a folder with one code tree, again with another, and compare the folders.

    # record (PYTHONPATH picks the tree; the profile is an input, made once
    # and shared)
    PYTHONPATH=/tmp/base-wt/src .venv/bin/python benchmarks/plan_identity.py \\
        run /tmp/plan-base --profile /tmp/plan-base/prof.json
    .venv/bin/python benchmarks/plan_identity.py run /tmp/plan-new \\
        --profile /tmp/plan-base/prof.json
    .venv/bin/python benchmarks/plan_identity.py \\
        compare /tmp/plan-base /tmp/plan-new

Only run-specific fields are removed before comparing: a plan's `created` timestamp and its
`ttsperf_version` (a dev build's version carries the commit).
A profile for --profile: `ttsperf profile --synthetic --config tiny --quick --repeats 2 -o prof.json`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import DocHelp  # noqa: E402

RUN_SPECIFIC = ("created", "ttsperf_version")


def commands(profile: str) -> dict[str, list[str]]:
    """name -> `ttsperf` arguments; each writes JSON to stdout."""
    return {
        "all": ["plan", "--json"],
        "realtime-100": ["plan", "--scenario", "realtime", "--streams", "100", "--json"],
        "offline": ["plan", "--scenario", "offline", "--json"],
        "what-if": [
            "plan",
            "--scenario",
            "realtime",
            "--step-overhead",
            "3ms",
            "--vocoder-overhead",
            "5ms",
            "--gpus",
            "T4,RTX 4090,H100 SXM",
            "--json",
        ],  # fmt: skip
        "predict-gpu": ["plan", "--predict", "--gpus", "RTX 4090", "--streams", "32", "--json"],
        "predict-what-if": [
            "plan",
            "--predict",
            "--gpus",
            "L4",
            "--rate",
            "2",
            "--step-overhead",
            "4ms",
            "--json",
        ],  # fmt: skip
        "predict-profile": [
            "plan",
            "--predict",
            "--profile",
            profile,
            "--streams",
            "8",
            "--max-batch",
            "8",
            "--dtype",
            "fp32",
            "--json",
        ],  # fmt: skip
        "profile": ["plan", "--profile", profile, "--scenario", "realtime", "--streams", "20", "--json"],
    }


def _run(out: Path, profile: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-c", "from ttsperf.cli.main import app; app()"]
    for name, args in commands(profile).items():
        p = subprocess.run([*cli, *args], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{name}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
        (out / f"{name}.json").write_text(p.stdout)
        print(f"{name}: {' '.join(args)}")


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in RUN_SPECIFIC}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _diff(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in a.keys() & b.keys():
            out += _diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {str(a)[:120]!r} != {str(b)[:120]!r}"]


def _compare(base: Path, new: Path) -> int:
    bad = 0
    for f in sorted(base.glob("*.json")):
        if f.name == "prof.json":
            continue
        g = new / f.name
        if not g.exists():
            print(f"{f.name}: missing in {new}")
            bad += 1
            continue
        diffs = _diff(_strip(json.loads(f.read_text())), _strip(json.loads(g.read_text())))
        print(f"{f.name}: {'identical' if not diffs else f'{len(diffs)} differences'}")
        for d in diffs[:20]:
            print(f"  {d}")
        bad += bool(diffs)
    verdict = "IDENTICAL" if not bad else "DIFFERENT"
    print(f"{verdict} ({bad} files differ; ignored fields: {', '.join(RUN_SPECIFIC)})")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the commands into a folder")
    r.add_argument("out", type=Path)
    r.add_argument("--profile", required=True, help="a profile JSON (an input shared by both runs)")
    c = sub.add_parser("compare", help="compare two folders")
    c.add_argument("base", type=Path)
    c.add_argument("new", type=Path)
    a = ap.parse_args()
    if a.cmd == "run":
        _run(a.out, a.profile)
        return 0
    return _compare(a.base, a.new)


if __name__ == "__main__":
    raise SystemExit(main())
