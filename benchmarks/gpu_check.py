"""GPU checks in one short script (< 10 minutes on one GPU): what the CPU-only CI cannot measure.

    python benchmarks/gpu_check.py                      # on a CUDA machine: chattts size, synthetic weights
    python benchmarks/gpu_check.py --device cpu --config tiny --quick   # dry run of every code path

It exits 1 when a check that must give the same output to the byte or the code fails (sections 9
and 10; named at the end and in the JSON's `failed`). Sections, each printed as a table (and
written to $OUT/gpu_check.json when OUT is set):
  1. correctness: the GPT step and Decoder+Vocos on the device vs on the CPU, fp32 (relative error)
  2. decode step time (engine's slot forward, synchronised, median of repeats) per dtype x batch x
     context, with peak memory from the allocator and achieved weight bandwidth
  3. TF32 on/off (fp32 matmuls) and cudnn.benchmark on/off (Decoder+Vocos convolutions)
  4. the engine end to end: 16 concurrent synthetic requests, audio seconds per second
  5. the engine's whole step (decode + sampling + state update + its one host read) eager,
     --compile, --cuda-graphs and both, at batch 1, 16, 64 and 256 (bf16): step ms, row-steps per
     second and blocking host reads per step (scalar reads and device-to-host copies not queued
     into pinned memory, counted); --cuda-graphs also with each step's status read at once. On a
     CPU dry run there are no CUDA-graph rows, compile runs on the CPU and "eager one ahead"
     forces the card's one-step-ahead path.
  6. the largest batch that fits (`profile --max-batch-search`'s OOM-safe bisection), fp32 and
     fp16, at 439 tokens (the guide's 8 s clip + a 64-token prompt) and 2048; and in fp16 at 439
     within the allocator budgets of a 10 GB RTX 3080 and a 40 GB A100 (card less ~0.8 GiB of CUDA
     context), the guide's "batch 4 OOMs on a 3080, an A100 runs batch 24"
  8. the engine's audio call (Decoder+Vocos over `rows` streamed chunks) eager, --compile and
     --cuda-graphs (GraphedAudio), at 1, 16, 64 and 256 rows: ms per call, first call (compile or
     capture) apart, largest difference from eager. CPU dry run: no compile (minutes of Inductor),
     the graphs' padding run eagerly in place of a capture.
  9. the prefill eager and --cuda-graphs (GraphedPrefill), 1, 2, 4 and 8 rows: ms per call, the
     first call (capture) apart, largest difference from eager, the same first codes; CPU dry run:
     the graphs' padding run eagerly.
  10. one step ahead: a request alone, streamed, with the step's status read at once and one step
     ahead (CUDA graphs on a card): the same audio to the byte (section 5 times both; its
     "cuda_graphs at once" row is the read-at-once step); and 4 decode steps a turn
     (`--steps-per-turn 4`, section 5's "4 a turn" row): the same steps and chunks, the largest
     sample difference; one step ahead with the PCM made by the audio call (inside its graphs on a
     card): the host's to_pcm16 of the float chunks, to the byte
  7. streams held: closed loops of 16, 64, 128 and 256 streaming clients (5 s clips, bf16, CUDA
     graphs) for 20 s each: TTFA p50/p99 and audio s/s; the most streams at TTFA p99 <= 300 ms
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from ttsperf.audio import to_pcm16  # noqa: E402
from ttsperf.engine.audio import BatchedAudio  # noqa: E402
from ttsperf.engine.engine import Engine, EngineConfig  # noqa: E402
from ttsperf.engine.graphs import GraphedAudio  # noqa: E402
from ttsperf.engine.runner import Admission  # noqa: E402
from ttsperf.engine.switches import Switches  # noqa: E402
from ttsperf.engine.types import AudioChunk, PcmChunk, SynthRequest  # noqa: E402
from ttsperf.model.config import get_config  # noqa: E402
from ttsperf.model.forward import SlotForward  # noqa: E402
from ttsperf.model.kv import KVSlots  # noqa: E402
from ttsperf.model.pipeline import DTYPES, Pipeline  # noqa: E402
from ttsperf.model.sampling import SamplingParams  # noqa: E402
from ttsperf.profile.host import audio_steps, audio_windows  # noqa: E402
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


class DeviceReads(TorchDispatchMode):
    """Counts the host's waits on the device: scalar reads and device-to-host copies."""

    SCALAR = {aten._local_scalar_dense.default, aten.is_nonzero.default, aten.equal.default}

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.SCALAR:
            self.count += 1
        elif func is aten.copy_.default and args[0].device.type == "cpu" and args[1].device.type != "cpu":
            # not a copy queued into pinned memory (the step's status, read a step later)
            queued = (args[2] if len(args) > 2 else kwargs.get("non_blocking", False)) and args[0].is_pinned()
            self.count += not queued
        elif func is aten._to_copy.default and args[0].device.type != "cpu":
            self.count += torch.device(kwargs.get("device") or args[0].device).type == "cpu"
        return func(*args, **kwargs)


