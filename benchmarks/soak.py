"""Soak: `ttsperf serve --synthetic --config tiny` under open-loop load at 70% of its measured
capacity for N minutes; errors, latency drift (first vs last window) and the server's RSS growth.

    .venv/bin/python benchmarks/soak.py [--minutes 30] [--load 0.7] [--max-batch 8] [-o runs/soak]

1. start `ttsperf serve` in its own process on loopback (the same helper `ttsperf demo` uses);
2. capacity: a closed loop at twice the batch (every slot busy, a queue behind it) for
   `--capacity-seconds`, through `ttsperf bench`'s library (`run_bench`): successes / window;
3. soak: Poisson arrivals at `--load` x capacity for `--minutes`, the same bench library, with the
   server's RSS sampled by bench's own telemetry (psutil on the server pid) and this machine's
   load average sampled beside it (other jobs share the cores; the figures say how busy it was);
4. print the table and the command; write run.json / requests.csv (bench's outputs) and
   soak.json (the table's figures) to `-o`.
Not a timing benchmark of the model: it asks whether the server stays healthy over time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from ttsperf.bench.api import BenchSettings, run_bench  # noqa: E402
from ttsperf.bench.results import BenchRun, write_outputs  # noqa: E402
from ttsperf.cli.bench import _run_with_progress  # noqa: E402
from ttsperf.cli.demo_serving import start_server, stop_server  # noqa: E402

MIB = 1024 * 1024


class LoadAverage:
    """This machine's 1-minute load average every `interval` s while the block runs."""

    def __init__(self, interval: float = 10.0):
        self.interval, self.samples = interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> LoadAverage:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def window_stats(run: BenchRun, lo: float, hi: float) -> dict:
    """Requests sent in [lo, hi) on the run clock: count, errors, P50/P99 of end-to-end latency."""
    recs = [r for r in run.records if not r.warmup and r.t_send is not None and lo <= r.t_send < hi]
    e2e = [r.t_end - r.t_send for r in recs if r.ok]
    return {"sent": len(recs), "errors": sum(1 for r in recs if not r.ok), "p50_s": pct(e2e, 50),
            "p99_s": pct(e2e, 99)}  # fmt: skip


def rss_stats(run: BenchRun, lo: float, hi: float) -> float | None:
    """Median server RSS (MiB) over the telemetry samples in [lo, hi)."""
    rss = [s["proc_rss_bytes"] / MIB for s in run.telemetry if "proc_rss_bytes" in s and lo <= s["t"] < hi]
    return pct(rss, 50)


def summarize(
    run: BenchRun, minutes: float, window_min: float, capacity: float, rate: float, load: list[float]
) -> dict:
    measured = [r for r in run.records if not r.warmup]
    t0 = min(r.t_send for r in measured if r.t_send is not None)
    t1 = t0 + minutes * 60
    w = window_min * 60
    first, last = window_stats(run, t0, t0 + w), window_stats(run, t1 - w, t1 + 1e9)
    errors: dict[str, int] = {}
    for r in measured:
        if not r.ok:
            errors[r.error or "other"] = errors.get(r.error or "other", 0) + 1
    rss_all = [s["proc_rss_bytes"] / MIB for s in run.telemetry if "proc_rss_bytes" in s and s["t"] >= t0]
    rss_first, rss_last = rss_stats(run, t0, t0 + w), rss_stats(run, t1 - w, t1 + 1e9)
    ok = [r for r in measured if r.ok]
    return {
        "minutes": minutes, "window_minutes": window_min, "capacity_rps": capacity, "offered_rps": rate,
        "sent": len(measured), "answered_ok": len(ok), "errors": errors,
        "achieved_rps": len(ok) / (minutes * 60),
        "first_window": first, "last_window": last,
        "rss_mib": {"start": rss_all[0] if rss_all else None, "first_window_median": rss_first,
                    "last_window_median": rss_last, "max": max(rss_all, default=None),
                    "growth": (rss_last - rss_first) if rss_first and rss_last else None},
        "load_average_1m": {"min": min(load, default=None), "mean": float(np.mean(load)) if load else None,
                            "max": max(load, default=None), "cpus": os.cpu_count()},
    }  # fmt: skip


def fmt_ms(s: float | None) -> str:
    return "-" if s is None else f"{1000 * s:.0f} ms"


