"""What the engine adds to the model, per row per step: this engine vs an earlier commit's.

    # once: the engine to compare with
    git worktree add --detach /tmp/ttsperf-base fae7d39
    flock /tmp/ttsperf-cpu.lock chrt -f 10 .venv/bin/python \\
        benchmarks/engine_overhead.py --base /tmp/ttsperf-base \\
        [--batches 1,16,64,256] [--runs 3]

The `tiny` config's compute is nil, so what a step costs beyond the model's forward is what the
host adds — the regime of a GPU, where the model's step is a few milliseconds and Python per row
decides the throughput. Each engine runs in its own process (its own source tree on PYTHONPATH),
one torch thread, streaming B requests at once (synthetic weights: every request decodes its
speech-rate length, far past the measured window). Once all B are running and past their first
chunk, the window is 48 steps (two audio chunks per row), so audio decoding is counted at its
steady-state share.

Columns: wall per step; model = the bare decode step (slot forward + code heads) at that batch
and context, timed in the same process; host us/row/step = (wall - model) / B; audio s per s =
row-steps per second / 46.875; efficiency = model / wall (row-steps served per second over what
the bare step allows). Medians over --runs; ratios are new / base measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _bench_common import DocHelp, machine, tree_src  # noqa: E402

WINDOW = 48  # steps measured: two 24-step chunks per row
TEXT = "你好，这是一段用于压测的文本，长度八秒左右。" * 6  # ~1,000 steps at the sourced speech rate


def child(batch: int) -> dict:
    """Runs inside the engine's own process: measure one batch size, print one JSON line."""
    import torch

    torch.set_num_threads(1)
    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.engine.types import SynthRequest
    from ttsperf.model.config import TINY
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.sampling import SamplingParams

    pipe = Pipeline.synthetic_model(TINY, seed=0)
    engine = Engine(pipe, EngineConfig(max_batch=batch, max_queue=batch))
    stats = engine.stats
    # Each step's end time and row-step count, recorded by the worker itself: the main thread
    # only sleeps (coarsely), so no polling thread takes the GIL from the engine while it runs.
    marks: list[tuple[float, int]] = []
    step = engine._step

    def marked_step() -> None:
        step()
        marks.append((time.perf_counter(), stats.decode_steps))

    engine._step = marked_step
    engine.start()
    handles = [engine.submit(SynthRequest(TEXT, SamplingParams(seed=i), stream=True)) for i in range(batch)]
    while engine.running() < batch:
        time.sleep(0.05)
    first = len(marks) + 30  # past every row's first chunk
    while len(marks) <= first + WINDOW:
        time.sleep(0.05)
    (t0, r0), (t1, r1) = marks[first], marks[first + WINDOW]
    s0, s1 = first, first + WINDOW
    running = engine.running()
    for h in handles:
        h.cancel()
    engine.stop(drain=False, timeout=60)
    wall = (t1 - t0) / (s1 - s0)
    row_steps_per_s = (r1 - r0) / (t1 - t0)

    # the bare decode step at this batch and the window's context, same process, same thread
    from ttsperf.model.forward import SlotForward
    from ttsperf.model.kv import KVSlots

    g = TINY.gpt
    prompt = len(pipe.tokenizer.ids(pipe.tokenizer.decorate_code_prompt(TEXT, "[speed_5]")))
    context = prompt + 30 + WINDOW
    head_dim = g.hidden_size // g.num_attention_heads
    slots = KVSlots(
        g.num_hidden_layers, batch, g.num_key_value_heads, context + 1, head_dim,
        dtype=torch.float32, device=torch.device("cpu"),
    )  # fmt: skip
    fwd = SlotForward(pipe.model.gpt)
    codes = torch.zeros(batch, g.num_vq, dtype=torch.long)
    positions = torch.full((batch,), context - 1, dtype=torch.long)
    times = []
    with torch.inference_mode():
        for i in range(25):
            t = time.perf_counter()
            hidden = fwd.decode(pipe.model.embed.embed_codes(codes), slots, positions, context)
            pipe.model.embed.code_logits(hidden)
            if i >= 5:
                times.append(time.perf_counter() - t)
    model = statistics.median(times)
    out = {
        "batch": batch,
        "running": running,
        "wall_s": wall,
        "model_s": model,
        "row_steps_per_s": row_steps_per_s,
    }
    try:  # this engine's own sampling and audio calls, bare: the work a GPU would do for them
        out |= device_work(pipe, batch)
    except ImportError:  # an engine without them (the base)
        pass
    return out


