"""Runtime switches: explicit, named, applied once, reported in /healthz and every result.

Each switch that cannot apply on this device says so (`applied: false` with the reason) instead of
failing, so one command line works on a laptop and on a GPU server.
"""

from __future__ import annotations

import torch

from ttsperf.engine.config import Switches
from ttsperf.errors import UserError


def apply_switches(switches: Switches, model: torch.nn.Module, device: torch.device) -> dict:
    """Set the process-wide flags and transform the model; return what applied and why not."""
    cuda = device.type == "cuda"
    report: dict[str, dict] = {}

    def note(name: str, applied: bool, why: str = "") -> None:
        report[name] = {"value": getattr(switches, name), "applied": applied, "note": why}

    note("dtype", True)
    note("autocast", switches.autocast, "" if switches.autocast else "off")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = switches.tf32
        torch.backends.cudnn.allow_tf32 = switches.tf32
        torch.backends.cudnn.benchmark = switches.cudnn_benchmark
        note("tf32", True)
        note("cudnn_benchmark", True)
    else:
        note("tf32", False, f"not applicable on {device.type}: TF32 is an NVIDIA tensor-core mode")
        note("cudnn_benchmark", False, f"not applicable on {device.type}: cuDNN is CUDA-only")
    note("inference_mode", True, "" if switches.inference_mode else "torch.no_grad() instead")
    if not switches.cuda_graphs:
        note("cuda_graphs", False, "off")
    elif cuda:
        note(
            "cuda_graphs", True,
            "decode step captured per (batch, context) bucket, audio call per (rows, steps, "
            "frames) bucket, all before /readyz (ready means warm; a bucket out of memory then, on "
            "first use)",
        )  # fmt: skip
    else:
        note("cuda_graphs", False, f"not applicable on {device.type}: CUDA graphs need a CUDA device")
    if switches.compile:
        note(
            "compile",
            True,
            "torch.compile (inductor) of the decode step (dynamic batch and context) and of the "
            "audio call (dynamic rows, steps and frames; with cuda_graphs, its graphs replay it uncompiled)",
        )
    else:
        note("compile", False, "off")
    if switches.int8:
        quantize_int8(model.gpt)
        note(
            "int8",
            True,
            f"torchao int8 weight-only: the GPT's Linear weights in int8, activations {switches.dtype}",
        )
    else:
        note("int8", False, "off")
    return report


def quantize_int8(gpt: torch.nn.Module) -> None:
    """int8 weight-only quantisation of every Linear layer (torchao's Int8WeightOnlyConfig): the
    weights are stored as int8 with a scale per output channel and dequantised in the matmul,
    activations keep the model's dtype. Works on CPU and CUDA."""
    try:  # (ttsperf.model keeps torchao's import-time warnings out of the output)
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
    except ImportError:
        raise UserError("--int8 needs torchao: pip install 'ttsperf[int8]' (or torchao)") from None
    quantize_(gpt, Int8WeightOnlyConfig())
