"""`ttsperf serve --ray` as a user runs it: the real command in a subprocess, which starts a local
Ray cluster, deploys the tiny model on N replicas and serves on a loopback port; SIGTERM stops it.

Starting Ray and N replicas takes a minute or two on a loaded 2-core machine, hence one per test
module (a module-scoped fixture) and generous timeouts.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

STARTUP_TIMEOUT = 600.0  # Ray + replicas importing torch, while other jobs share the cores
API_KEY = "ray-test-key"


def ray_available() -> bool:
    try:
        import ray.serve  # noqa: F401
    except ImportError:
        return False
    return True


needs_ray = pytest.mark.skipif(not ray_available(), reason="needs ray[serve]: pip install -e '.[ray]'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RayServe:
    url: str
    process: subprocess.Popen
    log: Path

    def client(self, **kw) -> httpx.Client:
        kw.setdefault("timeout", 120.0)
        headers = {"Authorization": f"Bearer {API_KEY}", **kw.pop("headers", {})}
        return httpx.Client(base_url=self.url, headers=headers, **kw)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def replica_pids(self) -> list[int]:
        """The replicas' worker processes: descendants of the command (it started the cluster),
        titled by Ray after the deployment."""
        out = []
        for p in psutil.Process(self.process.pid).children(recursive=True):
            try:
                if "ServeReplica:ttsperf:TTS" in " ".join(p.cmdline()):
                    out.append(p.pid)
            except psutil.Error:
                continue
        return out

    def stop(self, timeout: float = 120.0) -> int | None:
        """SIGTERM (the command drains and shuts Ray down); its exit code, None if it had to be killed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)  # the session this helper started, only
            self.process.wait(30)
            return None


def start_ray_serve(*args: str, replicas: int = 2) -> RayServe:
    """Run `ttsperf serve --ray --replicas N --synthetic --config tiny ARGS` and wait until it answers."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="ttsperf-ray-", suffix=".log")[1])
    command = [
        str(Path(sys.executable).with_name("ttsperf")),
        *("serve", "--ray", "--replicas", str(replicas), "--synthetic", "--config", "tiny"),
        *("--port", str(port), "--log-level", "warning", *args),
    ]
    env = {**os.environ, "TTSPERF_SERVE_API_KEY": API_KEY, "RAY_DEDUP_LOGS": "0"}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    live = RayServe(f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_until_every_replica_answers(live, replicas)
    except BaseException:
        live.stop(60)
        raise
    return live


def _wait_until_every_replica_answers(live: RayServe, replicas: int) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with live.client(timeout=10) as c:
        while True:
            if live.process.poll() is not None:
                code, tail = live.process.returncode, live.output()[-4000:]
                raise AssertionError(f"serve --ray exited {code}:\n{tail}")
            try:
                seen = {c.get("/readyz").headers.get("x-replica") for _ in range(4 * replicas)}
                if len(seen - {None}) == replicas:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                tail = live.output()[-4000:]
                raise AssertionError(f"serve --ray not ready after {STARTUP_TIMEOUT:.0f} s:\n{tail}")
            time.sleep(1.0)


@dataclass
class Ended:
    code: int
    stderr: str
    seconds: float

    def line(self) -> str:
        """Its one line on stderr (asserted: exit 2, one line, no traceback)."""
        lines = self.stderr.strip().splitlines()
        assert self.code == 2 and len(lines) == 1 and "Traceback" not in self.stderr, self.stderr[-4000:]
        return lines[0]


def run_to_end(argv: list[str], cwd: Path, timeout: float, **env: str) -> Ended:
    """Run a command the way a user does, in its own session (whatever Ray it starts goes with it
    on a timeout), with `env` added; how it ended and how long it took."""
    started = time.monotonic()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("TTSPERF_", "RAY_ADDRESS"))}, **env}
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the session this helper started, only
        _, stderr = process.communicate()
        raise AssertionError(f"{argv} still running after {timeout:.0f} s:\n{stderr[-4000:]}") from None
    return Ended(process.returncode, stderr, time.monotonic() - started)


def ttsperf(command: str) -> list[str]:
    """`ttsperf serve ...` as typed -> the argv of this environment's ttsperf."""
    import shlex

    words = shlex.split(command)
    assert words[0] == "ttsperf"
    return [str(Path(sys.executable).with_name("ttsperf")), *words[1:]]


def ray_cluster_running() -> bool:
    """A Ray cluster on this machine: `--address auto` would join it (Ray finds any gcs_server)."""
    from ray._private.services import find_gcs_addresses

    return bool(find_gcs_addresses())
