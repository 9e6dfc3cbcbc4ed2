"""Listeners on one card, served as plan prints it: cold start, plan's own check, then warm loads
(issue 33's GPU run; one command, under 8 minutes on an H200).

    python benchmarks/card_listeners.py --out $OUT            # an H200: the defaults below
    python benchmarks/card_listeners.py --device cpu --config tiny --dtype fp32 --no-cuda-graphs \
        --max-batch 16 --check-users 8 --loads 4,8 --requests 24 --max-requests 48 \
        --out /tmp/dry   # a CPU dry run (--max-requests: bench stops there if the SLO is undecided)

1. `ttsperf serve --synthetic --config chattts --device cuda --dtype fp16 --cuda-graphs
   --max-batch 256 --max-queue 256 --first-chunk-steps 24` (plan's serve command for one H200),
   timed from start to /readyz (ready means warm: every graph is built before);
2. plan's check command against it, fresh: `ttsperf bench URL --adapter openai --stream
   --text-set zh-8s --users 485 --ramp-up 8s --requests 400 --slo ttfa_p99=300ms,underrun_p99=100ms
   --server-pid PID` (PID: the front; bench samples its child, the engine, apart);
3. the same at each warm load (150, 300, 600, 1000 listeners), `--requests` or two per listener.
Each run's bench folder, its console and the server's /metrics after it go under --out; the
table (listeners, ok, 503s, audio s/s, TTFA p50/p99, underrun p99, GPU busy, front and engine CPU,
requests per prefill call, wall ms per engine turn and each process's garbage-collection pauses
from the server's /metrics, the SLO verdict) is printed and written to --out/table.md. With
`--engines N` serve runs N engine processes (each `--max-batch`); the engine CPU column, the
timers' shares and the engines' collections are then summed over the N.
`--steps-per-turn K` serves K decode steps per host turn (the engine's per-turn host work spread
over K steps).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import machine, wait_ready  # noqa: E402

from ttsperf.cli.demo_serving import free_port, stop_server  # noqa: E402

SLO = "ttfa_p99=300ms,underrun_p99=100ms"
PROCESSES = ("front", "engine")


def ttsperf(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ttsperf.cli.main import app; app()", *args]


def start_server(a: argparse.Namespace, out: Path) -> tuple[subprocess.Popen, str, float]:
    port = free_port()
    flags = ["--synthetic", "--config", a.config, "--device", a.device, "--dtype", a.dtype]
    flags += ["--cuda-graphs"] if a.cuda_graphs else []
    flags += ["--max-batch", str(a.max_batch), "--max-queue", str(a.max_queue)]
    flags += ["--first-chunk-steps", str(a.first_chunk_steps), "--port", str(port)]
    flags += ["--engines", str(a.engines)] if a.engines > 1 else []
    flags += ["--steps-per-turn", str(a.steps_per_turn)] if a.steps_per_turn > 1 else []
    print("serve:", " ".join(["ttsperf serve", *flags]), flush=True)
    started = time.monotonic()
    with (out / "serve.log").open("w") as log:
        proc = subprocess.Popen(ttsperf("serve", *flags), stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, timeout=a.ready_timeout, proc=proc, log=out / "serve.log")
    return proc, url, time.monotonic() - started


def counters(url: str) -> dict[str, float]:
    """The server's cumulative counts: prefill calls, decode steps, audio calls, requests answered."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    wanted = {
        "ttsperf_prefill_seconds_count": "prefills",
        "ttsperf_prefill_seconds_sum": "prefill_s",
        "ttsperf_step_seconds_count": "steps",
        "ttsperf_step_seconds_sum": "step_s",
        "ttsperf_audio_call_seconds_count": "audio_calls",
        "ttsperf_audio_call_seconds_sum": "audio_s",
        "ttsperf_batch_size_sum": "rows_stepped",
    }
    out = {"requests": 0.0}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in wanted:
            out[wanted[name]] = float(value)
        elif name.startswith("ttsperf_engine_requests_total{"):
            out["requests"] += float(value)
        elif name.startswith("ttsperf_gc_pause_seconds_"):  # each process's collections (engine/gc_pauses.py)
            process = "engine" if 'process="engine"' in name else "front"
            if name.startswith("ttsperf_gc_pause_seconds_sum{"):
                out[f"gc_{process}_s"] = out.get(f"gc_{process}_s", 0.0) + float(value)
            elif name.startswith("ttsperf_gc_pause_seconds_count{") and 'generation="2"' in name:
                out[f"gc2_{process}"] = float(value)
    return out


