"""The --device and --dtype flags as torch takes them, checked. Only torch is imported here, so a
command can refuse a device this machine lacks before it loads the model's modules (seconds)."""

from __future__ import annotations

import torch

from ttsperf.errors import UserError

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def resolve_device(name: str) -> str:
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device {name!r}: expected cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name!r}: no CUDA device is available here (use --device cpu)")
    return str(device)


def resolve_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise UserError(f"--dtype {name!r}: expected one of {', '.join(DTYPES)}") from None
