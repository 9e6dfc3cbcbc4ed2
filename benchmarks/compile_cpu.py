"""torch.compile of the engine's decode step on this CPU: compile seconds apart from steady-state speed.

    flock /tmp/ttsperf-cpu.lock chrt -f 10 .venv/bin/python benchmarks/compile_cpu.py --dtype fp32
    flock /tmp/ttsperf-cpu.lock chrt -f 10 .venv/bin/python benchmarks/compile_cpu.py --dtype bf16
    flock /tmp/ttsperf-cpu.lock chrt -f 10 .venv/bin/python benchmarks/compile_cpu.py --engine 16
    .venv/bin/python benchmarks/compile_cpu.py --config tiny --repeats 3      # a dry run

The full-size synthetic chattts model; the engine's own step (DecodeStep: code embeddings, slot
forward over preallocated KV slots, the 4 code heads) at batch 1 and 16 at one context length.
Variants, all on the same weights and slots:
  eager    - the step as the engine runs it without --compile
  dynamic  - torch.compile(dynamic=True), what `--compile` does: batch 1 and batch >= 2 graphs,
             compiled once, whatever the batch and context later
  static   - (--static) torch.compile(dynamic=False): one graph per exact shape, what padding to
             (batch, context) buckets would run in each bucket
With --engine C: the whole engine instead (prefill, step, sampling, Decoder+Vocos), eager and then
with --compile, C synthetic requests of the guide's sentence at once after one warm-up request:
audio seconds per second, mean step ms, and the seconds Engine.start() took.
Compile seconds are cold: inductor's on-disk caches are disabled for this process, so the figure
is what a fresh server pays at start. Steady state: warm-up, then eager and compiled timed in
alternation (one call each per round), median of the rounds. Token check at each point: how many
of the batch x 4 code-head argmaxes (the greedy tokens) the compiled step shares with eager, and
the largest logit difference.
"""

from __future__ import annotations

import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # before torch: cold compiles

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from _bench_common import machine  # noqa: E402

from ttsperf.engine.decode_step import DecodeStep  # noqa: E402
from ttsperf.engine.engine import Engine, EngineConfig  # noqa: E402
from ttsperf.engine.switches import Switches  # noqa: E402
from ttsperf.engine.types import SynthRequest  # noqa: E402
from ttsperf.model.config import get_config  # noqa: E402
from ttsperf.model.forward import SlotForward  # noqa: E402
from ttsperf.model.kv import KVSlots  # noqa: E402
from ttsperf.model.pipeline import DTYPES, Pipeline  # noqa: E402


