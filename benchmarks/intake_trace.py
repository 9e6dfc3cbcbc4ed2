"""Where a streamed request's time goes before its first chunk, on `ttsperf serve`, stage by stage.

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/intake_trace.py [--streams 64]
        [--no-audio-check] [--switch-interval 0.0005]

Runs `ttsperf serve --synthetic --config tiny --max-batch 64` on CPU 0 (one torch thread) with
timestamps added from outside (this file re-runs itself as the server and wraps, without changing
them, the HTTP protocol's data_received, the handler's submit, the engine's prefill, a handle's
first chunk put by the engine and received by the event loop), and `ttsperf bench --adapter
openai --stream --concurrency N` in this process on CPU 1. Both read the same monotonic clock, so
bench's send and first-audio times line up with the server's. The i-th request sent is paired
with the i-th received, submitted, ... (a wave's order may differ inside it: distributions, not
single requests, are compared). The warm-up wave is left out.

plan's simulator charges the event loop's intake of each request before the engine can queue it
(simulate.EventLoop); this is what measured it (docs/PERFORMANCE.md, "The event loop's work").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def serve_traced(out: str, switch_interval: float | None) -> None:
    """The server, its stages timestamped; written to `out` when it exits (SIGTERM drains)."""
    import atexit

    from uvicorn.protocols.http.h11_impl import H11Protocol

    import ttsperf.server.app as app
    import ttsperf.server.synthesis as synthesis
    from ttsperf.cli.main import app as cli
    from ttsperf.engine.engine import Engine
    from ttsperf.engine.types import AudioChunk, RequestHandle

    if switch_interval is not None:
        sys.setswitchinterval(switch_interval)
    requests: list[dict[str, float]] = []
    received: list[float] = []  # a request's first bytes (POST), not the readiness probes
    prefills: list[tuple[float, float, int]] = []

    def data_received(self, data, _orig=H11Protocol.data_received):
        if data[:5] == b"POST ":
            received.append(time.monotonic())
        _orig(self, data)

    def submit(engine, request, field, _orig=synthesis.submit):
        t = time.monotonic()
        handle = _orig(engine, request, field)
        handle.trace = {"submit": t}
        requests.append(handle.trace)
        return handle

    def prefill(self, handles, _orig=Engine._prefill):
        t = time.monotonic()
        for h in handles:
            if hasattr(h, "trace"):
                h.trace["prefill"] = t
        _orig(self, handles)
        prefills.append((t, time.monotonic() - t, len(handles)))

    def put(self, event, _orig=RequestHandle.put):
        tr = getattr(self, "trace", None)
        if tr is not None and isinstance(event, AudioChunk) and "put" not in tr:
            tr["put"] = time.monotonic()
        _orig(self, event)

    async def next_event(self, _orig=RequestHandle.next_event):
        event = await _orig(self)
        tr = getattr(self, "trace", None)
        if tr is not None and isinstance(event, AudioChunk) and "loop" not in tr:
            tr["loop"] = time.monotonic()
        return event

    H11Protocol.data_received = data_received
    synthesis.submit = app.submit = submit
    Engine._prefill = prefill
    RequestHandle.put = put
    RequestHandle.next_event = next_event

    def dump() -> None:
        Path(out).write_text(json.dumps({"requests": requests, "received": received, "prefills": prefills}))

    atexit.register(dump)
    cli(prog_name="ttsperf", args=sys.argv[sys.argv.index("--") + 1 :])


def pct(x: np.ndarray) -> str:
    p10, p50, p90 = np.percentile(x, [10, 50, 90]) * 1e3
    return f"{p10:7.1f} {p50:7.1f} {p90:7.1f} {x.mean() * 1e3:7.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--requests", type=int, default=192)
    ap.add_argument("--no-audio-check", action="store_true", help="bench without its audio checks")
    ap.add_argument("--switch-interval", type=float, help="the server's sys.setswitchinterval (s)")
    ap.add_argument("--serve-traced", help=argparse.SUPPRESS)
    args, _ = ap.parse_known_args()
    if args.serve_traced:
        serve_traced(args.serve_traced, args.switch_interval)
        return

    from _bench_common import machine, wait_ready

    import ttsperf.bench.runner as runner
    from ttsperf.bench.api import run_bench
    from ttsperf.bench.settings import BenchSettings
    from ttsperf.cli.demo_serving import free_port, stop_server

    epochs: list[float] = []  # bench's clock origin, to put its times on the server's clock

    def init(self, *a, _orig=runner.Runner.__init__, **kw):
        _orig(self, *a, **kw)
        epochs.append(self.epoch)

    runner.Runner.__init__ = init
    out = Path(tempfile.mkdtemp(prefix="intake-trace-")) / "trace.json"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server_args = ["serve", "--synthetic", "--config", "tiny", "--port", str(port), "--max-batch", "64",
                   "--max-queue", "4096", "--log-level", "warning"]  # fmt: skip
    cmd = [sys.executable, __file__, "--serve-traced", str(out)]
    if args.switch_interval is not None:
        cmd += ["--switch-interval", str(args.switch_interval)]
    server = subprocess.Popen(
        [*cmd, "--", *server_args], env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=lambda: os.sched_setaffinity(0, {0}),
    )  # fmt: skip
    os.sched_setaffinity(0, {1} if (os.cpu_count() or 1) > 1 else {0})
    try:
        wait_ready(url)
        cfg = BenchSettings(urls=[url], adapter="openai", stream=True, requests=args.requests,
                            warmup=args.streams, gpu=False, timeout=600, concurrency=[args.streams],
                            audio_check=not args.no_audio_check)  # fmt: skip
        run = run_bench(cfg)
    finally:
        stop_server(server)
    trace = json.loads(out.read_text())
    done = [r for r in trace["requests"] if "loop" in r]
    ok = sorted((r for r in run.records if r.ok), key=lambda r: r.t_send)
    n, skip, ep = min(len(done), len(ok)), args.streams, epochs[-1]
    col = {k: np.sort([r[k] for r in done])[:n] for k in ("submit", "prefill", "put", "loop")}
    sent = np.sort([ep + r.t_send for r in ok])[:n]
    heard = np.sort([ep + r.t_first_audio for r in ok])[:n]
    recv = np.sort(trace["received"])[:n]

    def stage(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (b - a)[skip:]

    print(f"machine: {machine()}")
    print(
        f"command: ttsperf serve --synthetic --config tiny --max-batch 64 (CPU 0, 1 thread, traced); "
        f"ttsperf bench URL --adapter openai --stream --concurrency {args.streams} --requests "
        f"{args.requests} --warmup {args.streams}{' (no audio checks)' if args.no_audio_check else ''} "
        f"(CPU 1); switch interval {args.switch_interval or sys.getswitchinterval():g} s"
    )
    print(f"{n - skip} requests after the warm-up wave; ms:        p10     p50     p90    mean")
    rows = [
        ("bench: sent -> first audio", stage(sent, heard)),
        ("sent -> bytes at the server", stage(sent, recv)),
        ("bytes -> engine's queue (intake)", stage(recv, col["submit"])),
        ("queued -> prefill", stage(col["submit"], col["prefill"])),
        ("prefill -> first chunk put", stage(col["prefill"], col["put"])),
        ("put -> event loop has it", stage(col["put"], col["loop"])),
        ("event loop -> bench reads it", stage(col["loop"], heard)),
    ]
    for name, x in rows:
        print(f"{name:<40} {pct(x)}")
    gaps = np.diff(np.sort([r["submit"] for r in done])) * 1e3
    sizes = [p[2] for p in trace["prefills"]]
    print(
        f"submits of a wave {np.median(gaps[gaps < 5]):.2f} ms apart (median gap under 5 ms); "
        f"{len(sizes)} prefills of {np.mean(sizes):.1f} rows"
    )


if __name__ == "__main__":
    main()
