"""Per-slot KV storage, allocated once: no step ever reallocates.

Rows of the running batch occupy slots 0..B-1 contiguously, so a decode step reads
`k[:B, :, :L]` as a view. When a row leaves, the last row moves into its slot (one copy of one
row's cache), which keeps the batch dense without per-step gathers.
"""

from __future__ import annotations

import torch


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
        self.max_batch, self.max_len = max_batch, max_len

    @staticmethod
    def bytes_needed(
        layers: int, max_batch: int, kv_heads: int, max_len: int, head_dim: int, elem: int
    ) -> int:
        return 2 * layers * max_batch * kv_heads * max_len * head_dim * elem

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))

    def write_prefix(self, layer: int, slot: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (kv_heads, P, head_dim) for positions 0..P-1 of one slot."""
        n = k.shape[1]
        self.k[layer][slot, :, :n] = k
        self.v[layer][slot, :, :n] = v

    def write_step(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (B, kv_heads, head_dim) at each row's own position (rows = slots 0..B-1)."""
        rows = torch.arange(k.shape[0], device=k.device)
        self.k[layer][rows, :, positions] = k
        self.v[layer][rows, :, positions] = v

    def view(self, layer: int, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k[layer][:batch, :, :length], self.v[layer][:batch, :, :length]

    def move(self, src: int, dst: int, length: int) -> None:
        """Copy slot src's first `length` positions into slot dst (compaction after a row leaves)."""
        if src == dst:
            return
        for k, v in zip(self.k, self.v, strict=True):
            k[dst, :, :length] = k[src, :, :length]
            v[dst, :, :length] = v[src, :, :length]