def device_work(pipe, batch: int) -> dict:
    """Seconds per step of the step's sampling pass and of its share of audio (each row emits two
    chunks per 48 steps), run bare on the same thread: compute, not host bookkeeping."""
    import torch

    from ttsperf.engine.audio import BatchedAudio
    from ttsperf.model import sampling as S
    from ttsperf.model.config import TINY
    from ttsperf.profile.measure import median_time

    g = TINY.gpt
    cpu = torch.device("cpu")
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(batch, g.num_vq, g.num_audio_tokens, generator=gen)
    history = torch.randint(0, g.num_audio_tokens - 1, (batch, g.num_vq, 16), generator=gen)
    params = S.RowParams.of([S.SamplingParams()] * batch, g.num_audio_tokens)
    top = S.width(S.candidates(S.SamplingParams(), g.num_audio_tokens), g.num_audio_tokens)
    keys, steps = S.seed_key(torch.arange(batch)), torch.full((batch,), 100)
    allow = torch.ones(batch, dtype=torch.bool)
    audio = BatchedAudio(pipe.model, 4)
    hidden = torch.randn(batch, 200, g.hidden_size, generator=gen)
    emitted = (2 * 120 - 8) * audio.hop  # a steady-state chunk: 24 new steps after 120
    windows = [audio.window(r, 144, emitted, final=False) for r in range(batch)]
    with torch.inference_mode():
        sampling, _ = median_time(
            lambda: S.sample(
                logits.clone(), history, params, allow, g.eos_token, S.uniforms(keys, steps, g.num_vq), top
            ),
            cpu,
            15,
            3,
        )
        chunk_call, _ = median_time(lambda: audio.decode(hidden, windows), cpu, 5, 3)
    return {"sampling_s": sampling, "audio_s": chunk_call * 2 / WINDOW}


def run_child(src: Path, batch: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(batch)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise SystemExit(f"{src} batch {batch} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    ap.add_argument("--base", type=Path, help="a checkout of the engine to compare with (its repo root)")
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    print("machine:", machine())
    flags = [
        f for f in ("avx512f", "avx512_bf16", "amx_bf16", "avx2") if f in Path("/proc/cpuinfo").read_text()
    ]
    print("cpu flags:", " ".join(flags) or "none of avx2/avx512f/avx512_bf16/amx_bf16")
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    engines = {"new": ROOT / "src"}
    if args.base:
        engines["base"] = tree_src(args.base)
    batches = [int(b) for b in args.batches.split(",")]
    runs: dict[tuple[str, int], list[dict]] = {}
    for r in range(args.runs):
        for batch in batches:
            for name, src in engines.items():  # side by side: base and new alternate
                res = run_child(src, batch)
                runs.setdefault((name, batch), []).append(res)
                print(f"  run {r + 1} {name:4} B={batch:3}: {1e3 * res['wall_s']:.2f} ms/step", flush=True)

    def med(name: str, batch: int, key: str) -> float:
        return statistics.median(x[key] for x in runs[name, batch])

    print()
    head = "| engine | B | wall/step ms | model ms | wall - model, us/row/step | audio s/s | efficiency |"
    print(head)
    print("|---|---|---|---|---|---|---|")
    for batch in batches:
        for name in engines:
            wall, model = med(name, batch, "wall_s"), med(name, batch, "model_s")
            audio = med(name, batch, "row_steps_per_s") / 46.875
            host = 1e6 * (wall - model) / batch
            print(
                f"| {name} | {batch} | {1e3 * wall:.2f} | {1e3 * model:.2f} | {host:.1f} | {audio:.1f} |"
                f" {100 * model / wall:.0f}% |"
            )
    print()
    print("Where this engine's (wall - model) goes, per step: its sampling pass and its share of")
    print("audio calls timed bare (compute a GPU would run), and what is left: host work.")
    print()
    print("| B | sampling ms | audio ms | host ms | host us/row/step |")
    print("|---|---|---|---|---|")
    for batch in batches:
        wall, model = med("new", batch, "wall_s"), med("new", batch, "model_s")
        sampling, audio = med("new", batch, "sampling_s"), med("new", batch, "audio_s")
        host = wall - model - sampling - audio
        per_row = 1e6 * host / batch
        print(f"| {batch} | {1e3 * sampling:.2f} | {1e3 * audio:.2f} | {1e3 * host:.2f} | {per_row:.1f} |")
    if "base" in engines:
        print()
        print("| B | audio s/s new / base | host cost base / new |")
        print("|---|---|---|")
        for batch in batches:
            ratio = med("new", batch, "row_steps_per_s") / med("base", batch, "row_steps_per_s")
            host_new = med("new", batch, "wall_s") - med("new", batch, "model_s")
            host_base = med("base", batch, "wall_s") - med("base", batch, "model_s")
            print(f"| {batch} | {ratio:.2f}x | {host_base / host_new:.1f}x |")
    if args.json:
        args.json.write_text(json.dumps({f"{n}@{b}": v for (n, b), v in runs.items()}, indent=1))


if __name__ == "__main__":
    main()