LONG_TEXT = "你好，这是一段用于压测的文本，长度八秒左右。" * 4  # ~700 steps: longer than any window here


def engine_steps(cfg, device, dtype: str, batches: list[int], quick: bool) -> list[dict]:
    """The engine's whole step (decode + sampling + state update + its host read) vs batch, for
    eager, --compile, --cuda-graphs and both; one engine per variant, rows admitted per batch and
    cancelled after. Host reads per step counted on 5 steps of each batch."""
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device), dtype=dtype)
    # (switches, overlap, steps a turn): on CUDA the engine reads step N while step N+1 runs
    # (None: its default); "at once" reads each step before launching the next, as before issue
    # 33 item 3; "4 a turn": serve --steps-per-turn 4 (ms and reads per decode step)
    variants: dict[str, tuple[dict, bool | None, int]] = {
        "eager": ({}, None, 1),
        "compile": ({"compile": True}, None, 1),
    }
    if device.type == "cuda":
        variants |= {
            "cuda_graphs": ({"cuda_graphs": True}, None, 1),
            "cuda_graphs at once": ({"cuda_graphs": True}, False, 1),
            "cuda_graphs 4 a turn": ({"cuda_graphs": True}, None, 4),
            "compile+cuda_graphs": ({"compile": True, "cuda_graphs": True}, None, 1),
        }
    else:  # the dry run: one step ahead forced, the path a card takes
        variants |= {"eager one ahead": ({}, True, 1), "eager one ahead 4 a turn": ({}, True, 4)}
    warm, measured = (2, 3) if quick else (5, 20)
    rows = []
    for name, (switches, overlap, steps) in variants.items():
        config = EngineConfig(
            max_batch=max(batches), max_queue=max(batches), max_prompt_tokens=160, max_new_tokens=1024,
            overlap=overlap, steps_per_turn=steps,
        )  # fmt: skip
        engine = Engine(pipe, config, Switches(dtype=dtype, **switches))
        with engine._contexts():
            if engine.decode_step.compiled:
                engine.decode_step.compile_now(engine.switch_report["compile"])
            for batch in batches:
                handles = [
                    engine.submit(SynthRequest(LONG_TEXT, SamplingParams(seed=i))) for i in range(batch)
                ]
                while engine.running() < batch:
                    engine._admit()
                    engine._step()
                for _ in range(warm):  # CUDA graphs capture here
                    engine._step()
                t0 = time.perf_counter()
                for _ in range(measured):
                    engine._step()
                ms = 1000 * (time.perf_counter() - t0) / measured / steps
                with DeviceReads() as reads:
                    for _ in range(5):
                        engine._step()
                for h in handles:
                    h.cancel()
                while engine.running():
                    engine._step()
                rows.append({
                    "dtype": dtype, "batch": batch, "variant": name, "step_ms": ms,
                    "row_steps_per_s": batch * 1000 / ms, "host_reads_per_step": reads.count / 5 / steps,
                    "applied": {k: engine.switch_report[k]["applied"] for k in switches},
                    "compile_s": engine.decode_step.compile_seconds, "overlap": engine.overlap,
                    "graphs": len(engine.runner.graphed.graphs) if engine.runner.graphed else 0,
                })  # fmt: skip
        del engine
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def one_ahead_same_audio(cfg, device, dtype: str) -> dict:
    """A request alone, streamed, its status read at once and one step ahead: the same bytes; 4 steps
    a turn one step ahead: the same steps and chunks, samples to float rounding; and one step ahead
    with the PCM made by the audio call (the engine process's mode; on a card inside the audio
    graphs): the bytes the host makes from the float samples."""
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device), dtype=dtype)
    switches = Switches(dtype=dtype, cuda_graphs=device.type == "cuda")
    got = {}
    for overlap, steps, pcm in ((False, 1, False), (True, 1, False), (True, 4, False), (True, 1, True)):
        config = EngineConfig(
            max_batch=4, max_prompt_tokens=160, max_new_tokens=512, overlap=overlap, steps_per_turn=steps,
            pcm=pcm,
        )  # fmt: skip
        engine = Engine(pipe, config, switches).start()
        try:
            request = SynthRequest(LONG_TEXT[:40], SamplingParams(seed=7), stream=True)
            handle, chunks = engine.submit(request), []
            event = handle.next_event_blocking(timeout=300)
            while isinstance(event, AudioChunk | PcmChunk):
                chunks.append(event.pcm if pcm else event.samples.tobytes())
                event = handle.next_event_blocking(timeout=300)
            got[overlap, steps, pcm] = (chunks, getattr(event, "steps", None))
        finally:
            engine.stop(drain=False, timeout=60)
    (one, one_steps), (four, four_steps) = got[True, 1, False], got[True, 4, False]
    same_cuts = one_steps == four_steps and [len(c) for c in one] == [len(c) for c in four]
    diff = None
    if same_cuts:  # the samples are float32 (AudioChunk)
        diffs = [
            np.abs(np.frombuffer(a, np.float32) - np.frombuffer(b, np.float32))
            for a, b in zip(one, four, strict=True)
        ]
        diff = max((float(d.max()) for d in diffs if d.size), default=0.0)
    host_pcm = [to_pcm16(np.frombuffer(c, np.float32)) for c in one]
    return {
        "chunks": len(one), "steps": one_steps, "same_bytes": got[False, 1, False] == got[True, 1, False],
        "four_a_turn": {"same_steps_and_chunks": same_cuts, "largest_difference": diff},
        "pcm_on_device_same_bytes": got[True, 1, True] == (host_pcm, one_steps),
    }  # fmt: skip


