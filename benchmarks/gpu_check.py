"""GPU checks in one short script (< 10 minutes on one GPU): what the CPU-only CI cannot measure.

    python benchmarks/gpu_check.py                      # on a CUDA machine: chattts size, synthetic weights
    python benchmarks/gpu_check.py --device cpu --config tiny --quick   # dry run of every code path

Sections, each printed as a table (and written to $OUT/gpu_check.json when OUT is set):
  1. correctness: the GPT step and Decoder+Vocos on the device vs on the CPU, fp32 (relative error)
  2. decode step time (engine's slot forward, synchronised, median of repeats) per dtype x batch x
     context, with peak memory from the allocator and achieved weight bandwidth
  3. TF32 on/off (fp32 matmuls) and cudnn.benchmark on/off (Decoder+Vocos convolutions)
  4. the engine end to end: 16 concurrent synthetic requests, audio seconds per second
  5. the engine's decode step (DecodeStep) eager, --compile, --cuda-graphs and both, at batch 1
     and 16, context 512: step ms, compile seconds, greedy tokens vs eager. On a CPU dry run the
     CUDA graph rows say "needs CUDA" and compile runs on the CPU.
  6. the largest batch that fits (`profile --max-batch-search`'s OOM-safe bisection), fp32 and
     fp16, at 439 tokens (the guide's 8 s clip + a 64-token prompt) and 2048; and in fp16 at 439
     within the allocator budgets of a 10 GB RTX 3080 and a 40 GB A100 (card less ~0.8 GiB of CUDA
     context), the guide's "batch 4 OOMs on a 3080, an A100 runs batch 24"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from ttsperf.engine.engine import Engine, EngineConfig  # noqa: E402
from ttsperf.engine.step import DecodeStep, GraphedStep  # noqa: E402
from ttsperf.engine.types import SynthRequest  # noqa: E402
from ttsperf.model.config import get_config  # noqa: E402
from ttsperf.model.forward import SlotForward  # noqa: E402
from ttsperf.model.kv import KVSlots  # noqa: E402
from ttsperf.model.pipeline import DTYPES, Pipeline  # noqa: E402
from ttsperf.profile.maxbatch import search_max_batch  # noqa: E402
from ttsperf.profile.measure import median_time  # noqa: E402


def timed(fn, device, repeats: int) -> float:
    """Median seconds after one warm-up call, the device synchronised around each call."""
    return median_time(fn, device, repeats, warmup=1)[0]


@torch.inference_mode()
def correctness(cfg, device) -> dict:
    cpu = Pipeline.synthetic_model(cfg, seed=0)
    dev = Pipeline.synthetic_model(cfg, seed=0, device=str(device))
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(1, cfg.gpt.hidden_size, 60, generator=g)
    ref = cpu.model.vocos(cpu.model.decoder(hidden))
    out = dev.model.vocos(dev.model.decoder(hidden.to(device))).cpu()
    x = torch.randn(1, 16, cfg.gpt.hidden_size, generator=g)
    h_ref = cpu.model.gpt(inputs_embeds=x, use_cache=False).last_hidden_state
    h_out = dev.model.gpt(inputs_embeds=x.to(device), use_cache=False).last_hidden_state.cpu()

    def rel(a, b):
        return float((a - b).abs().max() / b.abs().max())

    return {"gpt_hidden_rel_err": rel(h_out, h_ref), "decoder_vocoder_rel_err": rel(out, ref)}


@torch.inference_mode()
def step_times(cfg, device, dtypes, batches, contexts, repeats) -> list[dict]:
    rows = []
    g = cfg.gpt
    for dtype in dtypes:
        pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device), dtype=dtype)
        weights = sum(p.numel() * p.element_size() for p in pipe.model.gpt.parameters())
        fwd = SlotForward(pipe.model.gpt)
        for batch in batches:
            for ctx in contexts:
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                head_dim = g.hidden_size // g.num_attention_heads
                slots = KVSlots(
                    g.num_hidden_layers, batch, g.num_key_value_heads, ctx + 1, head_dim,
                    dtype=DTYPES[dtype], device=device,
                )  # fmt: skip
                t = time_decode(fwd, slots, batch, ctx, DTYPES[dtype], device, repeats)
                peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
                kv_read = slots.nbytes
                rows.append({
                    "dtype": dtype, "batch": batch, "context": ctx, "step_ms": 1000 * t,
                    "steps_per_s_total": batch / t, "x_realtime": batch / t / cfg.steps_per_second,
                    "achieved_GBps": (weights + kv_read) / t / 1e9, "peak_MB": peak / 1e6 if peak else None,
                })  # fmt: skip
    return rows


def time_decode(fwd: SlotForward, slots: KVSlots, batch: int, ctx: int, dtype, device, repeats: int) -> float:
    x = torch.randn(batch, fwd.llama.config.hidden_size, device=device, dtype=dtype)
    pos = torch.full((batch,), ctx, device=device)
    return timed(lambda: fwd.decode(x, slots, pos), device, repeats)


@torch.inference_mode()
def switch_deltas(cfg, device, repeats) -> dict:
    out = {}
    if device.type != "cuda":
        return {"note": "TF32 and cudnn.benchmark apply to CUDA only"}
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device))
    g = cfg.gpt
    fwd = SlotForward(pipe.model.gpt)
    slots = KVSlots(
        g.num_hidden_layers, 16, g.num_key_value_heads, 513, 64, dtype=torch.float32, device=device
    )
    x = torch.randn(16, g.hidden_size, device=device)
    pos = torch.full((16,), 512, device=device)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        out[f"step_ms_b16_tf32_{'on' if tf32 else 'off'}"] = 1000 * timed(
            lambda: fwd.decode(x, slots, pos), device, repeats
        )
    hidden = torch.randn(4, g.hidden_size, 470, device=device)  # 4 x 10 s of audio
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        ms = 1000 * timed(lambda: pipe.model.vocos(pipe.model.decoder(hidden)), device, repeats)
        out[f"decoder_vocoder_ms_4x10s_cudnn_benchmark_{'on' if bench else 'off'}"] = ms
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def engine_throughput(cfg, device, concurrency) -> dict:
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device))
    engine = Engine(
        pipe, EngineConfig(max_batch=concurrency, max_new_tokens=512, max_prompt_tokens=64)
    ).start()
    text = "你好，这是一段用于压测的文本，长度八秒左右。"
    engine.submit(SynthRequest(text)).collect()
    t0 = time.perf_counter()
    handles = [engine.submit(SynthRequest(text)) for _ in range(concurrency)]
    audio = sum(h.collect()[1].audio_seconds for h in handles)
    wall = time.perf_counter() - t0
    engine.stop()
    return {
        "requests": concurrency,
        "audio_seconds": audio,
        "wall_seconds": wall,
        "audio_per_s": audio / wall,
    }


@torch.inference_mode()
def step_variants(cfg, device, dtype: str, batches: list[int], context: int, repeats: int) -> list[dict]:
    """Eager vs compile vs CUDA graphs vs both, on one model and one set of KV slots."""
    g = cfg.gpt
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device), dtype=dtype)
    slots = KVSlots(
        g.num_hidden_layers, max(batches), g.num_key_value_heads, context + 1,  # +1: as the engine
        g.hidden_size // g.num_attention_heads, dtype=DTYPES[dtype], device=device,
    )  # fmt: skip
    fwd = SlotForward(pipe.model.gpt)
    eager = DecodeStep(pipe.model, fwd, slots)
    compiled = DecodeStep(pipe.model, fwd, slots, compile=True)
    compile_s = compiled.warm_up()
    variants = {"eager": eager, "compile": compiled}
    if device.type == "cuda":  # graphs capture on first call, inside timed()'s warm-up call
        variants["cuda_graphs"] = GraphedStep(eager, slots, g.num_vq)
        variants["compile+cuda_graphs"] = GraphedStep(compiled, slots, g.num_vq)
    rows = []
    for batch in batches:
        gen = torch.Generator().manual_seed(batch)
        codes = torch.randint(0, g.num_audio_tokens, (batch, g.num_vq), generator=gen).to(device)
        positions = torch.full((batch,), context - 1, device=device)
        ref = eager(codes, positions, context)[1]
        base = None
        for name, fn in variants.items():
            ms = 1000 * timed(lambda: fn(codes, positions, context), device, repeats)  # noqa: B023
            out = fn(codes, positions, context)[1]
            base = base or ms
            rows.append({
                "dtype": dtype, "batch": batch, "variant": name, "step_ms": ms, "vs_eager": base / ms,
                "tokens_equal": f"{int((out.argmax(-1) == ref.argmax(-1)).sum())}/{ref.argmax(-1).numel()}",
                "max_logit_diff": float((out - ref).abs().max()),
                "compile_s": compile_s if "compile" in name else 0.0,
            })  # fmt: skip
        if device.type != "cuda":
            rows.append({"dtype": dtype, "batch": batch, "variant": "cuda_graphs", "note": "needs CUDA"})
    return rows


GIB = 1024**3
CUDA_CONTEXT_GIB = 0.8  # what a CUDA context holds outside the allocator (plan's default: 781 MiB)


def max_batch(cfg, device, quick: bool) -> list[dict]:
    """OOM-safe bisection on the device (CPU dry run: a small budget, so it stays quick)."""
    rows = []
    contexts = [64] if quick else [439, 2048]
    cap = 64 if quick else 4096
    budgets = {"device": None} if device.type == "cuda" else {"dry run 2 GiB": 2 * GIB}
    for dtype in ["fp32", "fp16"] if device.type == "cuda" else ["fp32"]:
        pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device), dtype=dtype)
        runs = [(name, b, contexts) for name, b in budgets.items()]
        if dtype == "fp16" and device.type == "cuda" and not quick:
            runs += [
                (f"{card} budget", (gb - CUDA_CONTEXT_GIB) * GIB, [439])
                for card, gb in (("RTX 3080 10 GB", 10), ("A100 40 GB", 40))
            ]
        for name, budget, ctxs in runs:
            t0 = time.perf_counter()
            for m in search_max_batch(pipe, ctxs, budget_bytes=budget, cap=cap):
                rows.append({
                    "dtype": dtype, "within": name, "context": m.context, "max_batch": m.max_batch,
                    "limit": m.limit, "peak_GiB": m.bytes_at_max.value / GIB if m.bytes_at_max else None,
                    "probes": m.probes, "seconds": time.perf_counter() - t0,
                })  # fmt: skip
        del pipe
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--config", default="chattts")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: run on a GPU machine, or use --device cpu --config tiny for a dry run")
        return 2
    cfg = get_config(args.config)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {name}; torch {torch.__version__}; config {cfg.name}")
    quick = args.quick
    result = {"device": name, "torch": torch.__version__, "config": cfg.name}
    result["correctness"] = correctness(cfg, device)
    print("correctness vs CPU (fp32):", json.dumps(result["correctness"]))
    dtypes = ["fp32", "bf16"] if quick else ["fp32", "fp16", "bf16"]
    batches = [1, 4] if quick else [1, 16, 64]
    contexts = [64] if quick else [64, 512, 2048]
    rows = step_times(cfg, device, dtypes, batches, contexts, repeats=3 if quick else 20)
    result["step_times"] = rows
    print(f"\n{'dtype':<6}{'batch':>6}{'ctx':>6}{'step ms':>9}{'x realtime':>12}{'GB/s':>8}{'peak MB':>9}")
    for r in rows:
        peak = f"{r['peak_MB']:.0f}" if r["peak_MB"] else "-"
        print(f"{r['dtype']:<6}{r['batch']:>6}{r['context']:>6}{r['step_ms']:>9.2f}{r['x_realtime']:>12.2f}"
              f"{r['achieved_GBps']:>8.1f}{peak:>9}")  # fmt: skip
    result["switches"] = switch_deltas(cfg, device, repeats=3 if quick else 20)
    print("\nswitches:", json.dumps(result["switches"], indent=1))
    result["engine"] = engine_throughput(cfg, device, 4 if quick else 16)
    print("\nengine:", json.dumps(result["engine"]))
    rows = []
    for dtype in ["fp32"] if quick else ["fp32", "bf16"]:
        rows += step_variants(cfg, device, dtype, [1, 16], 512, repeats=5 if quick else 50)
    result["decode_step_variants"] = rows
    print(f"\n{'dtype':<6}{'batch':>6}  {'variant':<20}{'step ms':>9}{'vs eager':>10}{'tokens':>9}"
          f"{'max dlogit':>12}{'compile s':>11}")  # fmt: skip
    for r in rows:
        if "note" in r:
            print(f"{r['dtype']:<6}{r['batch']:>6}  {r['variant']:<20}{r['note']:>9}")
            continue
        print(f"{r['dtype']:<6}{r['batch']:>6}  {r['variant']:<20}{r['step_ms']:>9.2f}{r['vs_eager']:>9.2f}x"
              f"{r['tokens_equal']:>9}{r['max_logit_diff']:>12.2g}{r['compile_s']:>11.1f}")  # fmt: skip
    result["max_batch"] = max_batch(cfg, device, quick)
    print(f"\n{'dtype':<6}{'within':<24}{'ctx':>6}{'max batch':>10}{'limit':>8}{'peak GiB':>9}{'s':>6}")
    for r in result["max_batch"]:
        peak = f"{r['peak_GiB']:.2f}" if r["peak_GiB"] is not None else "-"
        print(f"{r['dtype']:<6}{r['within']:<24}{r['context']:>6}{r['max_batch']:>10}{r['limit']:>8}"
              f"{peak:>9}{r['seconds']:>6.0f}")  # fmt: skip
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_check.json").write_text(json.dumps(result, indent=2))
    print("\ncommand: python " + " ".join(sys.argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
