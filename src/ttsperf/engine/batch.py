"""The running batch held in tensors on the engine's device (vLLM v1's persistent batch).

Rows occupy slots 0..B-1 of every tensor, the KV slots included. A step reads and updates them as
whole slices, with no Python loop over rows; rows join by writing their slot and leave by moving
the last rows into the freed slots (one indexed copy per tensor for all the moves of a step).

The host keeps a mirror of what it needs to schedule (steps done, limits, emit schedule,
deadlines) in NumPy arrays, refreshed from one device-to-host copy per step.
"""

from __future__ import annotations

import numpy as np
import torch

from ttsperf.model.sampling import PENALTY_WINDOW, RowParams


class BatchState:
    def __init__(
        self, max_batch: int, num_vq: int, hidden_size: int, max_new_tokens: int, device: torch.device
    ):
        def zeros(*shape, dtype=torch.long):
            return torch.zeros(*shape, dtype=dtype, device=device)

        self.device = device
        self.codes = zeros(max_batch, num_vq)  # each row's last accepted codes: the next input
        self.positions = zeros(max_batch)  # where each row's next token goes in its KV slot
        self.steps = zeros(max_batch)  # codes accepted so far (= hidden states kept)
        self.limits = zeros(max_batch)
        self.forced = zeros(max_batch, dtype=torch.bool)  # length from the speech-rate model
        self.done = zeros(max_batch, dtype=torch.bool)  # sampled EOS
        self.keys = zeros(max_batch)  # stateless sampling: seed_key of the row's seed
        self.history = torch.full((max_batch, num_vq, PENALTY_WINDOW), -1, dtype=torch.long, device=device)
        self.params = RowParams(
            temperature=zeros(max_batch, dtype=torch.float32),
            top_p=zeros(max_batch, dtype=torch.float32),
            kept=zeros(max_batch),
            penalty=zeros(max_batch, dtype=torch.float32),
            greedy=zeros(max_batch, dtype=torch.bool),
        )
        # one spare step: a row that is no longer live writes its (ignored) state there
        self.hidden = zeros(max_batch, max_new_tokens + 1, hidden_size, dtype=torch.float32)
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

    def tensors(self) -> list[torch.Tensor]:
        """Every per-row tensor (first dimension = slot)."""
        p = self.params
        return [
            self.codes, self.positions, self.steps, self.limits, self.forced, self.done, self.keys,
            self.history, *p.fields(), self.hidden,
        ]  # fmt: skip

    def rows(self, sl: slice) -> RowParams:
        return RowParams(*(t[sl] for t in self.params.fields()))

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

        def put(t: torch.Tensor, values) -> None:
            t[sl] = torch.as_tensor(values, dtype=t.dtype).to(self.device, non_blocking=True)

        put(self.positions, positions)
        put(self.limits, limits)
        put(self.forced, forced)
        self.keys[sl] = keys.to(self.device)
        for mine, theirs in zip(self.params.fields(), params.fields(), strict=True):
            mine[sl] = theirs.to(self.device)
        self.steps[sl] = 0
        self.done[sl] = False
        self.history[sl] = -1
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
