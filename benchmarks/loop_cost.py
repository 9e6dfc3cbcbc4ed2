"""The server's event loop: CPU seconds per request received and per chunk sent, apart.

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/loop_cost.py [--reps 3]

plan's simulator charged `ttsperf serve`'s event loop per chunk only (0.36 ms, measured with the
per-request work spread over 8 chunks). Where that work happens matters for time to first audio:
a request's intake (HTTP, validation, the tokenizer) comes before the engine can queue it. This
separates the two (steptime.DEFAULT_T_REQUEST_S and DEFAULT_T_CHUNK_S are its fit):
`ttsperf serve --synthetic --config tiny --max-batch 64` on CPU 0 (one torch thread), `ttsperf
bench --adapter openai --stream --concurrency 64` on CPU 1 with built-in text sets of few and
many chunks per request, the CPU seconds of the server's main thread (uvicorn's event loop) over
each run; then a least-squares fit of loop CPU = requests x t_request + chunks x t_chunk over
every run. Thread CPU time is counted in
10 ms ticks: runs are long enough that a tick is under 2% of what they measure.

Not under `chrt -f` (a SCHED_FIFO server on one CPU starves its own event loop: plan_accuracy.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import machine, wait_ready  # noqa: E402

from ttsperf.bench.api import run_bench  # noqa: E402
from ttsperf.bench.settings import BenchSettings  # noqa: E402
from ttsperf.cli.demo_serving import free_port, stop_server  # noqa: E402


def loop_cpu(pid: int) -> float:
    """CPU seconds of the server's main thread: uvicorn's event loop."""
    return next(t.user_time + t.system_time for t in psutil.Process(pid).threads() if t.id == pid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="runs of each text set, alternating")
    ap.add_argument("--text-sets", default="guide,zh-short,en-long", help="bench --text-set values")
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--requests", type=int, default=192, help="measured requests a run (after a wave)")
    args = ap.parse_args()
    sets = args.text_sets.split(",")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "ttsperf", "serve", "--synthetic", "--config", "tiny", "--port", str(port),
           "--max-batch", str(args.streams), "--max-queue", "4096", "--log-level", "warning"]  # fmt: skip
    server = subprocess.Popen(
        cmd, env=env, preexec_fn=lambda: os.sched_setaffinity(0, {0}),
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    os.sched_setaffinity(0, {1} if (os.cpu_count() or 1) > 1 else {0})
    runs: list[tuple[str, int, int, float, float]] = []
    t_start = time.monotonic()
    try:
        wait_ready(url)
        for rep in range(args.reps):
            for text_set in sets:
                print(f"run {rep + 1}/{args.reps}, {text_set} ...", file=sys.stderr, flush=True)
                cfg = BenchSettings(urls=[url], adapter="openai", stream=True, requests=args.requests,
                                    warmup=args.streams, gpu=False, timeout=600,
                                    concurrency=[args.streams], text_set=text_set)  # fmt: skip
                cpu0 = loop_cpu(server.pid)
                run = run_bench(cfg)
                cpu = loop_cpu(server.pid) - cpu0
                n = len(run.records)  # the warm-up's requests ran through the loop too
                chunks = sum(r.chunks for r in run.records)
                audio = float(np.median([r.audio_s or 0.0 for r in run.records]))
                runs.append((text_set, n, chunks, cpu, audio))
    finally:
        stop_server(server)
    print(f"machine: {machine()}; {time.monotonic() - t_start:.0f} s")
    print(
        "command: ttsperf serve --synthetic --config tiny --max-batch "
        f"{args.streams} (CPU 0, 1 thread); ttsperf bench URL --adapter openai --stream "
        f"--concurrency {args.streams} --requests {args.requests} --warmup {args.streams} "
        "--text-set SET (CPU 1)"
    )
    print("text set   requests  chunks audio s loop CPU s  ms/req ms/chunk")
    for text_set, n, chunks, cpu, audio in runs:
        print(
            f"{text_set:<10} {n:>8} {chunks:>7} {audio:>7.2f} {cpu:>10.2f} "
            f"{cpu / n * 1e3:>7.2f} {cpu / chunks * 1e3:>8.3f}"
        )
    a = np.array([[n, c] for _, n, c, _, _ in runs], float)
    y = np.array([cpu for *_, cpu, _ in runs])
    (t_req, t_chunk), *_ = np.linalg.lstsq(a, y, rcond=None)
    resid = y - a @ np.array([t_req, t_chunk])
    print(
        f"fit over {len(runs)} runs: t_request {t_req * 1e3:.2f} ms per request, t_chunk "
        f"{t_chunk * 1e3:.3f} ms per chunk (residual RMS {np.sqrt(np.mean(resid**2)):.2f} s of "
        f"{y.mean():.2f} s)"
    )


if __name__ == "__main__":
    main()
