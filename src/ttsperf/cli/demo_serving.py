"""The demo's serving stage: `ttsperf serve` in its own process, `ttsperf bench` against it.

A real server on loopback, a real load test over HTTP: the same two commands a user runs by hand.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ttsperf.errors import UserError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(config: str, device: str, max_batch: int, log: Path, timeout: float = 180.0):
    """Start `ttsperf serve --synthetic` and wait until /readyz answers 200."""
    port = free_port()
    cmd = [sys.executable, "-m", "ttsperf", "serve", "--synthetic", "--config", config,
           "--device", device, "--port", str(port), "--max-batch", str(max_batch)]  # fmt: skip
    logf = log.open("w")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UserError(f"the demo server exited with code {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return proc, url
        except OSError:  # not listening yet, or 503 while loading (urllib's HTTPError is an OSError)
            pass
        time.sleep(0.5)
    stop_server(proc)
    raise UserError(f"the demo server was not ready within {timeout:.0f} s; see {log}")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM: the server drains (answers what it accepted) and exits."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def bench_server(url: str, pid: int, concurrency: list[int], requests: int, out: Path, progress=None):
    from ttsperf.bench.api import BenchSettings, run_bench
    from ttsperf.bench.charts import write_charts
    from ttsperf.bench.results import write_outputs

    cfg = BenchSettings(
        urls=[url], adapter="openai", stream=True, concurrency=concurrency, requests=requests, warmup=1,
        server_pid=pid, gpu=False,
    )  # fmt: skip
    run = run_bench(cfg, progress)
    write_outputs(run, out)
    write_charts(run, out)
    return run