def inputs(batch: int, ctx: int, num_vq: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    codes = torch.randint(0, vocab, (batch, num_vq), generator=torch.Generator().manual_seed(batch))
    return codes, torch.full((batch,), ctx - 1), ctx


def alternate(fns: dict, args, repeats: int) -> dict[str, float]:
    """Median ms of each fn, timed in alternation so drift on a shared machine hits all alike."""
    for fn in fns.values():
        fn(*args)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(*args)
            times[name].append(time.perf_counter() - t0)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def engine_run(cfg, dtype: str, concurrency: int, compile: bool) -> dict:
    text = "你好，这是一段用于压测的文本，长度八秒左右。"
    pipe = Pipeline.synthetic_model(cfg, seed=0, dtype=dtype)
    config = EngineConfig(max_batch=concurrency, max_new_tokens=512, max_prompt_tokens=64)
    engine = Engine(pipe, config, Switches(dtype=dtype, compile=compile))
    t0 = time.perf_counter()
    engine.start()
    start_s = time.perf_counter() - t0
    engine.submit(SynthRequest(text)).collect()  # warm-up
    steps_before, seconds_before = engine.stats.step_seconds.n, engine.stats.step_seconds.total
    t0 = time.perf_counter()
    handles = [engine.submit(SynthRequest(text)) for _ in range(concurrency)]
    audio = sum(h.collect()[1].audio_seconds for h in handles)
    wall = time.perf_counter() - t0
    steps = engine.stats.step_seconds.n - steps_before
    step_ms = 1000 * (engine.stats.step_seconds.total - seconds_before) / steps
    engine.stop()
    return {"start_s": start_s, "audio_per_s": audio / wall, "wall_s": wall, "steps": steps,
            "step_ms": step_ms}  # fmt: skip


def engine_main(cfg, dtype: str, concurrency: int) -> int:
    runs = {name: engine_run(cfg, dtype, concurrency, name == "compile") for name in ("eager", "compile")}
    print(f"\n{cfg.name} {dtype}, engine, {concurrency} requests at once (after one warm-up request)")
    print("| engine | start s | audio s per s | wall s | steps | mean step ms |")
    print("|---|---|---|---|---|---|")
    for name, r in runs.items():
        print(f"| {name} | {r['start_s']:.1f} | {r['audio_per_s']:.3f} | {r['wall_s']:.1f} | {r['steps']} | "
              f"{r['step_ms']:.1f} |")  # fmt: skip
    ratio = runs["compile"]["audio_per_s"] / runs["eager"]["audio_per_s"]
    print(f"compile vs eager: {ratio:.2f}x audio throughput")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("command: " + " ".join([Path(sys.executable).name, *sys.argv]))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="chattts")
    ap.add_argument("--dtype", default="fp32", choices=list(DTYPES))
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--static", action="store_true", help="also compile one static graph per batch")
    ap.add_argument("--engine", type=int, metavar="C", help="the whole engine, C requests at once")
    args = ap.parse_args()
    cfg, g = get_config(args.config), get_config(args.config).gpt
    print(f"machine: {machine()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if args.engine:
        return engine_main(cfg, args.dtype, args.engine)
    with torch.inference_mode():
        return step_main(args, cfg, g)


def step_main(args, cfg, g) -> int:
    batches = [int(b) for b in args.batches.split(",")]
    pipe = Pipeline.synthetic_model(cfg, seed=0, dtype=args.dtype)
    slots = KVSlots(
        g.num_hidden_layers, max(batches), g.num_key_value_heads, args.context + 1,  # as the engine
        g.hidden_size // g.num_attention_heads, dtype=DTYPES[args.dtype], device=pipe.device,
    )  # fmt: skip
    forward = SlotForward(pipe.model.gpt)
    eager = DecodeStep(pipe.model, forward, slots)
    dynamic = DecodeStep(pipe.model, forward, slots, compile=True)
    compile_s = {"dynamic": dynamic.warm_up()}
    rows = []
    for batch in batches:
        args_ = inputs(batch, args.context, g.num_vq, g.num_audio_tokens)
        fns = {"eager": eager, "dynamic": dynamic}
        if args.static:
            static = DecodeStep(pipe.model, forward, slots, compile=True, dynamic=False)
            t0 = time.perf_counter()
            static(*args_)
            compile_s[f"static b{batch}"] = time.perf_counter() - t0
            fns["static"] = static
        ms = alternate(fns, args_, args.repeats)
        ref = eager(*args_)[1]
        out = dynamic(*args_)[1]
        same = int((out.argmax(-1) == ref.argmax(-1)).sum())
        diff = float((out - ref).abs().max())
        rows.append({"batch": batch, **ms, "same": f"{same}/{ref.argmax(-1).numel()}", "diff": diff})
    print(f"compile seconds (cold): {', '.join(f'{k} {v:.1f}' for k, v in compile_s.items())}; "
          f"graphs compiled by --compile: {dynamic.compiles}")  # fmt: skip
    print(f"\n{cfg.name} {args.dtype}, context {args.context}, median of {args.repeats} (ms per step)")
    names = [n for n in ("eager", "dynamic", "static") if n in rows[0]]
    print(
        "| batch | " + " | ".join(f"{n} ms" for n in names)
        + " | dynamic vs eager | greedy tokens equal | max logit diff |"
    )  # fmt: skip
    print("|---" * (len(names) + 4) + "|")
    for r in rows:
        cells = " | ".join(f"{r[n]:.1f}" for n in names)
        speedup = r["eager"] / r["dynamic"]
        print(f"| {r['batch']} | {cells} | {speedup:.2f}x | {r['same']} | {r['diff']:.2g} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("command: " + " ".join([Path(sys.executable).name, *sys.argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
