"""`ttsperf export onnx`: the GPT decode step as ONNX with dynamic batch and context axes, checked
with onnxruntime against the engine's own step, and the trtexec command its workload asks for.

The reference for the check is not the exported module itself but the engine's code path
(model/step.py's `Step` over `KVSlots`, which scatters the new K/V where the graph selects it):
the graph must compute what `ttsperf serve` computes, at two batch sizes and two context
lengths, neither of them the example the exporter traced with.

    ttsperf export onnx --config tiny --synthetic -o gpt_step.onnx     # the command over export_step
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from ttsperf.errors import UserError
from ttsperf.export.gpt_step import INPUT_NAMES, OUTPUT_NAMES, GPTDecodeStep
from ttsperf.export.shapes import RequestShape, fixed_dims, recommend, trtexec_command
from ttsperf.model.config import ModelConfig, get_config
from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.step import Step
from ttsperf.model.weights import ChatTTSModel, build_model, load_assets

INSTALL = "pip install 'ttsperf[export]' (onnx, onnxruntime, onnxscript)"
# The graph computes in fp32 like the engine; kernels differ (ORT vs ATen), so allow rounding.
MAX_REL_ERROR = 1e-4
TRACE_SHAPE = (2, 8)  # batch, context of the traced example: not 0 or 1, which torch.export specialises
CHECK_SHAPES = ((1, 37), (5, 150))  # (batch, context) the check runs: neither is the traced one


def require_onnx() -> None:
    missing = []
    for module in ("onnx", "onnxruntime", "onnxscript"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise UserError(f"ttsperf export onnx needs {', '.join(missing)}, not installed here: {INSTALL}")


def load_model(cfg: ModelConfig, assets: str | Path | None, seed: int = 0) -> ChatTTSModel:
    model = load_assets(cfg, assets) if assets else build_model(cfg, seed=seed)
    model.embed.fold_weight_norm()
    return model.float().eval()


def random_inputs(cfg: ModelConfig, batch: int, context: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Codes, positions (the longest row at the last slot, the rest anywhere before it), random KV."""
    gen = torch.Generator().manual_seed(seed)
    d = fixed_dims(cfg.gpt)
    layers, heads, head_dim = d["layers"], d["kv_heads"], d["head_dim"]
    codes = torch.randint(0, cfg.gpt.num_audio_tokens, (batch, cfg.gpt.num_vq), generator=gen)
    positions = torch.randint(0, context, (batch,), generator=gen)
    positions[0] = context - 1
    kv = (layers, batch, heads, context, head_dim)
    return codes, positions, torch.randn(kv, generator=gen), torch.randn(kv, generator=gen)


@torch.inference_mode()
def engine_step(model: ChatTTSModel, codes, positions, past_keys, past_values) -> tuple[torch.Tensor, ...]:
    """What the engine computes for one step on these slots: model/step.py's Step over KVSlots."""
    layers, batch, heads, context, head_dim = past_keys.shape
    slots = KVSlots(layers, batch, heads, context, head_dim, dtype=past_keys.dtype, device=past_keys.device)
    slots.k.copy_(past_keys)  # every layer's K (and V): one tensor, as the graph's inputs are
    slots.v.copy_(past_values)
    hidden, logits = Step(model.embed, SlotForward(model.gpt), slots)(codes, positions)
    return logits, hidden, slots.k, slots.v


def export_graph(model: ChatTTSModel, cfg: ModelConfig, out: Path) -> None:
    from torch.export import Dim

    step = GPTDecodeStep(model).eval()
    batch = Dim("batch", min=1, max=4096)
    context = Dim("context", min=1, max=cfg.gpt.max_position_embeddings)
    kv = {1: batch, 3: context}
    dynamic = {"codes": {0: batch}, "positions": {0: batch}, "past_keys": kv, "past_values": kv}
    args = random_inputs(cfg, *TRACE_SHAPE, seed=0)
    out.parent.mkdir(parents=True, exist_ok=True)
    log = io.StringIO()  # the exporter narrates every stage on stdout and warns about torchvision
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    try:
        quiet.setLevel(logging.ERROR)
        with contextlib.redirect_stdout(log), warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                step, args, str(out), input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES),
                dynamic_shapes=dynamic, dynamo=True, optimize=True, external_data=False,
            )  # fmt: skip
    except OSError as exc:
        raise UserError(f"-o {out}: cannot write ({exc.strerror or exc})") from None
    finally:
        quiet.setLevel(level)


def check_graph(model: ChatTTSModel, cfg: ModelConfig, path: Path) -> list[dict]:
    """onnxruntime (CPU) against the engine's step at each of CHECK_SHAPES: max abs error per
    output and the largest relative one (max |onnx - torch| / max |torch|)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    results = []
    for n, (batch, context) in enumerate(CHECK_SHAPES):
        inputs = random_inputs(cfg, batch, context, seed=1 + n)
        want = engine_step(model, *inputs)
        got = session.run(
            list(OUTPUT_NAMES), {k: v.numpy() for k, v in zip(INPUT_NAMES, inputs, strict=True)}
        )
        errors = {}
        for name, w, g in zip(OUTPUT_NAMES, want, got, strict=True):
            w = w.numpy()
            if g.shape != w.shape:
                raise RuntimeError(f"onnx output {name}: shape {g.shape}, the engine's {w.shape}")
            diff = float(np.abs(g - w).max())
            errors[name] = {"max_abs": diff, "max_rel": diff / max(float(np.abs(w).max()), 1e-12)}
        worst = max(e["max_rel"] for e in errors.values())
        results.append({"batch": batch, "context": context, "errors": errors, "max_rel": worst,
                        "ok": worst <= MAX_REL_ERROR})  # fmt: skip
    return results


def graph_io(path: Path) -> dict[str, list]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph

    def dims(v) -> list:
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    return {
        "inputs": {v.name: dims(v) for v in graph.input},
        "outputs": {v.name: dims(v) for v in graph.output},
    }


def export_step(
    out: str | Path,
    *,
    config: str = "tiny",
    assets: str | Path | None = None,
    seed: int = 0,
    requests: list[RequestShape] | None = None,
    max_batch: int = 8,
    dtype: str = "fp16",
    on_stage=None,
) -> dict:
    """Write, check and describe the decode-step graph; `requests` (a workload) sets the trtexec
    shapes, `dtype` the precision trtexec may build in (the graph itself is fp32)."""
    require_onnx()
    cfg = get_config(config)
    out = Path(out)
    stage = on_stage or (lambda _name: None)
    stage("building the model")
    model = load_model(cfg, assets, seed)
    stage("exporting the decode step")
    t0 = time.perf_counter()
    export_graph(model, cfg, out)
    export_s = time.perf_counter() - t0
    stage("checking with onnxruntime against the engine's step")
    checks = check_graph(model, cfg, out)
    result = {
        "path": str(out),
        "bytes": out.stat().st_size,
        "config": cfg.name,
        "weights": str(assets) if assets else f"synthetic (seed {seed})",
        "export_seconds": round(export_s, 1),
        **graph_io(out),
        "checks": checks,
        "max_rel_error_allowed": MAX_REL_ERROR,
        "ok": all(c["ok"] for c in checks),
    }
    if requests:
        spec = recommend(requests, cfg.gpt, max_batch=max_batch)
        result["trtexec"] = trtexec_command(out, spec, dtype, engine=out.with_suffix(".plan"))
    return result
