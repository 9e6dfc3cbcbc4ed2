"""How much load can the client generate? `bench`, Locust and the guide's script, in one run, against
the same minimal loopback endpoint (ttsperf.bench.mock_server, service time 0, ~1 s 8 kHz WAV).

    .venv/bin/pip install 'locust>=2.20'     # optional: without it the Locust row says so
    .venv/bin/python benchmarks/client_capacity.py

Rows: bench paced (open loop, constant arrivals): the highest rate at which it and every lower rate
kept send lag p99 under 5 ms; bench closed loop at 32 in flight (as fast as it can); Locust
FastHttpUser, headless, 32 users with no wait (its fastest); the guide's script, 2,000 requests
fired at once (requests / wall time). All single-process, on the same machine, one after another.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import MockServer, machine  # noqa: E402
from guide_vs_bench import GUIDE_SCRIPT  # noqa: E402

from ttsperf.bench.api import BenchConfig, run_bench  # noqa: E402

TEXT = "您的订单已经发货了。"
LOCUSTFILE = """from locust import FastHttpUser, constant, task
class TTS(FastHttpUser):
    wait_time = constant(0)
    @task
    def invoke(self):
        self.client.post("/invoke", json={"text": %r})
"""


def bench_paced(url: str, texts: str) -> tuple[float | None, list[str]]:
    best, notes = None, []
    for rate in (400, 800, 1200, 1600, 2000, 2400, 3200, 4000, 4800, 6400):
        n = min(3000, rate * 3)
        p = run_bench(BenchConfig(urls=[url], rate=[float(rate)], arrival="constant", requests=n, warmup=50,
                                  texts=texts, gpu=False)).points[0]  # fmt: skip
        lag99 = p.queue_s.p99
        notes.append(f"{rate}/s: lag p99 {1000 * lag99:.2f} ms, sent {p.achieved_send_rate:.0f}/s")
        if lag99 is None or lag99 >= 0.005 or p.successes != p.requests:
            break
        best = float(rate)
    return best, notes


def locust_rate(url: str, tmp: Path, users: int = 32, seconds: int = 10) -> str:
    exe = shutil.which("locust", path=str(Path(sys.executable).parent)) or shutil.which("locust")
    if exe is None:
        return "not installed (pip install 'locust>=2.20')"
    (tmp / "locustfile.py").write_text(LOCUSTFILE % TEXT, encoding="utf-8")
    cmd = [exe, "-f", str(tmp / "locustfile.py"), "--headless", "-u", str(users), "-r", str(users),
           "-t", f"{seconds}s", "--host", url, "--csv", str(tmp / "loc"), "--only-summary"]  # fmt: skip
    subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    with open(tmp / "loc_stats.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["Name"] == "Aggregated":
                rps, count, failed = float(row["Requests/s"]), row["Request Count"], row["Failure Count"]
                return f"{rps:.0f} req/s ({count} requests, {failed} failed)"
    return "no Aggregated row in Locust's CSV"


def guide_rate(url: str, tmp: Path, n: int = 2000) -> str:
    script = tmp / "benchmark.py"
    script.write_text(GUIDE_SCRIPT.format(url=url, requests=n), encoding="utf-8")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    printed = dict(line.split(": ", 1) for line in out.strip().splitlines())
    said = printed["Throughput"]
    return f"{n / wall:.0f} req/s ({n} in {wall:.1f} s incl. start-up; it prints Throughput {said})"


def main() -> None:
    with (
        tempfile.TemporaryDirectory() as d,
        MockServer("--service-time", "0", "--sample-rate", "8000") as srv,
    ):
        tmp = Path(d)
        texts = tmp / "t.txt"
        texts.write_text(TEXT, encoding="utf-8")
        paced, notes = bench_paced(srv.url, str(texts))
        closed = run_bench(BenchConfig(urls=[srv.url], concurrency=[32], requests=4000, warmup=100,
                                       texts=str(texts), gpu=False)).points[0]  # fmt: skip
        loc = locust_rate(srv.url, tmp)
        guide = guide_rate(srv.url, tmp)
    print(f"machine: {machine()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print()
    print("| client | rate on a no-op loopback endpoint |")
    print("|---|---|")
    print(f"| `bench` open loop, highest rate with send-lag p99 < 5 ms | {paced} req/s |")
    print(f"| `bench` closed loop, 32 in flight, audio checked | {closed.throughput_rps:.0f} req/s |")
    print(f"| Locust FastHttpUser, 32 users, no wait, headless | {loc} |")
    print(f"| the guide's script | {guide} |")
    print()
    print("bench paced steps: " + "; ".join(notes))
    print(json.dumps({"paced": paced, "closed": closed.throughput_rps, "locust": loc, "guide": guide}))


if __name__ == "__main__":
    main()
