"""Serving ChatTTS on this CPU: one request at a time (ours and the official package) vs our engine.

    make conformance   # once: .venv-conformance holds the official package
    .venv/bin/python benchmarks/engine_vs_baselines.py            # concurrency 1, 4, 16
    .venv/bin/python benchmarks/engine_vs_baselines.py --quick    # concurrency 1 and 4, fewer requests
    # streaming at concurrency 16 and 64, bf16: this engine vs another commit's vs the official
    git worktree add --detach /tmp/ttsperf-base fae7d39
    .venv/bin/python benchmarks/engine_vs_baselines.py --streaming 16,64 --dtype bf16 --base /tmp/ttsperf-base

All three load the same random chattts-size weights (fp32, an asset dir written by ttsperf) and
speak the guide's sentence; random weights never emit EOS, so every request decodes exactly the
speech-rate length (181 steps, 3.86 s of audio). Closed loop: C clients, each sending its next
request when the last one is answered, until N requests are done; in-process, no HTTP, so the
comparison is of the serving strategies alone:
  (a) pipeline  - ttsperf's pipeline behind a queue, one request at a time
  (b) official  - chattts 0.2.5's Chat.infer behind a queue, one at a time (the guide's set-up)
  (c) engine    - ttsperf's continuous-batching engine, max batch = C
Streaming TTFA at concurrency 1: (b) with Chat.infer(stream=True) (first chunk after 72 steps, it
drops the first two), (c) with stream=True (first chunk after 24 steps).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = "你好，这是一段用于压测的文本，长度八秒左右。"


# ----------------------------------------------------------------- servers (child processes)


def serial_server(synthesize) -> tuple[queue.Queue, threading.Thread]:
    """One worker answering requests one at a time, like the official examples/api."""
    inbox: queue.Queue = queue.Queue()

    def work():
        while True:
            item = inbox.get()
            if item is None:
                return
            stream, record, done = item
            record["start"] = time.perf_counter()
            synthesize(stream, record)
            record["end"] = time.perf_counter()
            done.set()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return inbox, thread


def serve_one_at_a_time(synthesize, c: int, n: int, stream: bool) -> list[dict]:
    """Warm up, then C closed-loop clients against a one-at-a-time server."""
    synthesize(False, {})
    inbox, _ = serial_server(synthesize)

    def submit(stream, record):
        done = threading.Event()
        inbox.put((stream, record, done))
        done.wait()

    return closed_loop(submit, c, n, stream)


def closed_loop(submit, concurrency: int, requests: int, stream: bool) -> list[dict]:
    """C client threads; each sends its next request when its last is answered."""
    records: list[dict] = []
    lock = threading.Lock()
    issued = [0]

    def client():
        while True:
            with lock:
                if issued[0] >= requests:
                    return
                issued[0] += 1
            record = {"sent": time.perf_counter()}
            submit(stream, record)
            with lock:
                records.append(record)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def run_pipeline(assets, c, n, stream, dtype="fp32"):
    from ttsperf.model.config import CHATTTS
    from ttsperf.model.pipeline import Pipeline

    pipe = Pipeline.from_assets(CHATTTS, assets, dtype=dtype)
    steps = pipe.speech_rate.steps(TEXT)

    def synthesize(_stream, record):
        gen = pipe.generate([TEXT], fixed_steps=[steps])[0]
        wav = pipe.vocode(pipe.mel(gen))
        record["first"] = time.perf_counter()
        record["audio"] = len(wav) / 24000

    return serve_one_at_a_time(synthesize, c, n, stream)


def run_official(assets, c, n, stream, dtype="fp32"):
    import logging

    import numpy as np
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(ROOT / "conformance"))
    import ChatTTS
    from ChatTTS.model.speaker import Speaker
    from run import official_modules

    from ttsperf.model.config import CHATTTS
    from ttsperf.model.length import SpeechRate

    # Always fp32: the official GPT casts its hidden states to float before the code heads
    # (gpt.py, generate), so its modules cannot be cast to bf16 on a CPU (dtype error).
    off = official_modules(CHATTTS, Path(assets))
    chat = ChatTTS.Chat(logging.getLogger("official"))
    chat.device = chat.device_gpt = torch.device("cpu")
    for name in ("gpt", "embed", "decoder", "dvae", "vocos", "tokenizer"):
        setattr(chat, name, off[name])
    chat.speaker = Speaker(768, chat.config.spk_stat, torch.device("cpu"))
    steps = SpeechRate().steps(TEXT)

    def synthesize(stream, record):
        params = ChatTTS.Chat.InferCodeParams(min_new_token=steps, max_new_token=steps, show_tqdm=False)
        kw = dict(skip_refine_text=True, do_text_normalization=False, do_homophone_replacement=False,
                  split_text=False, params_infer_code=params)  # fmt: skip
        if stream:
            total = 0
            for chunk in chat.infer(TEXT, stream=True, **kw):
                if "first" not in record and np.asarray(chunk).size:
                    record["first"] = time.perf_counter()
                total += np.asarray(chunk).shape[-1]
        else:
            wav = chat.infer(TEXT, **kw)[0]
            record["first"] = time.perf_counter()
            total = wav.shape[-1]
        record["audio"] = total / 24000

    return serve_one_at_a_time(synthesize, c, n, stream)


def run_engine(assets, c, n, stream, dtype="fp32"):
    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.engine.types import AudioChunk, SynthRequest
    from ttsperf.model.config import CHATTTS
    from ttsperf.model.pipeline import Pipeline

    pipe = Pipeline.from_assets(CHATTTS, assets, dtype=dtype)
    engine = Engine(pipe, EngineConfig(max_batch=c, max_new_tokens=1024, max_prompt_tokens=64)).start()
    engine.submit(SynthRequest(TEXT, fixed_length=True)).collect()  # warm-up

    def submit(stream, record):
        handle = engine.submit(SynthRequest(TEXT, fixed_length=True, stream=stream))
        samples = 0
        while True:
            event = handle.next_event_blocking()
            if isinstance(event, AudioChunk):
                record.setdefault("first", time.perf_counter())
                samples += event.samples.size
            else:
                break
        record["end"] = time.perf_counter()
        record["audio"] = samples / 24000

    records = closed_loop(submit, c, n, stream)
    engine.stop()
    return records


def child(args) -> None:
    runner = {"pipeline": run_pipeline, "official": run_official, "engine": run_engine}[args.impl]
    import torch

    torch.set_num_threads(args.threads)
    records = runner(args.assets, args.concurrency, args.requests, args.stream, args.dtype)
    print("RESULT " + json.dumps(records))


# ----------------------------------------------------------------- orchestration and report


def summarize(records: list[dict]) -> dict:
    lat = sorted(r["end"] - r["sent"] for r in records)
    ttfa = sorted(r["first"] - r["sent"] for r in records)
    window = max(r["end"] for r in records) - min(r["sent"] for r in records)

    def pct(values, p):
        k = (len(values) - 1) * p
        lo, hi = int(k), min(int(k) + 1, len(values) - 1)
        return values[lo] + (values[hi] - values[lo]) * (k - lo)

    return {
        "n": len(records),
        "audio_per_s": sum(r["audio"] for r in records) / window,
        "p50": statistics.median(lat),
        "p99": pct(lat, 0.99),
        "ttfa_p50": statistics.median(ttfa),
        "ttfa_p99": pct(ttfa, 0.99),
        "window": window,
    }


def run_child(py: Path, src: Path, impl: str, assets, c: int, n: int, stream: bool, args) -> dict | None:
    cmd = [str(py), __file__, "--impl", impl, "--assets", str(assets), "--concurrency", str(c),
           "--requests", str(n), "--threads", str(args.threads), "--dtype", args.dtype]  # fmt: skip
    cmd += ["--stream"] if stream else []
    print(f"{impl} ({src}) c={c} n={n}{' stream' if stream else ''} ...", file=sys.stderr, flush=True)
    out = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(src)), capture_output=True, text=True)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        print(out.stderr[-4000:], file=sys.stderr)
        return None
    return summarize(json.loads(line[7:]))


def streaming(args, official_py: Path) -> int:
    """Streaming clients at each concurrency: this engine, the --base tree's engine, and the
    official package one request at a time (its throughput does not depend on the concurrency;
    its TTFA is the queue: measured at the lowest concurrency with that many requests)."""
    from ttsperf.model.assets import make_random_assets

    points = [int(c) for c in args.streaming.split(",")]
    engines = {"engine": ROOT / "src"}
    if args.base:
        engines["base engine"] = Path(args.base) / "src"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        assets = make_random_assets(Path(tmp) / "asset", "chattts", seed=0)
        for c in points:
            for name, src in engines.items():
                results[(name, c)] = run_child(Path(sys.executable), src, "engine", assets, c, c, True, args)
        c0 = min(points)
        fp32 = argparse.Namespace(**{**vars(args), "dtype": "fp32"})
        results[("official", c0)] = run_child(
            official_py, ROOT / "src", "official", assets, c0, c0, True, fp32
        )
    if any(v is None for v in results.values()):
        return 1
    print(f"\nChatTTS streaming on this CPU: random chattts-size weights, {args.dtype}, the guide's sentence "
          f"(181 steps, 3.86 s of audio), {args.threads} threads, closed loop, n = C requests")  # fmt: skip
    head = ("C", "server", "n", "audio s/s", "TTFA P50 s", "TTFA P99 s", "vs official")
    print("{:>3} {:<12}{:>4}{:>11}{:>12}{:>12}{:>13}".format(*head))
    official = results[("official", min(points))]["audio_per_s"]
    for (name, c), r in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{c:>3} {name:<12}{r['n']:>4}{r['audio_per_s']:>11.3f}{r['ttfa_p50']:>12.2f}"
              f"{r['ttfa_p99']:>12.2f}{r['audio_per_s'] / official:>12.2f}x")  # fmt: skip
    if args.dtype != "fp32":
        print(f"official: fp32 (it cannot run in {args.dtype}: its GPT casts hidden states to float)")
    print("official: one request at a time, so its audio s/s holds at any concurrency and its TTFA grows")
    print("with the queue (C requests: the last waits for C - 1 before it). P99 of n <= 64 is the max.")
    print("command: .venv/bin/python " + " ".join(sys.argv))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    ap.add_argument("--assets", help=argparse.SUPPRESS)
    ap.add_argument("--concurrency", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--streaming", help="streaming comparison at these concurrencies, e.g. 16,64")
    ap.add_argument("--base", help="with --streaming: a checkout whose engine to compare (repo root)")
    args = ap.parse_args()
    if args.impl:
        child(args)
        return 0
    official_py = ROOT / ".venv-conformance" / "bin" / "python"
    if not official_py.exists():
        print("the official package's venv is missing: run `make conformance` first", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "src"))
    if args.streaming:
        return streaming(args, official_py)
    from ttsperf.model.assets import make_random_assets

    points = [(1, 3), (4, 4)] if args.quick else [(1, 3), (4, 4), (16, 16)]
    plan = [(impl, c, n, False) for c, n in points for impl in ("official", "pipeline", "engine")]
    plan += [("official", 1, 2, True), ("engine", 1, 2, True)]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        assets = make_random_assets(Path(tmp) / "asset", "chattts", seed=0)
        for impl, c, n, stream in plan:
            py = official_py if impl == "official" else Path(sys.executable)
            cmd = [str(py), __file__, "--impl", impl, "--assets", str(assets), "--concurrency", str(c),
                   "--requests", str(n), "--threads", str(args.threads)]  # fmt: skip
            cmd += ["--stream"] if stream else []
            print(f"{impl} c={c} n={n}{' stream' if stream else ''} ...", file=sys.stderr, flush=True)
            out = subprocess.run(
                cmd, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), capture_output=True, text=True
            )
            line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(out.stderr[-4000:], file=sys.stderr)
                return 1
            results[(impl, c, stream)] = summarize(json.loads(line[7:]))
    print("\nChatTTS serving on this CPU: random chattts-size weights, fp32, the guide's sentence "
          f"(181 steps, 3.86 s of audio), {args.threads} threads, closed loop")  # fmt: skip
    print(
        f"{'C':>3} {'server':<10}{'n':>4}{'audio s/s':>11}{'P50 s':>8}{'P99 s':>8}"
        f"{'TTFA P50 s':>12}{'vs official':>13}"
    )
    for c, _ in points:
        base = results[("official", c, False)]["audio_per_s"]
        for impl in ("official", "pipeline", "engine"):
            r = results[(impl, c, False)]
            print(f"{c:>3} {impl:<10}{r['n']:>4}{r['audio_per_s']:>11.3f}{r['p50']:>8.2f}{r['p99']:>8.2f}"
                  f"{r['ttfa_p50']:>12.2f}{r['audio_per_s'] / base:>12.2f}x")  # fmt: skip
    print("\nstreaming, concurrency 1:")
    for impl in ("official", "engine"):
        r = results[(impl, 1, True)]
        print(f"  {impl:<10} TTFA P50 {r['ttfa_p50']:.2f} s (n={r['n']}), P50 latency {r['p50']:.2f} s")
    print("\nP99 over n < 1000 requests is not resolved: with n <= 16 it is the interpolated maximum.")
    print(f"command: .venv/bin/python benchmarks/engine_vs_baselines.py{' --quick' if args.quick else ''}")
    print(f"machine: {os.cpu_count()} CPUs, load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