def print_table(s: dict, command: str) -> None:
    f, la = s["first_window"], s["last_window"]
    w = s["window_minutes"]
    drift = lambda a, b: "-" if a is None or b is None else f"{100 * (b - a) / a:+.1f}%"  # noqa: E731
    rss = s["rss_mib"]
    print(f"\nsoak: ttsperf serve --synthetic --config tiny, {s['minutes']:g} min open loop (Poisson) at "
          f"{s['offered_rps']:.2f} req/s = {s['offered_rps'] / s['capacity_rps']:.0%} "
          f"of the measured capacity {s['capacity_rps']:.2f} req/s")  # fmt: skip
    rows = [
        ("requests sent", str(s["sent"]), ""),
        ("answered 200 with checked audio", str(s["answered_ok"]), ""),
        ("errors", str(sum(s["errors"].values())), json.dumps(s["errors"]) if s["errors"] else ""),
        ("achieved throughput", f"{s['achieved_rps']:.2f} req/s", ""),
        (f"P50 latency first / last {w:g} min", f"{fmt_ms(f['p50_s'])} / {fmt_ms(la['p50_s'])}",
         f"drift {drift(f['p50_s'], la['p50_s'])}"),
        (f"P99 latency first / last {w:g} min", f"{fmt_ms(f['p99_s'])} / {fmt_ms(la['p99_s'])}",
         f"drift {drift(f['p99_s'], la['p99_s'])} (n = {f['sent']} / {la['sent']})"),
        ("server RSS at start / max", f"{rss['start']:.1f} / {rss['max']:.1f} MiB", ""),
        (f"server RSS median first / last {w:g} min", f"{rss['first_window_median']:.1f} / "
         f"{rss['last_window_median']:.1f} MiB", f"growth {rss['growth']:+.1f} MiB"),
        ("load average (1 min) min / mean / max", "{:.2f} / {:.2f} / {:.2f}".format(
            s["load_average_1m"]["min"], s["load_average_1m"]["mean"], s["load_average_1m"]["max"]),
         f"{s['load_average_1m']['cpus']} CPUs, shared with other jobs"),
    ]  # fmt: skip
    for name, value, note in rows:
        print(f"  {name:<42}{value:>22}  {note}")
    print(f"command: {command}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="soak duration (default 30)")
    ap.add_argument("--load", type=float, default=0.7, help="fraction of the measured capacity (default 0.7)")
    ap.add_argument("--max-batch", type=int, default=8, help="the server's --max-batch (default 8)")
    ap.add_argument("--capacity-seconds", type=float, default=60.0, help="closed-loop capacity measurement")
    ap.add_argument("--window-minutes", type=float, default=5.0, help="first/last window for the drift")
    ap.add_argument("-o", "--out", type=Path, default=Path("runs/soak"), help="output directory")
    args = ap.parse_args()
    if not (args.minutes > 0 and 0 < args.load <= 1 and args.max_batch >= 1 and args.capacity_seconds > 0):
        ap.error("--minutes, --capacity-seconds > 0; 0 < --load <= 1; --max-batch >= 1")
    window_min = min(args.window_minutes, args.minutes / 2)
    command = "python benchmarks/soak.py " + " ".join(sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "server.log"
    proc, url = start_server("tiny", "cpu", args.max_batch, log)
    try:
        common = dict(urls=[url], adapter="openai", stream=True, gpu=False, timeout=120.0)
        print(f"capacity: closed loop at {2 * args.max_batch} for {args.capacity_seconds:g} s ...",
              file=sys.stderr)  # fmt: skip
        closed = BenchSettings(**common, concurrency=[2 * args.max_batch], duration=args.capacity_seconds,
                             warmup=args.max_batch)  # fmt: skip
        capacity = run_bench(closed).points[0].throughput_rps
        rate = args.load * capacity
        print(f"capacity {capacity:.2f} req/s; soaking at {rate:.2f} req/s for {args.minutes:g} min ...",
              file=sys.stderr)  # fmt: skip
        cfg = BenchSettings(**common, rate=[rate], arrival="poisson", duration=args.minutes * 60,
                          server_pid=proc.pid, telemetry_interval=5.0, seed=1)  # fmt: skip
        with LoadAverage() as load:
            run = _run_with_progress(cfg, show=sys.stderr.isatty())
    finally:
        stop_server(proc)
    write_outputs(run, args.out)
    summary = summarize(run, args.minutes, window_min, capacity, rate, load.samples)
    summary["command"] = command
    (args.out / "soak.json").write_text(json.dumps(summary, indent=2))
    print_table(summary, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
