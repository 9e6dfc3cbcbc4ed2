"""Regenerate the README's output samples: every code block line `$ [VAR=..] ttsperf ...` is run
here and the lines under it, up to the next `$ ` line or the block's end, become what it printed.

    python scripts/readme_samples.py            # rewrite README.md in place
    python scripts/readme_samples.py --check    # exit 1 naming each sample that is out of date
    python scripts/readme_samples.py --only info   # the samples of one command (tests check `info`)

Samples of other programs (`$ curl ...` against a server) are left as written.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"
_SAMPLE = re.compile(r"^\$ ((?:[A-Z_0-9]+=\S+\s+)*)ttsperf (\S+)(.*)$")


def run_sample(line: str) -> list[str]:
    """What `$ ...ttsperf ...` prints, as lines (stdout; a sample shows what a user reads)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "COLUMNS": "80"}  # the width it is read at, unless the line sets one
    done = subprocess.run(["bash", "-c", line[2:]], capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{line}: exit {done.returncode}\n{done.stderr}")
    return [ln.rstrip() for ln in done.stdout.rstrip("\n").splitlines()]


def samples(text: str, only: str | None = None):
    """(index of the `$ ` line, index past its output, the command) for each ttsperf sample."""
    lines = text.splitlines()
    in_block = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_block = not in_block
            continue
        m = _SAMPLE.match(line) if in_block else None
        if m and (only is None or m.group(2) == only):
            end = i + 1
            while not lines[end].startswith(("```", "$ ")):
                end += 1
            yield i, end, line


def regenerate(text: str, only: str | None = None) -> tuple[str, list[str]]:
    """The README with its samples rerun, and the commands whose output changed."""
    lines = text.splitlines()
    changed = []
    for start, end, command in reversed(list(samples(text, only))):
        fresh = run_sample(command)
        if lines[start + 1 : end] != fresh:
            changed.append(command)
            lines[start + 1 : end] = fresh
    return "\n".join(lines) + "\n", changed[::-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a sample is stale")
    ap.add_argument("--only", help="only the samples of this ttsperf command, e.g. info")
    args = ap.parse_args()
    text = README.read_text(encoding="utf-8")
    new, changed = regenerate(text, args.only)
    for command in changed:
        print(f"{'stale' if args.check else 'updated'}: {command}")
    if args.check:
        return 1 if changed else 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
