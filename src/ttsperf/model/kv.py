"""Per-slot KV storage, allocated once: no step ever reallocates.

Rows of the running batch occupy slots 0..B-1 contiguously, so a decode step reads
`k[:B, :, :L]` as a view. When rows leave, the last rows move into their slots, which keeps the
batch dense without per-step gathers. Every layer's K (and V) is a view of one tensor, so a step's
moves are one indexed copy for all layers, not one per layer (chattts: 4 device calls, not 80);
on a CPU, where a copy costs its bytes rather than its launch, one slice copy per move.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

# the most bytes one group of KV moves copies at once (chattts fp16, a full slot: 79 MB a move for
# all 20 layers of K): one group for a few moves, more when many rows leave at once
MOVE_BYTES = 256 << 20


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
        shape = (layers, max_batch, kv_heads, max_len, head_dim)
        # every layer's K (and V) in one tensor; k[layer] is a view made where it is used, in that
        # grad mode: views made once and kept (unbind's, or any made under no_grad) may not be
        # written in place with grad on
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        # Writes index k and v whole, the layer by a tensor: written through a view (k[layer]),
        # a compiled step or prefill copied that layer's whole K and V out and back every call
        # (inductor does not write a view of an input in place: chattts's compiled step took 25x
        # the eager one). One tensor per layer, made once: no copy to the device per write; of
        # one element, not 0-d (inductor reads a 0-d index on the host); each its own, not a
        # view (compiled, a view's storage offset is one more size, tied to any size equal to it)
        self._layers = [torch.full((1,), i, device=device) for i in range(layers)]
        # the rows' and positions' indices as views of these: no arange launched per layer
        self._rows, self._positions = (torch.arange(n, device=device) for n in (max_batch, max_len))
        self.max_batch, self.max_len, self.dtype = max_batch, max_len, dtype

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor it holds: a compiled step pins their sizes (they never change)."""
        return [self.k, self.v, *self._layers, self._rows, self._positions]

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
        return self.k.nbytes + self.v.nbytes

    def write_step(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (B, kv_heads, head_dim) at each row's own position (rows = slots 0..B-1)."""
        where = (self._layers[layer], self._rows[: k.shape[0]], slice(None), positions)  # -> (B, heads, dim)
        self.k[where] = k.to(self.dtype)
        self.v[where] = v.to(self.dtype)

    def view(self, layer: int, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k[layer][:batch, :, :length], self.v[layer][:batch, :, :length]

    def write_prefixes(self, layer: int, rows: int | torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (n, kv_heads, P, head_dim) for positions 0..P-1 of slots rows..rows+n-1 (an int)
        or of the slots a (n,) tensor on the device names (a captured prefill: its slots change
        from call to call, not its code)."""
        n, p = k.shape[0], k.shape[2]
        slots = self._rows[rows : rows + n] if isinstance(rows, int) else rows
        # indices, not a slice `:p`: one scatter, written in place when compiled (see __init__)
        where = (
            self._layers[layer],
            slots.unsqueeze(1),
            slice(None),
            self._positions[:p],
        )  # (n, p, heads, dim)
        self.k[where] = k.transpose(1, 2).to(self.dtype)
        self.v[where] = v.transpose(1, 2).to(self.dtype)

    def move_many(
        self,
        src: torch.Tensor,
        dst: torch.Tensor,
        length: int,
        moves: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        """Copy slots src[i]'s first `length` positions into slots dst[i], every layer at once.

        On a card a copy costs its launch: one gather, then one scatter, for all the moves
        (`_gather_scatter`). On a CPU a copy costs its bytes, and a gather then a scatter copy every
        byte twice, through a buffer: there, given the same moves as the host's (src, dst) pairs
        (`moves`; read off the index tensors they would be a device read on a card), each is one
        slice copy of K and one of V (a chattts row at 300 positions, 37 MB, moved in 3.7-4.1 ms
        against 9.7-16.3; at 600 in 7.0-7.3 against 50-73: benchmarks/kv_moves.py)."""
        if moves is None or self.k.device.type != "cpu":
            self._gather_scatter(src, dst, length)
            return
        for s, d in moves:
            for t in (self.k, self.v):
                t[:, d, :, :length].copy_(t[:, s, :, :length])

    def _gather_scatter(self, src: torch.Tensor, dst: torch.Tensor, length: int) -> None:
        """`move_many` as two calls per K and V group of layers, however many moves. The gather's
        copy is bounded (MOVE_BYTES) by moving the layers in groups: the caching allocator keeps
        it for the next moves."""
        layers, _, heads, _, head_dim = self.k.shape
        per_layer = src.numel() * heads * length * head_dim * self.k.element_size()
        group = max(1, MOVE_BYTES // max(1, per_layer))
        for first in range(0, layers, group):
            for t in (self.k, self.v):
                part = t[first : first + group]
                part[:, dst, :, :length] = part[:, src, :, :length]
