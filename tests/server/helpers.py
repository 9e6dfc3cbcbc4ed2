"""What the server tests share: texts, expected lengths, a live server in a thread, `ttsperf serve`
in its own process, polling, raw-socket requests and a /metrics scrape."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ttsperf.engine.client import EngineClient
from ttsperf.engine.config import EngineConfig
from ttsperf.engine.wire import CoreSpec
from ttsperf.model.length import SpeechRate
from ttsperf.model.spec import ModelSpec
from ttsperf.server.app import create_app
from ttsperf.server.run import DrainingServer, make_server

SHORT = "你好，世界。"  # 4 characters -> 36 steps, about 0.76 s of audio
LONG = "今天天气很好我们去公园散步吧" * 17  # 238 characters -> capped at 2048 steps (43.7 s): seconds of work


def expected_samples(text: str, max_new_tokens: int = 2048) -> int:
    """Synthetic weights take the length from the speech-rate model; the vocoder gives 512 samples a
    step less half a hop (center-padded ISTFT)."""
    return 512 * min(SpeechRate().steps(text), max_new_tokens) - 256


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


TINY = ModelSpec(synthetic=True, config="tiny")  # what the `pipe` fixtures build, in the engine's process


class EngineView:
    """What the tests read of the engine, asked of its core process (the call /metrics makes)."""

    def __init__(self, client: EngineClient):
        self.client = client

    def _metrics(self) -> dict:
        return self.client.call_blocking("metrics")

    def running(self) -> int:
        return self._metrics()["running"]

    def queue_depth(self) -> int:
        return self._metrics()["queue_depth"]

    def pending(self) -> int:
        return self._metrics()["pending"]

    @property
    def max_batch(self) -> int:
        return self._metrics()["max_batch"]

    @property
    def effective_max_batch(self) -> int:
        return self._metrics()["effective_max_batch"]

    @property
    def stats(self) -> SimpleNamespace:
        s = self._metrics()["stats"]
        return SimpleNamespace(requests=Counter(s["requests"]), decode_steps=s["decode_steps"])

    def stop(self, drain: bool, timeout: float | None) -> None:
        self.client.stop(drain, timeout)


@dataclass
class Live:
    url: str
    engine: EngineView
    server: DrainingServer
    thread: threading.Thread

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60.0, **kw)

    def stop(self) -> None:
        # engine first: whatever is still queued or running is answered 'shutdown' at once, so
        # uvicorn's shutdown finds no handler left waiting
        self.engine.stop(drain=False, timeout=10)
        self.server.should_exit = True
        self.thread.join(30)


def start_live(api_key: str | None = None, max_body_bytes: int = 64 * 1024, **config) -> Live:
    """The tiny model's engine in its own process (as `ttsperf serve` runs it) behind the app."""
    config.setdefault("max_batch", 8)
    engine = EngineClient(CoreSpec(TINY, EngineConfig(**config))).start()
    app = create_app(engine, api_key, max_body_bytes=max_body_bytes)
    server = make_server(app, "127.0.0.1", 0, drain_timeout=30, log_level="warning")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the server to start")
    host, port = sock.getsockname()
    return Live(f"http://{host}:{port}", EngineView(engine), server, thread)


class ServeProcess:
    """`ttsperf serve ARGS --port 0` in a subprocess on loopback; stderr collected line by line."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120.0):
        cmd = [sys.executable, "-c", "from ttsperf.cli.main import app; app()", "serve", "--port", "0", *args]
        out, err = subprocess.DEVNULL, subprocess.PIPE
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        self.log: list[str] = []
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()
        started = lambda: self._announced() is not None or self.proc.poll() is not None  # noqa: E731
        wait_for(started, timeout, "`ttsperf serve` to start")
        if not self._announced():
            raise AssertionError("`ttsperf serve` exited before serving:\n" + "".join(self.log))
        self.url = self._announced().split("serving on ")[1].split()[0]
        self.pid = self.proc.pid

    def _pump(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)

    def _announced(self) -> str | None:
        return next((line for line in self.log if "serving on http://" in line), None)

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kw.pop("timeout", 120.0), **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def open_request(url: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> socket.socket:
    """Send a POST on a raw socket and leave the answer unread: closing the socket is a client that
    goes away mid-request (httpx cannot abandon a buffered request on demand)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    lines.append(f"Content-Length: {len(body)}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return sock


def scrape(client: httpx.Client) -> dict[str, float]:
    """/metrics as {sample name{labels}: value}, e.g. 'ttsperf_batch_size_bucket{le="1"}'."""
    response = client.get("/metrics")
    assert response.status_code == 200
    return parse_metrics(response.text)


def parse_metrics(text: str) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


class RunningPeak:
    """The most requests the engine held in its batch at once while the block ran (polled)."""

    def __init__(self, engine: EngineView):
        self.engine, self.peak = engine, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.engine.running())
            time.sleep(0.0005)

    def __enter__(self) -> RunningPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