def _stream_client(engine, text: str, seed: int, stop: float, ttfa: list, audio: list) -> None:
    """One closed-loop client: request, note the first chunk's delay, read to the end, again."""
    while time.perf_counter() < stop:
        t0 = time.perf_counter()
        handle = engine.submit(SynthRequest(text, SamplingParams(seed=seed), stream=True))
        event = handle.next_event_blocking(timeout=300)
        ttfa.append(time.perf_counter() - t0)
        while hasattr(event, "samples"):
            event = handle.next_event_blocking(timeout=300)
        audio.append(getattr(event, "audio_seconds", 0.0))


def streams_at_ttfa(cfg, device, dtype: str, loads: list[int], seconds: float) -> list[dict]:
    """Closed loops of N streaming clients (5 s of audio each) against one engine (CUDA graphs
    where CUDA is): TTFA p50/p99 and audio seconds per second; the most N with p99 <= 300 ms is
    the streams one GPU holds at that SLO."""
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device), dtype=dtype)
    switches = Switches(dtype=dtype, cuda_graphs=device.type == "cuda")
    config = EngineConfig(
        max_batch=max(loads), max_queue=2 * max(loads), max_prompt_tokens=160, max_new_tokens=512
    )
    engine = Engine(pipe, config, switches).start()
    text = "你好，这是一段用于压测的文本，二十六个字。"  # ~5 s at the sourced speech rate
    rows = []
    try:
        for n in loads:
            ttfa: list[float] = []
            audio: list[float] = []
            stop = time.perf_counter() + seconds
            t0 = time.perf_counter()
            threads = [
                threading.Thread(target=_stream_client, args=(engine, text, i, stop, ttfa, audio))
                for i in range(n)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
            q = sorted(ttfa)
            p99 = q[min(len(q) - 1, int(0.99 * len(q)))]
            rows.append({
                "dtype": dtype, "streams": n, "requests": len(q), "ttfa_p50_ms": 1000 * q[len(q) // 2],
                "ttfa_p99_ms": 1000 * p99, "audio_per_s": sum(audio) / wall,
            })  # fmt: skip
    finally:
        engine.stop(drain=False, timeout=60)
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


@torch.inference_mode()
def audio_modes(cfg, device, dtype: str, rows_list: list[int], quick: bool) -> list[dict]:
    """8. the audio call per mode: ms per call (median), first call's seconds, max |diff| vs eager."""
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device), dtype=dtype)
    cuda = device.type == "cuda"
    modes = {"eager": BatchedAudio(pipe.model, 4)}
    if not quick:
        modes["compile"] = BatchedAudio(pipe.model, 4, compile=True)
    steps = audio_steps(modes["eager"]) + 1
    graphed = BatchedAudio(pipe.model, 4)
    graphed.call = GraphedAudio(graphed.synthesize, max(rows_list), steps, capture=cuda)
    modes["cuda_graphs" if cuda else "graphs padding (eager)"] = graphed
    out = []
    for rows in rows_list:
        windows = audio_windows(modes["eager"], rows)
        hidden = torch.randn(rows, steps, cfg.gpt.hidden_size, device=device)
        reference = None
        for name, audio in modes.items():
            t0 = time.perf_counter()
            samples = audio.decode(hidden, windows)  # compiles or captures
            first = time.perf_counter() - t0
            reference = reference or samples
            diff = max(float(abs(a - b).max()) for a, b in zip(reference, samples, strict=True))
            ms = 1e3 * timed(lambda a=audio: a.decode(hidden, windows), device, 3 if quick else 20)  # noqa: B023
            out.append({"rows": rows, "mode": name, "ms": ms, "first_call_s": first, "max_diff": diff})
    return out


