"""Per-slot KV storage, allocated once: no step ever reallocates.

Rows of the running batch occupy slots 0..B-1 contiguously, so a decode step reads
`k[:B, :, :L]` as a view. When rows leave, the last rows move into their slots (one indexed copy
per layer for all of a step's moves), which keeps the batch dense without per-step gathers.
"""

from __future__ import annotations

from typing import Protocol

import torch


class KV(Protocol):
    """Where the step reads and writes K/V: `KVSlots`, or the ONNX export's graph inputs and outputs."""

    dtype: torch.dtype

    def write_step(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None: ...

    def view(self, layer: int, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]: ...


class KVSlots:
    def __init__(
        self,
        layers: int,
        max_batch: int,
        kv_heads: int,
        max_len: int,
        head_dim: int,
        *,
        dtype: torch.dtype,
        device: torch.device,
    ):
        shape = (max_batch, kv_heads, max_len, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.max_batch, self.max_len, self.dtype = max_batch, max_len, dtype

    @staticmethod
    def bytes_needed(
        layers: int, max_batch: int, kv_heads: int, max_len: int, head_dim: int, elem: int
    ) -> int:
        return 2 * layers * max_batch * kv_heads * max_len * head_dim * elem

    @property
    def device(self) -> torch.device:
        return self.k[0].device

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))

    def write_step(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (B, kv_heads, head_dim) at each row's own position (rows = slots 0..B-1)."""
        rows = torch.arange(k.shape[0], device=k.device)
        self.k[layer][rows, :, positions] = k.to(self.k[layer].dtype)
        self.v[layer][rows, :, positions] = v.to(self.v[layer].dtype)

    def view(self, layer: int, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k[layer][:batch, :, :length], self.v[layer][:batch, :, :length]

    def write_prefixes(self, layer: int, rows: int | torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (n, kv_heads, P, head_dim) for positions 0..P-1 of slots rows..rows+n-1 (an int)
        or of the slots a (n,) tensor on the device names (a captured prefill: its slots change
        from call to call, not its code)."""
        n, p = k.shape[0], k.shape[2]
        where = slice(rows, rows + n) if isinstance(rows, int) else rows
        self.k[layer][where, :, :p] = k.to(self.k[layer].dtype)
        self.v[layer][where, :, :p] = v.to(self.v[layer].dtype)

    def move_many(self, src: torch.Tensor, dst: torch.Tensor, length: int) -> None:
        """Copy slots src[i]'s first `length` positions into slots dst[i], all at once."""
        for k, v in zip(self.k, self.v, strict=True):
            k[dst, :, :length] = k[src, :, :length]
            v[dst, :, :length] = v[src, :, :length]
