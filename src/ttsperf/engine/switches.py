"""Runtime switches: explicit, named, applied once, reported in /healthz and every result.

Each switch that cannot apply on this device says so (`applied: false` with the reason) instead of
failing, so one command line works on a laptop and on a GPU server.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ttsperf.errors import UserError


@dataclass(frozen=True)
class Switches:
    dtype: str = "fp32"  # fp32 | fp16 | bf16: the weights' storage type
    autocast: bool = False  # fp32 weights, fp16/bf16 matmuls (the guide's torch.cuda.amp.autocast)
    tf32: bool = True  # TF32 matmuls on Ampere+ (the guide: +8%)
    cudnn_benchmark: bool = True  # the guide: -18% with it off
    inference_mode: bool = True  # vs no_grad: no version counters, no autograd bookkeeping
    compile: bool = False  # torch.compile the decode step's layers
    cuda_graphs: bool = False  # capture the decode step (CUDA only)
    checkpointing: bool = False  # activation checkpointing: saves nothing without autograd
    int8: bool = False  # int8 weight-only (dynamic) quantisation of the GPT's linear layers

    def validate(self) -> Switches:
        if self.dtype not in ("fp32", "fp16", "bf16"):
            raise UserError(f"--dtype {self.dtype!r}: expected fp32, fp16 or bf16")
        if self.int8 and self.dtype != "fp32":
            raise UserError("--int8 needs --dtype fp32 (the quantised layers compute in fp32)")
        return self


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
    note("checkpointing", False, "no autograd at inference: checkpointing has nothing to save")
    if not switches.cuda_graphs:
        note("cuda_graphs", False, "off")
    elif cuda:
        note("cuda_graphs", True, "decode step captured per (batch, context) bucket on first use")
    else:
        note("cuda_graphs", False, f"not applicable on {device.type}: CUDA graphs need a CUDA device")
    if switches.compile and switches.int8:
        # measured on tiny: 32 graphs for a 2-layer model, split at every quantised Linear
        note("compile", False, "not with --int8: the dynamic int8 Linear breaks the graph at every layer")
    elif switches.compile:
        note("compile", True, "torch.compile (inductor) of the decode step, dynamic batch and context")
    else:
        note("compile", False, "off")
    if switches.int8:
        if cuda:
            note("int8", False, "dynamic int8 quantisation runs on CPU only; use --dtype fp16/bf16 on CUDA")
        else:
            torch.ao.quantization.quantize_dynamic(
                model.gpt, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
            )
            note("int8", True, "torch.ao dynamic quantisation of the GPT's Linear layers")
    else:
        note("int8", False, "off")
    return report
