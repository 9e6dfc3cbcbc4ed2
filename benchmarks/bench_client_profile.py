"""Where does `bench`'s own CPU go? cProfile of one open-loop point against a no-op loopback endpoint.

    flock /tmp/ttsperf-cpu.lock chrt -f 10 .venv/bin/python benchmarks/bench_client_profile.py --rate 1500

Prints the send lag it achieved under the profiler, how much of the main thread's time was spent
idle in epoll (the rest is the client's work), and the top functions by own time. Times under a
profiler are inflated; compare runs of this script with each other, not with the other tables.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import MockServer, machine  # noqa: E402

from ttsperf.bench.api import BenchSettings, run_bench  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=1500.0)
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    with (
        MockServer("--service-time", "0", "--sample-rate", "8000") as srv,
        tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8") as f,
    ):
        f.write("您的订单已经发货了。")
        f.flush()
        cfg = BenchSettings(urls=[srv.url], rate=[a.rate], arrival="constant", requests=a.requests, warmup=50,
                          texts=f.name, gpu=False)  # fmt: skip
        prof = cProfile.Profile()
        prof.enable()
        p = run_bench(cfg).points[0]
        prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt
    idle = sum(v[2] for k, v in stats.stats.items() if k[2] == "<method 'poll' of 'select.epoll' objects>")
    n = p.requests + 50
    print(f"machine: {machine()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"sent {p.achieved_send_rate:.0f}/s, send lag p99 {1000 * (p.queue_s.p99 or 0):.2f} ms, "
          f"{p.successes}/{p.requests} ok")  # fmt: skip
    busy_us = 1e6 * (total - idle) / n
    print(f"main thread: {total:.2f} s, idle in epoll {idle:.2f} s; busy {busy_us:.0f} us/request")
    stats.sort_stats("tottime").print_stats(a.top)


if __name__ == "__main__":
    main()
