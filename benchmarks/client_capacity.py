"""How much load can the client generate? `bench`, Locust and the guide's script, in one run, against
the same minimal loopback endpoint (ttsperf.bench.mock_server, service time 0, ~1 s 8 kHz WAV).

    .venv/bin/pip install 'locust>=2.20'     # optional: without it the Locust column says so
    flock /tmp/ttsperf-cpu.lock chrt -f 10 .venv/bin/python benchmarks/client_capacity.py --runs 3

Columns, per run: bench paced (open loop, constant arrivals, >= 2 s per rate): the highest rate at
which it and every lower rate kept send lag p99 under 5 ms with every response's audio checked;
bench closed loop at 32 in flight (as fast as it can); Locust FastHttpUser, headless, 32 users with
no wait (its fastest; it neither paces nor checks audio); the guide's script, 2,000 requests fired
at once (requests / wall time); and bench paced / Locust. All single-process, on the same machine,
one after another, against one server process.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import MockServer, machine  # noqa: E402
from guide_vs_bench import GUIDE_SCRIPT  # noqa: E402

from ttsperf.bench.api import BenchSettings, run_bench  # noqa: E402

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
    for rate in (1000, 2000, 4000, 6000, 8000, 10_000, 12_000, 14_000, 16_000, 18_000, 20_000, 24_000):
        n = max(3000, rate * 2)  # at least 2 s of sustained sending per rate
        p = run_bench(BenchSettings(urls=[url], rate=[float(rate)], arrival="constant", requests=n, warmup=50,
                                  texts=texts, gpu=False)).points[0]  # fmt: skip
        lag99 = p.queue_s.p99
        notes.append(f"{rate}/s: lag p99 {1000 * lag99:.2f} ms, sent {p.achieved_send_rate:.0f}/s")
        if lag99 is None or lag99 >= 0.005 or p.successes != p.requests:
            break
        best = float(rate)
    return best, notes


def locust_rate(url: str, tmp: Path, users: int = 32, seconds: int = 10) -> tuple[float | None, str]:
    exe = shutil.which("locust", path=str(Path(sys.executable).parent)) or shutil.which("locust")
    if exe is None:
        return None, "not installed (pip install 'locust>=2.20')"
    (tmp / "locustfile.py").write_text(LOCUSTFILE % TEXT, encoding="utf-8")
    cmd = [exe, "-f", str(tmp / "locustfile.py"), "--headless", "-u", str(users), "-r", str(users),
           "-t", f"{seconds}s", "--host", url, "--csv", str(tmp / "loc"), "--only-summary"]  # fmt: skip
    subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    with open(tmp / "loc_stats.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["Name"] == "Aggregated":
                rps, count, failed = float(row["Requests/s"]), row["Request Count"], row["Failure Count"]
                return rps, f"{rps:,.0f} req/s ({count} requests, {failed} failed)"
    return None, "no Aggregated row in Locust's CSV"


def guide_rate(url: str, tmp: Path, n: int = 2000) -> str:
    script = tmp / "benchmark.py"
    script.write_text(GUIDE_SCRIPT.format(url=url, requests=n), encoding="utf-8")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    printed = dict(line.split(": ", 1) for line in out.strip().splitlines())
    said = printed["Throughput"]
    return f"{n / wall:,.0f} req/s (it prints Throughput {said})"


def one_run(tmp: Path) -> dict:
    with MockServer("--service-time", "0", "--sample-rate", "8000") as srv:
        texts = tmp / "t.txt"
        texts.write_text(TEXT, encoding="utf-8")
        paced, notes = bench_paced(srv.url, str(texts))
        closed = run_bench(BenchSettings(urls=[srv.url], concurrency=[32], requests=20_000, warmup=100,
                                       texts=str(texts), gpu=False)).points[0]  # fmt: skip
        loc_rps, loc = locust_rate(srv.url, tmp)
        guide = guide_rate(srv.url, tmp)
    ratio = paced / loc_rps if paced and loc_rps else None
    return {"paced": paced, "closed": closed.throughput_rps, "closed_ok": closed.successes == closed.requests,
            "locust_rps": loc_rps, "locust": loc, "guide": guide, "ratio": ratio, "notes": notes}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1, help="repeat the comparison; prints the median ratio")
    a = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(a.runs):
            runs.append(one_run(Path(d)))
            print(json.dumps(runs[-1]), flush=True)
    print(f"machine: {machine()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print()
    cols = [
        "run",
        "`bench` open loop: highest rate with send-lag p99 < 5 ms",
        "`bench` closed loop, 32 in flight",
        "Locust FastHttpUser, 32 users, no wait",
        "guide's script, 2,000 at once",
        "bench open loop / Locust",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|---|---|---|---|---|---|")
    for k, r in enumerate(runs, 1):
        paced = f"{r['paced']:,.0f} req/s" if r["paced"] else "none"
        closed = f"{r['closed']:,.0f} req/s" + ("" if r["closed_ok"] else " (with errors)")
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "n/a"
        print(f"| {k} | {paced} | {closed} | {r['locust']} | {r['guide']} | {ratio} |")
    ratios = [r["ratio"] for r in runs if r["ratio"]]
    if ratios:
        print(f"\nmedian bench open loop / Locust: {statistics.median(ratios):.2f} over {len(ratios)} runs")
    for k, r in enumerate(runs, 1):
        print(f"run {k} bench paced steps: " + "; ".join(r["notes"]))


if __name__ == "__main__":
    main()
