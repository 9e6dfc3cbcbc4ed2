"""The running batch held in tensors on the engine's device (vLLM v1's persistent batch).

Rows occupy slots 0..B-1 of every tensor, the KV slots included. A step reads and updates them as
whole slices, with no Python loop over rows; rows join by writing their slot and leave by moving
the last rows into the freed slots (one indexed copy per tensor for all the moves of a step).

The host keeps a mirror of what it needs to schedule (steps done, limits, emit schedule,
deadlines) in NumPy arrays, refreshed from one device-to-host copy per step. The tensors and the
step's update of them (`Rows`, `Rows.accept`) are model/step.py's, which the pipeline runs too.
"""

from __future__ import annotations

import numpy as np
import torch

from ttsperf.model.sampling import RowParams
from ttsperf.model.step import Rows


class BatchState(Rows):
    def __init__(self, *args, **kwargs):  # Rows' own
        super().__init__(*args, **kwargs)
        max_batch, device = self.codes.shape[0], self.device
        self.size = 0
        # the host's per-row arrays: steps and done refreshed by `sync`, the rest the host's own
        self.host = {
            "steps": np.zeros(max_batch, np.int64),
            "done": np.zeros(max_batch, bool),
            "limits": np.zeros(max_batch, np.int64),
            "kept": np.zeros(max_batch, np.int64),
            "positions": np.zeros(max_batch, np.int64),
            "deadline": np.zeros(max_batch, np.float64),
            "stream": np.zeros(max_batch, bool),
            "next_emit": np.zeros(max_batch, np.int64),
        }
        pin = device.type == "cuda"
        self._status = torch.zeros(max_batch, dtype=torch.long, pin_memory=pin)

    def add(
        self,
        positions: list[int],
        limits: list[int],
        forced: list[bool],
        keys: torch.Tensor,
        params: RowParams,
        host: dict[str, list],
    ) -> slice:
        """Write n new rows after the live ones -> their slice (they join the next step).
        `host`: the new rows' values of the host-only arrays (deadline, stream, next_emit, kept)."""
        n = len(positions)
        sl = slice(self.size, self.size + n)
        self.put(sl, positions, limits, forced, keys, params)
        h = self.host
        h["steps"][sl], h["done"][sl], h["limits"][sl], h["positions"][sl] = 0, False, limits, positions
        for name, values in host.items():
            h[name][sl] = values
        self.size += n
        return sl

    def sync(self) -> None:
        """The step's one device-to-host copy: steps done and EOS flags of the live rows."""
        b = self.size
        packed = self.steps[:b] * 2 + self.done[:b]
        status = self._status[:b]
        status.copy_(packed, non_blocking=True)
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
        host = status.numpy()
        self.host["steps"][:b] = host >> 1
        self.host["done"][:b] = (host & 1).astype(bool)

    def compact(self, leaving: np.ndarray) -> list[tuple[int, int]]:
        """Drop the rows in `leaving` (slot indices); move the last staying rows into the holes.
        -> the (src, dst) moves, for the caller's own per-slot data (KV slots, Python rows)."""
        b = self.size
        gone = np.zeros(b, bool)
        gone[leaving] = True
        new_size = b - int(gone.sum())
        holes = np.flatnonzero(gone[:new_size])
        movers = np.flatnonzero(~gone[new_size:]) + new_size
        moves = list(zip(movers.tolist(), holes.tolist(), strict=True))
        if moves:
            src = torch.as_tensor(movers, device=self.device)
            dst = torch.as_tensor(holes, device=self.device)
            for t in self.tensors():
                t[dst] = t[src]
            for host in self.host.values():
                host[holes] = host[movers]
        self.size = new_size
        return moves

    def truncate(self, size: int) -> None:
        """Keep rows 0..size-1 (out of memory: the newest rows go back to the queue)."""
        self.size = size
