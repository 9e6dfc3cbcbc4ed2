"""The guide's load-test script and `ttsperf bench`, side by side, on one server of known behaviour.

    .venv/bin/python benchmarks/guide_vs_bench.py [--requests 1000] [--service-time 0.05]

The server (ttsperf.bench.mock_server) has ONE slot, like the official ChatTTS examples, and holds
it S seconds per request, so its true throughput is 1/S requests/s whatever the client does. The
guide's script is run as the guide prints it (only URL and REQUESTS filled in); `bench` is run at
the concurrency the guide meant (CONCURRENCY = 20). The table shows what each prints, both
throughput formulas on bench's own run, and the in-flight count the server actually saw.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import MockServer, machine  # noqa: E402

from ttsperf.bench.api import BenchSettings, run_bench  # noqa: E402

# The guide's benchmark.py, line for line (its one-line rendering in the seed text, re-broken), plus
# one marked print of the same throughput value with more decimals (the guide's .1f rounds it to 0.0).
GUIDE_SCRIPT = """import asyncio, aiohttp, time, statistics
URL = "{url}/invoke"
CONCURRENCY = 20
REQUESTS = {requests}
PAYLOAD = {{"text": "你好，这是一段用于压测的文本，长度八秒左右。"}}
async def fetch(session):
    t0 = time.perf_counter()
    async with session.post(URL, json=PAYLOAD) as resp:
        await resp.read()
    return time.perf_counter() - t0
async def main():
    latencies = []
    async with aiohttp.ClientSession() as session:
        tasks = [fetch(session) for _ in range(REQUESTS)]
        for coro in asyncio.as_completed(tasks):
            latencies.append(await coro)
    latencies.sort()
    print(f"P50: {{latencies[int(REQUESTS*0.5)]*1000:.0f}} ms")
    print(f"P99: {{latencies[int(REQUESTS*0.99)]*1000:.0f}} ms")
    print(f"Throughput: {{REQUESTS/sum(latencies):.1f}} req/s")
    print(f"Unrounded: {{REQUESTS/sum(latencies):.4f}} req/s")  # our addition: the same value, 4 decimals
asyncio.run(main())
"""


def stats(url: str) -> dict:
    with urllib.request.urlopen(url + "/stats", timeout=5) as r:
        return json.load(r)


def reset(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url + "/reset", method="POST"), timeout=5).read()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--service-time", type=float, default=0.05)
    a = ap.parse_args()
    S, n = a.service_time, a.requests
    with MockServer("--slots", "1", "--service-time", str(S)) as srv:
        with tempfile.TemporaryDirectory() as tmp:
            script = Path(tmp) / "benchmark.py"
            script.write_text(GUIDE_SCRIPT.format(url=srv.url, requests=n), encoding="utf-8")
            reset(srv.url)
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, str(script)], capture_output=True, text=True, check=True
            ).stdout
            guide_wall = time.perf_counter() - t0
            guide_inflight = stats(srv.url)["max_in_flight"]
        guide = dict(line.split(": ", 1) for line in out.strip().splitlines())
        reset(srv.url)
        run = run_bench(BenchSettings(urls=[srv.url], concurrency=[20], requests=n, gpu=False))
        bench_inflight = stats(srv.url)["max_in_flight"]
    p = run.points[0]
    print(f"machine: {machine()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"server: ttsperf.bench.mock_server --slots 1 --service-time {S}", end="")
    print(f"  (true throughput 1/S = {1 / S:.1f} req/s)")
    print()
    print("| | guide's script (as printed) | `ttsperf bench --concurrency 20` | true value |")
    print("|---|---|---|---|")
    unused = "(CONCURRENCY=20 unused; aiohttp's pool of 100)"
    row = f"| requests in flight (server's count) | {guide_inflight} {unused} | {bench_inflight}"
    print(row + " | the client's choice |")
    print(f"| throughput req/s | {guide['Throughput'].split()[0]} (n / sum(latencies); "
          f"unrounded {guide['Unrounded'].split()[0]}) "
          f"| {p.throughput_rps:.2f} (successes / window) | {1 / S:.1f} |")  # fmt: skip
    print(f"| guide's formula on bench's own run | | {p.naive_throughput_rps:.3f} "
          f"(= true / {p.throughput_rps / p.naive_throughput_rps:.1f}) | |")  # fmt: skip
    theory = f"20 x S = {20 * S * 1000:.0f} at C=20"
    print(f"| P50 ms | {guide['P50'].split()[0]} | {1000 * p.latency_s.p50:.0f} | {theory} |")
    p99 = "n/a" if p.latency_s.p99 is None else f"{1000 * p.latency_s.p99:.0f}"
    print(f"| P99 ms | {guide['P99'].split()[0]} | {p99} (n={p.latency_s.n}) | |")
    print(f"| wall time s | {guide_wall:.1f} | {p.window_s:.1f} (window) | n x S = {n * S:.1f} |")


if __name__ == "__main__":
    main()
