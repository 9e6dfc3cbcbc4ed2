"""Shared by the benchmark scripts: a loopback mock server in a subprocess, the machine line, and
--help that shows a script's docstring within 80 columns."""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HELP_WIDTH = 78  # every screen fits 80 columns; docstrings are written at the project's line length
_ITEM = re.compile(r"(- |\* |\d+\. )")


def wrap_doc(text: str, width: int = HELP_WIDTH) -> list[str]:
    """A docstring's lines re-wrapped to `width`: prose paragraphs and list items ("- ", "1. ")
    filled, with a list item's own hanging indent; a line indented 4 spaces or more (a command,
    written to fit) kept as it is."""
    out: list[str] = []
    words: list[str] = []
    first = rest = ""  # the paragraph's or item's indents

    def flush() -> None:
        if words:
            out.extend(
                textwrap.wrap(
                    " ".join(words),
                    width,
                    initial_indent=first,
                    subsequent_indent=rest,
                    break_on_hyphens=False,
                    break_long_words=False,
                )  # fmt: skip
            )
            words.clear()

    for line in textwrap.dedent(text).strip("\n").splitlines():
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        item = _ITEM.match(stripped)
        if not stripped:
            flush()
            out.append("")
        elif words and rest and indent == len(rest) and not item:  # an item's next line
            words.append(stripped)
        elif indent >= 4:
            flush()
            out.append(line.rstrip())
        elif item:
            flush()
            first, rest = " " * indent, " " * (indent + item.end())
            words.append(stripped)
        elif words:
            words.append(stripped)
        else:
            first = rest = ""
            words.append(stripped)
    flush()
    return out


class DocHelp(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter for a description that is the script's docstring (`wrap_doc`)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line if line else line for line in wrap_doc(text))


def tree_src(base: Path) -> Path:
    """A `--base` worktree's code, or an error naming it: without src/ttsperf there, the base's
    process would import this tree's installed package and compare this tree with itself."""
    src = Path(base) / "src"
    if not (src / "ttsperf").is_dir():
        raise SystemExit(
            f"--base {base}: expected a worktree of this repository (git worktree add {base} <commit>)"
        )
    return src


def serve_probed(
    src: Path, probe: Path, out: tuple[str, Path], log: Path, *flags: str
) -> tuple[subprocess.Popen, str]:
    """`ttsperf serve --synthetic --port P FLAGS` from the tree at `src`, one torch thread, with the
    `probe` folder's sitecustomize first on PYTHONPATH (it loads in every process of the server,
    whichever tree runs) writing into `out` = (its environment variable, a folder); stderr into
    `log` -> (the process, its URL) once it is ready."""
    from ttsperf.cli.demo_serving import free_port

    port = free_port()
    cmd = [sys.executable, "-c", "from ttsperf.cli.main import app; app()", "serve", "--synthetic"]
    cmd += ["--port", str(port), "--log-level", "warning", *flags]
    env = {
        **os.environ,
        "PYTHONPATH": f"{probe}{os.pathsep}{src}",
        "OMP_NUM_THREADS": "1",
        out[0]: str(out[1]),
    }
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc=proc, log=log)
    return proc, url


def wait_ready(
    url: str, timeout: float = 300.0, proc: subprocess.Popen | None = None, log: Path | None = None
) -> None:
    """Until a started server answers /readyz 200 (loading a model takes a while); an error when `proc`
    (the server) exits first, with the last line of its `log` (why: a flag it refuses, a bad
    config), or when the time runs out, rather than polling a dead server to the end."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            lines = [line for line in log.read_text().splitlines() if line.strip()] if log else []
            why = f": {lines[-1]} (log: {log})" if lines else ""
            raise SystemExit(
                f"the server at {url} exited with code {proc.returncode} before it was ready{why}"
            )
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the server at {url} was not ready after {timeout:.0f} s")


class MockServer:
    def __init__(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "ttsperf.bench.mock_server", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise SystemExit(f"mock server did not start: {line!r}")
        self.url = line.split()[-1]
        self.args = args

    def __enter__(self) -> MockServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"