def bench(url: str, pid: int, users: int, requests: int, a: argparse.Namespace, out: Path) -> dict:
    before = counters(url)
    args = [url, "--adapter", "openai", "--stream", "--text-set", "zh-8s", "--users", str(users)]
    args += ["--ramp-up", "8s", "--requests", str(requests), "--slo", SLO, "--server-pid", str(pid)]
    args += ["--max-requests", str(max(a.max_requests, 2 * requests)), "-o", str(out)]
    with (out.parent / f"{out.name}.txt").open("w") as console:
        subprocess.run(ttsperf("bench", *args), stdout=console, stderr=subprocess.STDOUT, check=False)
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        (out / "metrics.txt").write_bytes(r.read())
    run = json.loads((out / "run.json").read_text())
    after = counters(url)
    run["server_counts"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return run


def row(label: str, run: dict) -> str:
    p = run["points"][-1]
    t, ok = p["telemetry"], p["successes"]
    refused = sum(r.get("status") == 503 for r in run.get("records", []))  # warm-up's too: a user hits them

    def ms(field: str, q: str) -> str:
        d = p.get(field) or {}
        v = d.get(q)
        return "-" if v is None else f"{1000 * v:.0f}"

    gpu = t.get("gpu_util_mean")
    verdict = (p.get("slo") or {}).get("status", "-")
    c = run["server_counts"]
    per_prefill = c["requests"] / c["prefills"] if c.get("prefills") else 0.0
    sent = [r for r in run.get("records", []) if r.get("t_send") is not None and r.get("t_end") is not None]
    wall = max(r["t_end"] for r in sent) - min(r["t_send"] for r in sent) if sent else 0.0
    turn_ms = 1000 * wall / c["steps"] if c.get("steps") else 0.0  # the whole run, warm-up too
    # Where the engine's wall went: its own timers, and the rest (Python outside them, idle waiting)
    parts = [c.get(k, 0.0) for k in ("prefill_s", "step_s", "audio_s")]
    shares = " / ".join(f"{100 * x / wall:.0f}" for x in parts) if wall else "-"
    rest = f"{100 * (1 - sum(parts) / wall):.0f}" if wall else "-"
    batch = c["rows_stepped"] / c["steps"] if c.get("steps") else 0.0
    # the garbage collector's pauses in the run, each stopping every stream of its process
    gc = " / ".join(f"{1000 * c.get(f'gc_{x}_s', 0):.0f} ({c.get(f'gc2_{x}', 0):.0f})" for x in PROCESSES)
    return (
        f"| {label} | {ok}/{p['requests']} | {refused} | "
        f"{p.get('audio_seconds_per_s', 0):.0f} | {ms('ttfa_s', 'p50')} / {ms('ttfa_s', 'p99')} | "
        f"{ms('underrun_s', 'p99')} | {'-' if gpu is None else f'{100 * gpu:.0f}%'} | "
        f"{t.get('proc_cpu_pct_mean', 0):.0f}% | {t.get('children_cpu_pct_mean', 0):.0f}% | "
        f"{per_prefill:.1f} | {turn_ms:.1f} | {batch:.0f} | {shares} / {rest} | {gc} | {verdict} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--config", default="chattts")
    p.add_argument("--dtype", default="fp16")
    p.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--max-batch", type=int, default=256)
    p.add_argument("--max-queue", type=int, default=256)
    p.add_argument("--first-chunk-steps", type=int, default=24)
    p.add_argument("--steps-per-turn", type=int, default=1, help="serve's --steps-per-turn")
    p.add_argument("--check-users", type=int, default=485, help="plan's check command's --users")
    p.add_argument("--loads", default="150,300,600,1000", help="warm loads, listeners")
    p.add_argument("--requests", type=int, default=400)
    p.add_argument("--max-requests", type=int, default=800, help="bench's cap when the SLO is undecided")
    p.add_argument("--ready-timeout", type=float, default=300.0)
    p.add_argument(
        "--engines",
        type=int,
        default=1,
        help="serve --engines N (max batch each; on one GPU: under MPS only)",
    )
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    proc, url, ready_s = start_server(a, a.out)
    rows: list[str] = []
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=30) as r:
            health = json.loads(r.read())
        (a.out / "healthz.json").write_text(json.dumps(health, indent=1))
        print(f"ready (warm) after {ready_s:.1f} s: {health.get('warmed')}", flush=True)
        # plan's check as printed (its --requests); a warm load sends two requests per listener at least
        plan = [("check-cold", a.check_users, a.requests)]
        plan += [(f"warm-{n}", int(n), max(a.requests, 2 * int(n))) for n in a.loads.split(",")]
        for name, users, requests in plan:
            run = bench(url, proc.pid, users, requests, a, a.out / name)
            rows.append(row(f"{name} ({users})", run))
            print(rows[-1], flush=True)
            write_table(a, ready_s, rows)  # after every run: a run cut short by a time limit keeps its rows
    finally:
        stop_server(proc)
    print((a.out / "table.md").read_text())


def write_table(a: argparse.Namespace, ready_s: float, rows: list[str]) -> None:
    table = [
        f"machine: {machine()}; served: {a.config} {a.device} {a.dtype}"
        f"{' cuda-graphs' if a.cuda_graphs else ''}, max batch {a.max_batch}, queue {a.max_queue}; "
        f"ready (warm) after {ready_s:.1f} s; SLO {SLO}",
        "",
        "| run (listeners) | ok | 503 | audio s/s | TTFA p50 / p99 ms | underrun p99 ms | GPU busy "
        "| front CPU | engine CPU | requests per prefill | ms per turn | mean batch "
        "| % of wall: prefill / step / audio / rest | GC ms (gen-2 passes): front / engine | SLO |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "command: python benchmarks/card_listeners.py " + " ".join(sys.argv[1:]),
    ]
    (a.out / "table.md").write_text("\n".join(table) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
