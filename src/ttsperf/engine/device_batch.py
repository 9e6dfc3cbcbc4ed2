"""The running batch held in tensors on the engine's device (vLLM v1's persistent batch).

Rows occupy slots 0..B-1 of every tensor, the KV slots included. A step reads and updates them as
whole slices, with no Python loop over rows; rows join by writing their slot and leave by moving
the last rows into the freed slots (one indexed copy per tensor for all the moves of a step).

The runner keeps a host mirror of what it needs per row (`HostMirror`), refreshed from one
device-to-host copy per step. That copy is queued behind the step (`send`) and read later
(`receive`), waiting for that step alone: the engine reads a step's status while the next one runs
(issue 33 item 3). Rows that join or leave in between are tracked in the status's slot map. What
the scheduler keeps per row (deadlines, emit schedule, limits) is its own (scheduler_rows.py),
moved with the same moves. The tensors and the step's update of them
(`Rows`, `Rows.accept`) are model/step.py's, which the pipeline runs too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
import torch

from ttsperf.model.sampling import RowParams
from ttsperf.model.step import Rows
from ttsperf.model.transfer import to_device

# (src, dst on the device, the movers' furthest position, the same moves on the host)
AlsoMove = Callable[[torch.Tensor, torch.Tensor, int, list[tuple[int, int]]], None]


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


@dataclass
class Status:
    """One step's (steps done, EOS) per row, copied to the host without waiting: `slots[i]` is
    where slot i's entry is in `buffer` (-1: the row joined after the step was sent). None while
    no row has moved since: slot i's entry is at i for the `size` rows the step ran, and rows
    past them joined after it (the common case, and every case when the host reads at once)."""

    buffer: torch.Tensor  # pinned on CUDA: the copy is queued, not waited for
    size: int
    done: torch.cuda.Event | None  # recorded after the copy (CUDA)
    before: torch.cuda.Event | None  # recorded before the step: every earlier change of the rows
    slots: np.ndarray | None = None

    def slot_map(self, size: int) -> np.ndarray:
        """`slots`, made explicit for `size` live rows (before rows move)."""
        if self.slots is None:
            self.slots = np.full(size, -1)
            self.slots[: self.size] = np.arange(self.size)
        return self.slots


class BatchState(Rows):
    def __init__(self, *args, **kwargs):  # Rows' own
        super().__init__(*args, **kwargs)
        max_batch = self.codes.shape[0]
        self.size = 0
        self.host = HostMirror.empty(max_batch)
        self._host_columns = self.host.columns()
        self.sent: deque[Status] = deque()  # statuses on their way, oldest first (at most two)
        self._buffers: list[torch.Tensor] = []  # free status buffers
        self._status = torch.zeros_like(self.steps)  # steps * 2 + EOS, on the device (CUDA)

    def _event(self) -> torch.cuda.Event | None:
        if self.device.type != "cuda":
            return None
        event = torch.cuda.Event(enable_timing=True)  # a step's device time: before -> done
        event.record(torch.cuda.current_stream(self.device))
        return event

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
        for status in self.sent:  # sent before these rows were: it says nothing of them
            if status.slots is not None:
                status.slots = np.concatenate([status.slots, np.full(n, -1)])
        self.size += n
        return sl

    def before_step(self) -> torch.cuda.Event | None:
        """Mark the stream before a step: what reads the rows on another stream waits for this."""
        return self._event()

    def send(self, before: torch.cuda.Event | None = None) -> None:
        """Queue the copy of the live rows' (steps done, EOS) to the host, behind the step just
        launched; nothing waits. `before`: before_step's mark of that step."""
        b = self.size
        buffer = self._buffers.pop() if self._buffers else self._new_buffer()
        if self.device.type == "cpu":  # one op, straight into the buffer
            torch.add(self.done[:b], self.steps[:b], alpha=2, out=buffer[:b])
        else:  # computed on the device, then one copy to pinned memory
            torch.add(self.done[:b], self.steps[:b], alpha=2, out=self._status[:b])
            buffer[:b].copy_(self._status[:b], non_blocking=True)
        self.sent.append(Status(buffer, b, self._event(), before))

    def _new_buffer(self) -> torch.Tensor:
        return torch.zeros(self.codes.shape[0], dtype=torch.long, pin_memory=self.device.type == "cuda")

    def receive(self) -> tuple[int, float | None]:
        """The oldest sent status into the host mirror, waiting for its step alone (not for a step
        sent after it). -> the codes taken since the last one (a joining row's first, from its
        prefill, included), and the step's seconds on the device (CUDA, sent with `before`)."""
        status = self.sent.popleft()
        seconds = None
        if status.done is not None:
            status.done.synchronize()
            if status.before is not None:
                seconds = status.before.elapsed_time(status.done) / 1e3
        h, packed = self.host, status.buffer.numpy()
        if status.slots is None:  # no row moved: the first `size` rows, in place
            rows: slice | np.ndarray = slice(0, status.size)
            host = packed[: status.size]
        else:
            rows = np.flatnonzero(status.slots >= 0)
            host = packed[status.slots[rows]]
        self._buffers.append(status.buffer)
        steps = host >> 1
        taken = int(steps.sum()) - int(h.steps[rows].sum())
        h.steps[rows] = steps
        h.done[rows] = host & 1
        return taken, seconds

    def sync(self) -> int:
        """One step's status now: send, then receive (nothing else in flight). -> codes taken."""
        self.send()
        return self.receive()[0]

    def settled(self) -> torch.cuda.Event | None:
        """A mark after every change of the rows the host has seen (the received status's step,
        the moves and joins since) and before any step still in flight: what reads the rows on
        another stream (the audio call) waits for it, not for the running step."""
        if len(self.sent) > 1:  # the oldest step in flight would not cover the latest moves
            raise RuntimeError("settled(): more than one step in flight; collect first")
        return self.sent[0].before if self.sent else self._event()

    def compact(self, leaving: np.ndarray, also: AlsoMove | None = None) -> list[tuple[int, int]]:
        """Drop the rows in `leaving` (slot indices); move the last staying rows into the holes;
        `also(src, dst, positions, moves)` moves the caller's per-slot device data (the KV slots)
        with the same index tensors, or the same (src, dst) moves on the host (`positions`: the
        movers' furthest, from the host's own count: what they have written, a step launched and
        not read included).
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
            furthest = int(self.host.positions[movers].max())
            self.move(src, dst, furthest)
            for column in self._host_columns:
                column[holes] = column[movers]
            if also is not None:
                also(src, dst, furthest, moves)
        for status in self.sent:  # a status in flight still has the rows where they were
            slots = status.slot_map(b)
            slots[holes] = slots[movers]
        self.size = new_size
        self._forget(new_size)
        return moves

    def truncate(self, size: int) -> None:
        """Keep rows 0..size-1 (out of memory: the newest rows go back to the queue)."""
        self.size = size
        self._forget(size)

    def _forget(self, size: int) -> None:
        for status in self.sent:
            if status.slots is None:
                status.size = min(status.size, size)
            else:
                status.slots = status.slots[:size]
