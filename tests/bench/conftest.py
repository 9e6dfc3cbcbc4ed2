"""Real TTS servers on loopback for the bench tests: `ttsperf.bench.mock_server` in a subprocess.

A separate process, so the server's event loop never competes with the client's for the GIL, and
what the client measures is a real HTTP exchange over a socket.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest


class Server:
    def __init__(self, **cfg: object) -> None:
        args = [sys.executable, "-m", "ttsperf.bench.mock_server", "--port", "0"]
        for k, v in cfg.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"mock server did not start: {line!r} {self.proc.stderr.read()}")
        self.url = line.split()[-1]

    def stats(self) -> dict:
        with urllib.request.urlopen(self.url + "/stats", timeout=5) as r:
            return json.load(r)

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.url + "/reset", method="POST"), timeout=5).read()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="session")
def server_factory():
    """server_factory(slots=1, service_time=0.1) -> a running Server, shared by equal configs."""
    started: dict[tuple, Server] = {}

    def get(**cfg: object) -> Server:
        key = tuple(sorted(cfg.items()))
        if key not in started:
            started[key] = Server(**cfg)
        srv = started[key]
        srv.reset()
        return srv

    yield get
    for srv in started.values():
        srv.stop()


@pytest.fixture
def free_port_url():
    """A loopback URL where nothing listens (connection refused)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def own_server():
    """own_server(**cfg): a server only this test uses (e.g. to kill it); stopped afterwards."""
    mine: list[Server] = []

    def start(**cfg: object) -> Server:
        mine.append(Server(**cfg))
        return mine[-1]

    yield start
    for srv in mine:
        srv.stop()
