"""`ttsperf profile --optimizations`: the guide's optimisations, each measured against fp32 here.

Each variant runs in its own process, so its peak RSS (CPU) or allocator peak (CUDA) is its own:
build the synthetic model, apply the variant, time the engine's decode step at one (batch,
context) and Decoder+Vocos over 10 s of audio, report weight bytes and peak memory. Variants that
cannot apply on this device say so instead of printing a number.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass

import torch

from ttsperf.errors import UserError


@dataclass(frozen=True)
class Variant:
    name: str
    guide_claim: str
    dtype: str = "fp32"
    autocast: bool = False
    grad: str = "inference_mode"  # inference_mode | no_grad | enabled
    checkpointing: bool = False
    int8: bool = False
    cuda_only: str = ""  # "tf32_off" | "cudnn_benchmark_off": CUDA switches


VARIANTS = [
    Variant("fp32 (baseline)", "-"),
    Variant("autocast fp16/bf16 over fp32 weights", "AMP keeps a master copy: memory doubles", autocast=True),
    Variant("fp16 weights (.half())", "fp16: ~2.2 GB of weights", dtype="fp16"),
    Variant("bf16 weights", "-", dtype="bf16"),
    Variant("int8 weight-only (torchao)", "FP16/INT8 mixed quantisation", int8=True),
    Variant("no_grad instead of inference_mode", "-", grad="no_grad"),
    Variant(
        "grad enabled, weights require grad", "requires_grad off + autocast: memory -20%", grad="enabled"
    ),
    Variant("activation checkpointing", "peak 19 GB -> 12 GB, batch doubles", checkpointing=True),
    Variant("TF32 off", "TF32 on: tensor-core use +8%", cuda_only="tf32_off"),
    Variant("cudnn.benchmark off", "off: 4090 fp16 -18%", cuda_only="cudnn_benchmark_off"),
]


def _peak_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor holds; a tensor subclass (torchao's int8 weights) counts its inner tensors
    (int8 data + scales), not the dtype it presents."""
    if hasattr(t, "__tensor_flatten__"):
        names, _ = t.__tensor_flatten__()
        return sum(tensor_bytes(getattr(t, n)) for n in names)
    return t.numel() * t.element_size()


def run_variant(v: Variant, config: str, device: str, batch: int, context: int, repeats: int) -> dict:
    """In this process: one variant's step time, Decoder+Vocos time, weights and peak memory."""
    from ttsperf.engine.audio import AudioDecoder
    from ttsperf.model.config import get_config
    from ttsperf.model.forward import SlotForward
    from ttsperf.model.kv import KVSlots
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.profile.measure import median_time

    dev = torch.device(device)
    if v.cuda_only and dev.type != "cuda":
        return {"variant": v.name, "applies": False, "note": f"CUDA only; this device is {dev.type}"}
    if v.cuda_only == "tf32_off":
        torch.backends.cuda.matmul.allow_tf32 = False
    elif dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.benchmark = v.cuda_only != "cudnn_benchmark_off"
    cfg = get_config(config)
    pipe = Pipeline.synthetic_model(cfg, seed=0, device=device, dtype=v.dtype)
    model = pipe.model
    if v.int8:
        from ttsperf.engine.switches import quantize_int8
        from ttsperf.errors import UserError

        try:
            quantize_int8(model.gpt)
        except UserError as exc:  # torchao is an extra: the table says why this row is empty
            return {"variant": v.name, "applies": False, "note": str(exc)}
    if v.grad == "enabled":
        for p in model.parameters():
            p.requires_grad_(True)
    weights = sum(tensor_bytes(t) for t in [*model.parameters(), *model.buffers()])
    g = cfg.gpt
    act_dtype = next(model.gpt.parameters()).dtype  # int8 weight-only keeps the activations' dtype
    slots = KVSlots(g.num_hidden_layers, batch, g.num_key_value_heads, context + 1,
                    g.hidden_size // g.num_attention_heads, dtype=act_dtype, device=dev)  # fmt: skip
    fwd = SlotForward(model.gpt)
    if v.checkpointing:
        from torch.utils.checkpoint import checkpoint

        # Measured here, never a serving switch: checkpointing drops activations saved for backward
        # and recomputes them in it; inference (inference_mode) saves none and has no backward.
        for layer in fwd.layers:  # each layer's MLP wrapped, as a training script would
            layer.mlp.forward = (lambda f: lambda x: checkpoint(f, x, use_reentrant=False))(layer.mlp.forward)
    x = torch.randn(batch, g.hidden_size, device=dev, dtype=act_dtype)
    pos = torch.full((batch,), context, device=dev)
    hidden = [torch.randn(g.hidden_size, device=dev) for _ in range(round(10 * cfg.steps_per_second))]
    half = torch.bfloat16 if dev.type == "cpu" else torch.float16
    grad_ctx = {
        "inference_mode": torch.inference_mode,
        "no_grad": torch.no_grad,
        "enabled": contextlib.nullcontext,
    }
    with grad_ctx[v.grad](), torch.autocast(dev.type, dtype=half, enabled=v.autocast):
        step, step_spread = median_time(
            lambda: model.embed.code_logits(fwd.decode(x, slots, pos)), dev, repeats, 2
        )
        dec, _ = median_time(
            lambda: AudioDecoder(model, 0).emit(hidden, final=True), dev, max(2, repeats // 3), 1
        )
    return {
        "variant": v.name, "applies": True, "step_ms": 1000 * step, "step_spread_ms": 1000 * step_spread,
        "decode_10s_ms": 1000 * dec, "weights_MB": weights / 1e6, "peak_MB": _peak_bytes(dev) / 1e6,
        "note": "autocast dtype " + str(half).replace("torch.", "") if v.autocast else "",
    }  # fmt: skip


def measure_optimizations(
    config: str, device: str, batch: int, context: int, repeats: int, progress=None
) -> list[dict]:
    """Every variant in its own child process; rows in VARIANTS order, with the guide's claim."""
    rows = []
    for v in VARIANTS:
        if progress:
            progress(v.name)
        cmd = [sys.executable, "-m", "ttsperf.profile.optimizations", v.name, config, device,
               str(batch), str(context), str(repeats)]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            raise UserError(f"variant {v.name!r} failed: {out.stderr.strip().splitlines()[-1:]}")
        rows.append({**json.loads(line[7:]), "guide_claim": v.guide_claim})
    return rows


if (
    __name__ == "__main__"
):  # child process: python -m ttsperf.profile.optimizations NAME CONFIG DEVICE B CTX N
    name, config, device, batch, context, repeats = sys.argv[1:7]
    torch.set_num_threads(int(os.environ.get("TTSPERF_THREADS", torch.get_num_threads())))
    variant = next(v for v in VARIANTS if v.name == name)
    print(
        "RESULT " + json.dumps(run_variant(variant, config, device, int(batch), int(context), int(repeats)))
    )
