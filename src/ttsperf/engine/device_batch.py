"""The running batch held in tensors on the engine's device (vLLM v1's persistent batch).

Rows occupy slots 0..B-1 of every tensor, the KV slots included. A step reads and updates them as
whole slices, with no Python loop over rows; rows join by writing their slot and leave by moving
the last rows into the freed slots (one indexed copy per tensor for all the moves of a step).

The runner keeps a host mirror of what it needs per row (`HostMirror`), refreshed from one
device-to-host copy per step. What the scheduler keeps per row (deadlines, emit schedule, limits)
is its own (scheduler_rows.py), moved with the same moves. The tensors and the step's update of them
(`Rows`, `Rows.accept`) are model/step.py's, which the pipeline runs too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
import torch

from ttsperf.model.sampling import RowParams
from ttsperf.model.step import Rows
from ttsperf.model.transfer import to_device

# (src, dst on the device, dst on the host)
AlsoMove = Callable[[torch.Tensor, torch.Tensor, np.ndarray], None]


@dataclass
class HostMirror:
    """The runner's per-row NumPy arrays, slot = index."""

    steps: np.ndarray  # codes taken: refreshed by BatchState.sync
    done: np.ndarray  # sampled EOS: refreshed by BatchState.sync
    positions: np.ndarray  # the host's own count: the longest row's without reading the device
    kept: np.ndarray  # sampling candidates per row: the step's top-k width

    @classmethod
    def empty(cls, max_batch: int) -> HostMirror:
        i64 = np.int64
        return cls(
            np.zeros(max_batch, i64),
            np.zeros(max_batch, bool),
            np.zeros(max_batch, i64),
            np.zeros(max_batch, i64),
        )

    def columns(self) -> list[np.ndarray]:
        return [getattr(self, f.name) for f in fields(self)]


class BatchState(Rows):
    def __init__(self, *args, **kwargs):  # Rows' own
        super().__init__(*args, **kwargs)
        max_batch, device = self.codes.shape[0], self.device
        self.size = 0
        self.host = HostMirror.empty(max_batch)
        self._host_columns = self.host.columns()
        pin = device.type == "cuda"
        self._status = torch.zeros(max_batch, dtype=torch.long, pin_memory=pin)

    def add(
        self,
        positions: list[int],
        limits: list[int],
        forced: list[bool],
        keys: torch.Tensor,
        params: RowParams,
        kept: list[int],
    ) -> slice:
        """Write n new rows after the live ones -> their slice (they join the next step)."""
        n = len(positions)
        sl = slice(self.size, self.size + n)
        self.put(sl, positions, limits, forced, keys, params)
        h = self.host
        h.steps[sl], h.done[sl], h.positions[sl], h.kept[sl] = 0, False, positions, kept
        self.size += n
        return sl

    def sync(self) -> int:
        """The step's one device-to-host copy: steps done and EOS flags of the live rows.
        -> the codes taken since the last sync (a joining row's first, from its prefill, included)."""
        b, h = self.size, self.host
        packed = self.steps[:b] * 2 + self.done[:b]
        status = self._status[:b]
        status.copy_(packed, non_blocking=True)
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
        before = int(h.steps[:b].sum())
        host = status.numpy()
        h.steps[:b] = host >> 1
        h.done[:b] = (host & 1).astype(bool)
        return int(h.steps[:b].sum()) - before

    def compact(self, leaving: np.ndarray, also: AlsoMove | None = None) -> list[tuple[int, int]]:
        """Drop the rows in `leaving` (slot indices); move the last staying rows into the holes;
        `also(src, dst, holes)` moves the caller's per-slot device data (the KV slots) with the
        same index tensors, once the host mirror has moved (`holes`: dst on the host).
        -> the (src, dst) moves, for the caller's own per-slot data (the scheduler's rows)."""
        b = self.size
        gone = np.zeros(b, bool)
        gone[leaving] = True
        new_size = b - int(gone.sum())
        holes = np.flatnonzero(gone[:new_size])
        movers = np.flatnonzero(~gone[new_size:]) + new_size
        moves = list(zip(movers.tolist(), holes.tolist(), strict=True))
        if moves:
            # one packed copy that does not wait for the device (a pageable host-to-device copy,
            # torch.as_tensor(..., device=), synchronizes the stream)
            src, dst = to_device(self.device, torch.from_numpy(movers), torch.from_numpy(holes))
            for t in self.tensors():
                t[dst] = t[src]
            for column in self._host_columns:
                column[holes] = column[movers]
            if also is not None:
                also(src, dst, holes)
        self.size = new_size
        return moves

    def truncate(self, size: int) -> None:
        """Keep rows 0..size-1 (out of memory: the newest rows go back to the queue)."""
        self.size = size
