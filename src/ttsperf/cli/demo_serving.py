"""The demo's serving stage: `ttsperf serve` in its own process, `ttsperf bench` against it.

A real server on loopback, a real load test over HTTP: the same two commands a user runs by hand.
"""

from __future__ import annotations

import json
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
    proc, url = launch_server(config, device, max_batch, log)
    wait_ready(proc, url, log, timeout)
    return proc, url


def launch_server(config: str, device: str, max_batch: int, log: Path):
    """Start `ttsperf serve --synthetic` and return at once (wait_ready waits for it)."""
    port = free_port()
    cmd = [sys.executable, "-m", "ttsperf", "serve", "--synthetic", "--config", config,
           "--device", device, "--port", str(port), "--max-batch", str(max_batch)]  # fmt: skip
    logf = log.open("w")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=dict(os.environ))
    return proc, f"http://127.0.0.1:{port}"


def wait_ready(proc: subprocess.Popen, url: str, log: Path, timeout: float = 180.0) -> None:
    """Wait until /readyz answers 200; UserError (the server stopped) if it exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UserError(f"the demo server exited with code {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:  # not listening yet, or 503 while loading (urllib's HTTPError is an OSError)
            pass
        time.sleep(0.5)
    stop_server(proc)
    raise UserError(f"the demo server was not ready within {timeout:.0f} s; see {log}")


def warm_up(url: str, text: str, timeout: float = 180.0) -> None:
    """One request as bench sends it (openai, streaming WAV), read to the end: the first request
    a process serves pays one-off costs (allocator, first calls) that no load point should."""
    body = {"model": "chattts", "input": text, "voice": "default", "response_format": "wav", "stream": True}
    req = urllib.request.Request(
        f"{url}/v1/audio/speech", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        while resp.read(65536):
            pass


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM: the server drains (answers what it accepted) and exits."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def bench_server(
    url: str, pid: int, concurrency: list[int], requests: int, out: Path, text_set: str = "guide",
    progress=None, warmup: int = 1,
):  # fmt: skip
    from ttsperf.bench.api import BenchSettings, run_bench
    from ttsperf.bench.charts import write_charts
    from ttsperf.bench.results import write_outputs

    cfg = BenchSettings(
        urls=[url], adapter="openai", stream=True, concurrency=concurrency, requests=requests, warmup=warmup,
        text_set=text_set, server_pid=pid, gpu=False,
    )  # fmt: skip
    run = run_bench(cfg, progress)
    write_outputs(run, out)
    write_charts(run, out)
    return run
