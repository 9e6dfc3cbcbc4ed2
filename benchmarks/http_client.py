"""Does bench's own HTTP client change what bench reports? http1 (the hand-written one) against
aiohttp, side by side, at the rates TTS servers see (1-1,000 req/s), against the mock and a real
`ttsperf serve --synthetic --config tiny` on loopback.

    flock /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/http_client.py [--quick] [--aiohttp-from REV]

Per server and offered rate (open loop, constant arrivals, the same schedule for both), the two
clients alternate (A B, B A, A B), 3 repeats each; printed per figure bench reports: the median over
repeats and the spread (min-max); then the figures whose two spreads do not overlap.
Client CPU is the bench process's CPU time (all threads, audio checks included) per request.
The aiohttp client is no longer in the tree (this comparison is why): it is loaded from the last git
revision that had it (`bench/aio_client.py`), or from `--aiohttp-from REV`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import MockServer, machine  # noqa: E402

from ttsperf.bench.adapters import AdapterOptions, make_adapter  # noqa: E402
from ttsperf.bench.http1 import Client as Http1Client  # noqa: E402
from ttsperf.bench.metrics import summarize  # noqa: E402
from ttsperf.bench.results import Strategy  # noqa: E402
from ttsperf.bench.runner import Runner  # noqa: E402
from ttsperf.bench.texts import load_workload  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# (figure, how to read it from a PointResult, unit scale)
FIGURES = [
    ("E2E p50 ms", lambda p: p.latency_s.p50, 1000),
    ("E2E p99 ms", lambda p: p.latency_s.p99, 1000),
    ("TTFA p50 ms", lambda p: p.ttfa_s.p50, 1000),
    ("TTFA p99 ms", lambda p: p.ttfa_s.p99, 1000),
    ("send lag p99 ms", lambda p: p.queue_s.p99, 1000),
    ("achieved req/s", lambda p: p.throughput_rps, 1),
    ("errors", lambda p: p.requests - p.successes, 1),
]


def load_clients(rev: str | None) -> dict[str, type]:
    """bench's http1 from the tree; the aiohttp client it was measured against from git history:
    the revision before the one that deleted it, or `rev`."""
    path = "src/ttsperf/bench/aio_client.py"
    if rev is None:
        git = ["git", "-C", str(ROOT), "rev-list", "-n", "1", "HEAD", "--", path]
        deleted = subprocess.run(git, check=True, capture_output=True, text=True).stdout.strip()
        if not deleted:
            raise SystemExit(f"no commit in this checkout's history touches {path}: give --aiohttp-from REV")
        rev = f"{deleted}^"
    git = ["git", "-C", str(ROOT), "show", f"{rev}:{path}"]
    src = subprocess.run(git, check=True, capture_output=True, text=True).stdout
    mod = types.ModuleType("aio_client_from_git")
    exec(compile(src, f"{rev}:{path}", "exec"), mod.__dict__)
    return {"http1": Http1Client, "aiohttp": mod.Client}


def requests_for(rate: float, quick: bool) -> tuple[int, int]:
    """(measured, warm-up): 20 s of sending below 100 req/s (p50 needs 20 requests, p90 100, p99
    1,000: bench reports no percentile it cannot resolve), 1,000+ requests from 100 req/s up."""
    if quick:
        return max(3, int(rate * 3)), 2
    n = int(20 * rate) if rate < 100 else max(1000, int(2 * rate))
    return n, max(2, n // 10)


def one_point(client: type, url: str, rate: float, n: int, warm: int) -> tuple[object, float]:
    adapter = make_adapter("openai", AdapterOptions(stream=True))
    workload = load_workload(None, "zh-short")
    strategy = Strategy(kind="rate", rate=rate, arrival="constant")

    async def go():
        async with Runner(adapter, [url], workload, timeout_s=60, client=client) as r:
            return await r.run_point(0, strategy, n, None, warmup=warm)

    cpu0 = time.process_time()
    recs = asyncio.run(go())
    cpu_ms = 1000 * (time.process_time() - cpu0) / (n + warm)
    return summarize(strategy, recs), cpu_ms


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """`ttsperf serve --synthetic --config tiny` in a subprocess, ready when /readyz says 200."""

    def __init__(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "ttsperf", "serve", "--synthetic", "--config", "tiny",
               "--port", str(port), "--max-queue", "4096", "--log-level", "warning"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        self.proc.kill()
        raise SystemExit("ttsperf serve did not become ready in 180 s")

    def __enter__(self) -> Serve:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def measure(name: str, url: str, rates: list[float], clients: dict[str, type], repeats: int, quick: bool):
    rows = []
    for rate in rates:
        n, warm = requests_for(rate, quick)
        got: dict[str, list[tuple]] = {c: [] for c in clients}
        for rep in range(repeats):
            order = list(clients) if rep % 2 == 0 else list(clients)[::-1]
            for c in order:
                p, cpu_ms = one_point(clients[c], url, rate, n, warm)
                got[c].append((p, cpu_ms))
                e2e, errors = fmt(p.latency_s.p50, 1000), p.requests - p.successes
                print(f"{name} {rate:g}/s {c} #{rep + 1}: E2E p50 {e2e} ms, {p.throughput_rps:.1f} req/s, "
                      f"{errors} errors", file=sys.stderr)  # fmt: skip
        rows.append((name, rate, n, warm, got))
    return rows


def fmt(x: float | None, scale: float) -> str:
    if x is None:
        return "n/a"
    v = x * scale
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"


def cell(values: list[float | None], scale: float) -> tuple[str, tuple[float, float] | None]:
    xs = [v for v in values if v is not None]
    if not xs:
        return "n/a", None
    if all(isinstance(x, int) for x in xs):  # counts (errors)
        return f"{statistics.median(xs):g} ({min(xs)}-{max(xs)})", (min(xs), max(xs))
    med = statistics.median(xs)
    return f"{fmt(med, scale)} ({fmt(min(xs), scale)}-{fmt(max(xs), scale)})", (min(xs), max(xs))


def table(rows: list, clients: dict[str, type]) -> None:
    """One row per server, rate and client: median (min-max) of each figure; then what differs."""
    figs = [*FIGURES, ("client CPU ms/req", None, 1000)]
    print("| server | req/s | n | client | " + " | ".join(f[0] for f in figs) + " |")
    print("|---|---|---|---|" + "---|" * len(figs))
    differs = []
    for server, rate, n, _warm, got in rows:
        ranges: dict[str, list] = {}
        for c in clients:
            cells = []
            for label, read, scale in figs:
                vals = [cpu / 1000 if read is None else read(p) for p, cpu in got[c]]
                text, rng = cell(vals, scale)
                cells.append(text)
                ranges.setdefault(label, []).append(rng)
            print(f"| {server} | {rate:g} | {n} | {c} | " + " | ".join(cells) + " |")
        for label, (a, b) in ranges.items():
            if a is not None and b is not None and (a[1] < b[0] or b[1] < a[0]):
                differs.append(f"{server} {rate:g} req/s {label}")
    print()
    print("spreads that do not overlap: " + ("; ".join(differs) if differs else "none"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1 repeat, a few requests per rate")
    ap.add_argument("--aiohttp-from", default=None, help="git revision to load bench/aio_client.py from")
    ap.add_argument("--rates", default="1,10,100,1000", help="offered req/s against the mock")
    ap.add_argument("--serve-rates", default="1,4", help="offered req/s against ttsperf serve")
    a = ap.parse_args()
    clients = load_clients(a.aiohttp_from)
    repeats = 1 if a.quick else 3
    load0 = os.getloadavg()
    rows = []
    with MockServer("--service-time", "0.05") as srv:
        rows += measure("mock", srv.url, [float(r) for r in a.rates.split(",")], clients, repeats, a.quick)
    if a.serve_rates:
        with Serve() as srv:
            rates = [float(r) for r in a.serve_rates.split(",")]
            rows += measure("serve", srv.url, rates, clients, repeats, a.quick)
    load1 = os.getloadavg()
    print(f"machine: {machine()}")
    print(
        f"load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load0)}; "
        f"after: {', '.join(f'{x:.2f}' for x in load1)}"
    )
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print("mock: --service-time 0.05, openai adapter, stream=true, WAV; serve: --synthetic --config tiny")
    print()
    table(rows, clients)


if __name__ == "__main__":
    main()
