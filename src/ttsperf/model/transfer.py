"""Host tensors to the device in one copy that does not make the host wait.

A blocking host-to-device copy in PyTorch ends with a stream synchronize: the host waits for all
the work it queued before, then queues the next op while the device idles. On an H200 the engine's
prefill made 3n+7 of them per call of n rows (three per prompt, seven for the rows' settings) and
took 21-32 ms a call, 31-46% of the engine's wall (docs/PERFORMANCE.md, "The engine split on a real
H200"). Packed into one pinned buffer and copied with `non_blocking=True`, the same inputs cost one
copy and no synchronize: the copy is queued behind the device's work like any kernel.

    ids, text = to_device(device, ids_on_host, text_on_host)

Tensors already on `device` pass through; on a CPU there is nothing to copy. PyTorch's pinned
(page-locked) host allocator keeps the buffer alive until the queued copy has read it.
"""

from __future__ import annotations

import torch

ALIGN = 8  # bytes: every part starts where any element type may begin (int64, float64)


def pack(tensors: list[torch.Tensor], pin: bool = False) -> tuple[torch.Tensor, list[int]]:
    """Host tensors -> one byte buffer holding them all, and each one's offset in it."""
    offsets, total = [], 0
    for t in tensors:
        total = -(-total // ALIGN) * ALIGN
        offsets.append(total)
        total += t.numel() * t.element_size()
    buffer = torch.empty(total, dtype=torch.uint8, pin_memory=pin)
    for t, at in zip(tensors, offsets, strict=True):
        _part(buffer, at, t).copy_(t)
    return buffer, offsets


def unpack(buffer: torch.Tensor, offsets: list[int], like: list[torch.Tensor]) -> list[torch.Tensor]:
    """Views of `buffer` (on any device) with the dtypes and shapes of `like`."""
    return [_part(buffer, at, t) for t, at in zip(like, offsets, strict=True)]


def _part(buffer: torch.Tensor, at: int, like: torch.Tensor) -> torch.Tensor:
    size = like.numel() * like.element_size()
    return buffer[at : at + size].view(like.dtype).view(like.shape)


def to_device(device: torch.device | str, *tensors: torch.Tensor) -> list[torch.Tensor]:
    """`tensors` on `device`: the host ones in one packed copy (pinned, non-blocking on CUDA)."""
    device = torch.device(device)
    if device.type != "cuda":  # a CPU: nothing moves (another device: a copy each, as before)
        return [t.to(device) for t in tensors]
    moving = [i for i, t in enumerate(tensors) if t.device.type == "cpu"]
    out = list(tensors)
    if not moving:
        return out
    host = [tensors[i].contiguous() for i in moving]
    buffer, offsets = pack(host, pin=True)
    on_device = buffer.to(device, non_blocking=True)
    for i, t in zip(moving, unpack(on_device, offsets, host), strict=True):
        out[i] = t
    return out