def prefill_modes(cfg, device, dtype: str, rows_list: list[int], quick: bool) -> list[dict]:
    """9. the prefill (Runner.prefill: the joining rows' forward, code logits and first sample)
    eager and --cuda-graphs (GraphedPrefill), rows joining an empty batch: ms per call (median),
    the first call (its bucket's capture) apart, the largest difference of the rows' hidden states
    from eager's and whether their first codes are eager's. CPU dry run: the padding run eagerly."""
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=str(device), dtype=dtype)
    cuda = device.type == "cuda"
    config = EngineConfig(max_batch=16, max_queue=16, graphs_without_capture=not cuda)
    engines = {
        "eager": Engine(pipe, config, Switches(dtype=dtype)),
        "cuda_graphs" if cuda else "graphs padding (eager)": Engine(
            pipe, config, Switches(dtype=dtype, cuda_graphs=cuda)
        ),
    }
    out = []
    for rows in rows_list:
        joining = [
            Admission(LONG_TEXT, "[speed_5]", SamplingParams(seed=i), i, 100, True) for i in range(rows)
        ]
        reference = None
        for name, engine in engines.items():
            r = engine.runner
            with engine._contexts():
                t0 = time.perf_counter()
                r.prefill(joining)  # captures its bucket (graphs)
                if cuda:
                    torch.cuda.synchronize()
                first = time.perf_counter() - t0
                got = r.state.hidden[:rows, 0].float().cpu(), r.state.codes[:rows].cpu()
                r.truncate(0)

                def call(r=r, joining=joining):
                    r.prefill(joining)
                    r.truncate(0)

                ms = 1e3 * timed(call, device, 3 if quick else 20)
            reference = reference or got
            diff = float((got[0] - reference[0]).abs().max())
            same = bool(torch.equal(got[1], reference[1]))
            out.append(
                {
                    "rows": rows,
                    "mode": name,
                    "ms": ms,
                    "first_call_s": first,
                    "max_diff": diff,
                    "same_codes": same,
                }
            )
    return out


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
    dtype = "fp32" if device.type != "cuda" else "bf16"
    result["engine_steps"] = engine_steps(cfg, device, dtype, [1, 4] if quick else [1, 16, 64, 256], quick)
    print(f"\n{'dtype':<6}{'batch':>6}  {'variant':<20}{'step ms':>9}{'row-steps/s':>12}{'reads':>7}"
          f"{'compile s':>10}")  # fmt: skip
    for r in result["engine_steps"]:
        print(f"{r['dtype']:<6}{r['batch']:>6}  {r['variant']:<20}{r['step_ms']:>9.2f}"
              f"{r['row_steps_per_s']:>12.0f}{r['host_reads_per_step']:>7.1f}"
              f"{r['compile_s']:>10.1f}")  # fmt: skip
    loads = [2, 4] if quick else [16, 64, 128, 256]
    result["streams_at_ttfa"] = streams_at_ttfa(cfg, device, dtype, loads, 2.0 if quick else 20.0)
    print(
        f"\n{'dtype':<6}{'streams':>8}{'requests':>9}{'TTFA p50 ms':>12}{'TTFA p99 ms':>12}{'audio s/s':>10}"
    )
    for r in result["streams_at_ttfa"]:
        print(f"{r['dtype']:<6}{r['streams']:>8}{r['requests']:>9}{r['ttfa_p50_ms']:>12.0f}{r['ttfa_p99_ms']:>12.0f}"
              f"{r['audio_per_s']:>10.1f}")  # fmt: skip
    dt = "fp32" if device.type != "cuda" else "bf16"
    result["audio_modes"] = audio_modes(cfg, device, dt, [1, 4] if quick else [1, 16, 64, 256], quick)
    print(f"\n{'rows':>5}  {'audio call mode':<24}{'ms':>9}{'first s':>9}{'max diff':>10}")
    for r in result["audio_modes"]:
        print(
            f"{r['rows']:>5}  {r['mode']:<24}{r['ms']:>9.2f}{r['first_call_s']:>9.1f}{r['max_diff']:>10.2e}"
        )
    result["prefill_modes"] = prefill_modes(cfg, device, dt, [1, 2, 4, 8], quick)
    print(f"\n{'rows':>5}  {'prefill mode':<24}{'ms':>9}{'first s':>9}{'max diff':>10}{'codes':>7}")
    for r in result["prefill_modes"]:
        print(
            f"{r['rows']:>5}  {r['mode']:<24}{r['ms']:>9.2f}{r['first_call_s']:>9.2f}{r['max_diff']:>10.2e}"
            f"{'same' if r['same_codes'] else 'DIFF':>7}"
        )
    result["one_ahead"] = one_ahead_same_audio(cfg, device, dt)
    print("\none step ahead vs read at once, a request alone:", json.dumps(result["one_ahead"]))
    result["max_batch"] = max_batch(cfg, device, quick)
    print(f"\n{'dtype':<6}{'within':<24}{'ctx':>6}{'max batch':>10}{'limit':>8}{'peak GiB':>9}{'s':>6}")
    for r in result["max_batch"]:
        peak = f"{r['peak_GiB']:.2f}" if r["peak_GiB"] is not None else "-"
        print(f"{r['dtype']:<6}{r['within']:<24}{r['context']:>6}{r['max_batch']:>10}{r['limit']:>8}"
              f"{peak:>9}{r['seconds']:>6.0f}")  # fmt: skip
    result["failed"] = failed = same_output_failures(result)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_check.json").write_text(json.dumps(result, indent=2))
    print("\nsame output where it must be: " + ("FAILED: " + "; ".join(failed) if failed else "all passed"))
    print("\ncommand: python " + " ".join(sys.argv))
    return 1 if failed else 0


def same_output_failures(result: dict) -> list[str]:
    """The checks that must hold to the byte or the code on any device; a card session reads the
    exit status (1) and this list, not every table above."""
    ahead = result["one_ahead"]
    checks = {
        "one step ahead: the same bytes as read at once": ahead["same_bytes"],
        "4 steps a turn: the same steps and chunks": ahead["four_a_turn"]["same_steps_and_chunks"],
        "the PCM made by the audio call: the host's bytes": ahead["pcm_on_device_same_bytes"],
        **{
            f"prefill {r['mode']}, {r['rows']} rows: the same first codes": r["same_codes"]
            for r in result["prefill_modes"]
        },
    }
    return [name for name, ok in checks.items() if not ok]


if __name__ == "__main__":
    sys.exit(main())
