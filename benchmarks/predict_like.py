"""Does `plan --predict --like RUN` predict the bench run it is like? The commands a user types.

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python \\
        benchmarks/predict_like.py
    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python \\
        benchmarks/predict_like.py --streams 64 --requests 192 --max-batch 64 \\
        [--think-time 0] [--text-set mixed] [--bracket]

1. `ttsperf profile --synthetic --config tiny` of this CPU at batches up to the server's max batch,
   pinned to the server's CPU with its torch threads;
2. `ttsperf serve --synthetic --config tiny --max-batch 64`, pinned to that CPU;
3. `ttsperf bench URL --adapter openai --stream --concurrency 64 --requests N --warmup 64 -o RUN`
   pinned to the other CPU (the default text: the guide's sentence; --text-set: a built-in set,
   e.g. mixed, whose lengths the prediction draws each request's from);
4. `ttsperf plan --profile prof.json --predict --like RUN --max-batch 64 --json`;
5. with --bracket, the profile again after the bench, and the prediction from each (the table's
   prediction is their mean: the machine's speed drifts by minutes);
6. the table: what bench measured beside what plan predicted; targets throughput within 15%,
   TTFA P50 within 25% (issue 22), E2E P50 within 15% and P99 within 25% (issue 14, for scale).

Not under `chrt -f` (a SCHED_FIFO server on one CPU starves its own event loop: see
plan_accuracy.py). Everything runs in a temporary folder that is printed and kept.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import DocHelp, machine, wait_ready  # noqa: E402

from ttsperf.cli.demo_serving import free_port, stop_server  # noqa: E402

TARGETS = {"throughput": 0.15, "TTFA P50": 0.25, "E2E P50": 0.15, "E2E P99": 0.25}


def ttsperf(*args: str, cpus: set[int], env: dict, **kw) -> subprocess.CompletedProcess:
    def pin() -> None:
        os.sched_setaffinity(0, cpus)

    return subprocess.run([sys.executable, "-m", "ttsperf", *args], env=env, preexec_fn=pin, **kw)


def server_means(url: str) -> dict[str, float]:
    """The server's own means over the run (its /metrics histograms: sum / count), warm-up included."""
    sums: dict[str, float] = {}
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            name, _, value = line.partition(" ")
            if name.startswith("ttsperf_") and name.endswith(("_sum", "_count")):
                sums[name] = float(value)
    out = {}
    for key in ("step_seconds", "prefill_seconds", "audio_call_seconds", "batch_size"):
        n = sums.get(f"ttsperf_{key}_count", 0.0)
        out[key] = sums.get(f"ttsperf_{key}_sum", 0.0) / n if n else float("nan")
        out[key + " n"] = n
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--requests", type=int, default=192)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument(
        "--think-time", type=float, default=None, help="bench's listeners (default: back to back)"
    )
    ap.add_argument("--text-set", default=None, help="bench's built-in texts (default: the guide's sentence)")
    ap.add_argument("--repeats", type=int, default=5, help="profile's timed repeats per point")
    ap.add_argument(
        "--contexts",
        default="32,256",
        help="profile's contexts: up to the run's longest (mixed: 32,256,1200)",
    )
    ap.add_argument(
        "--bracket",
        action="store_true",
        help="profile again after the bench and predict from each profile: this shared machine's "
        "speed drifts by minutes, so the two bracket the minutes the server ran in",
    )
    a = ap.parse_args()
    ncpu = os.cpu_count() or 1
    server, client = {0}, ({1} if ncpu > 1 else {0})
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    work = Path(tempfile.mkdtemp(prefix="predict-like-"))
    prof, run = work / "prof.json", work / "run"
    batches = sorted({1, *(b for b in (4, 16, 64, 256) if b < a.max_batch), a.max_batch})
    t0 = time.monotonic()

    def profile(path: Path) -> None:
        print(f"profiling batches {batches} ... ({path})", file=sys.stderr, flush=True)
        ttsperf("profile", "--synthetic", "--config", "tiny", "--batches", ",".join(map(str, batches)),
                "--contexts", a.contexts, "--prompts", "16,32", "--repeats", str(a.repeats), "-o", str(path),
                cpus=server, env=env, check=True, stdout=subprocess.DEVNULL)  # fmt: skip

    profile(prof)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (work / "server.log").open("w")
    srv = subprocess.Popen(
        [sys.executable, "-m", "ttsperf", "serve", "--synthetic", "--config", "tiny", "--port", str(port),
         "--max-batch", str(a.max_batch), "--max-queue", "4096", "--log-level", "warning"],
        env=env, preexec_fn=lambda: os.sched_setaffinity(0, server), stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_ready(url)
        listen = [] if a.think_time is None else ["--think-time", f"{a.think_time:g}s"]
        listen += [] if a.text_set is None else ["--text-set", a.text_set]
        bench = ["bench", url, "--adapter", "openai", "--stream", "--concurrency", str(a.streams), *listen,
                 "--requests", str(a.requests), "--warmup", str(a.streams), "--timeout", "600s", "--no-gpu",
                 "-o", str(run)]  # fmt: skip
        print("ttsperf " + " ".join(bench), file=sys.stderr, flush=True)
        ttsperf(*bench, cpus=client, env=env, check=True, stdout=subprocess.DEVNULL)
        served = server_means(url)
    finally:
        stop_server(srv)
    profiles = [prof]
    if a.bracket:
        profiles.append(work / "prof-after.json")
        profile(profiles[-1])

    def predict(path: Path) -> tuple[list[str], dict]:
        plan = ["plan", "--profile", str(path), "--predict", "--like", str(run),
                "--max-batch", str(a.max_batch), "--json"]  # fmt: skip
        out = ttsperf(*plan, cpus=server | client, env=env, check=True, capture_output=True, text=True)
        return plan, json.loads(out.stdout)

    predictions = [predict(path) for path in profiles]
    plan, p = predictions[0]
    point = json.loads((run / "run.json").read_text(encoding="utf-8"))["points"][0]
    measured = {
        "throughput": point["throughput_rps"],
        "TTFA P50": point["ttfa_s"]["p50"],
        "E2E P50": point["latency_s"]["p50"],
        "E2E P99": point["latency_s"]["p99"],
    }
    keys = {
        "throughput": "throughput_rps",
        "TTFA P50": "ttfa_p50_s",
        "E2E P50": "e2e_p50_s",
        "E2E P99": "e2e_p99_s",
    }
    each = [{k: q["prediction"][v] for k, v in keys.items()} for _, q in predictions]
    # bracketed: the mean of the predictions from the profiles taken before and after the bench
    predicted = {k: sum(e[k] for e in each) / len(each) for k in keys}
    print(f"machine: {machine()}; {time.monotonic() - t0:.0f} s; files in {work}")
    print("commands: ttsperf " + " ".join(bench).replace(url, "URL").replace(str(run), "RUN"))
    print("          ttsperf " + " ".join(plan).replace(str(prof), "prof.json").replace(str(run), "RUN"))
    print(f"like: {p['like']}")
    if len(each) > 1:
        print("predicted: the mean of the predictions from the profile before and after the bench")
    n = p["prediction"]
    print(
        f"server (/metrics means): step {served['step_seconds'] * 1e3:.2f} ms at batch "
        f"{served['batch_size']:.1f} "
        f"(predicted {n['mean_step_s'] * 1e3:.2f} ms at {n['mean_batch']:.1f}); prefill "
        f"{served['prefill_seconds'] * 1e3:.2f} ms x {served['prefill_seconds n']:.0f}; audio call "
        f"{served['audio_call_seconds'] * 1e3:.2f} ms x {served['audio_call_seconds n']:.0f}; steps "
        f"{served['step_seconds n']:.0f}"
    )
    head = f"{'metric':11} {'bench':>9} {'predicted':>10} {'error':>8}  target"
    print(head + ("   before   after" if len(each) > 1 else ""))
    for k, m in measured.items():
        err = predicted[k] / m - 1
        ok = "ok" if abs(err) <= TARGETS[k] else "MISS"
        sides = "".join(f" {e[k] / m - 1:+7.1%}" for e in each) if len(each) > 1 else ""
        print(f"{k:11} {m:9.3f} {predicted[k]:10.3f} {err:+8.1%}  {ok} ({TARGETS[k]:.0%}){sides}")


if __name__ == "__main__":
    main()
