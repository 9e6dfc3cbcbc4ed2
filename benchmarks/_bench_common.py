"""Shared by the benchmark scripts: a loopback mock server in a subprocess, and the machine line."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path


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
