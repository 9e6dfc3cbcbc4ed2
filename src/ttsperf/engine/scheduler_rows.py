"""The scheduler's row table: what it keeps per running request, row i = slot i of the runner's
batch, as NumPy columns (vLLM v1's scheduler-side request state, held by index).

The runner owns the batch on the device and answers each step with the rows' steps and EOS flags
(runner.StepOutput); this table holds the rest the scheduler decides with — the request's handle,
its length limit, deadline, stream schedule and what it has emitted. When rows leave, the runner
compacts its batch and returns the moves; the table applies the same moves, one indexed copy per
column, so slot i here is always slot i there.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields

import numpy as np

from ttsperf.engine.types import RequestHandle


@dataclass(frozen=True)
class Joining:
    """A request becoming a row: what the scheduler decided for it at admission."""

    handle: RequestHandle
    limit: int  # steps it may take
    forced: bool  # its length is the speech-rate model's
    capped: bool  # that length was cut to max_new_tokens (the result says so)
    stream: bool
    deadline: float


@dataclass
class RowTable:
    handle: np.ndarray  # object: RequestHandle
    limit: np.ndarray  # steps the row may take
    forced: np.ndarray
    capped: np.ndarray
    stream: np.ndarray
    deadline: np.ndarray  # time.monotonic() past which the row is answered 'timeout'
    next_emit: np.ndarray  # steps at which a streaming row's next chunk is due
    started: np.ndarray  # time.monotonic() of its prefill
    emitted: np.ndarray  # samples handed out
    chunks: np.ndarray  # chunks handed out
    size: int = 0

    @classmethod
    def empty(cls, max_batch: int) -> RowTable:
        """A table for up to `max_batch` rows, none running."""
        i64, f64 = np.int64, np.float64
        handle = np.full(max_batch, None, object)
        dtypes = {
            "limit": i64,
            "forced": bool,
            "capped": bool,
            "stream": bool,
            "deadline": f64,
            "next_emit": i64,
            "started": f64,
            "emitted": i64,
            "chunks": i64,
        }
        return cls(handle, **{name: np.zeros(max_batch, dtype) for name, dtype in dtypes.items()})

    def __post_init__(self) -> None:
        self._columns = [getattr(self, f.name) for f in fields(self) if f.name != "size"]

    def add(self, rows: list[Joining], *, started: float, first_emit: int) -> None:
        """Rows after the live ones, in the order the runner prefilled them."""
        sl = slice(self.size, self.size + len(rows))
        for i, r in enumerate(rows, sl.start):
            self.handle[i] = r.handle  # one by one: NumPy would unpack a sequence-like handle
        self.limit[sl] = [r.limit for r in rows]
        self.forced[sl] = [r.forced for r in rows]
        self.capped[sl] = [r.capped for r in rows]
        self.stream[sl] = [r.stream for r in rows]
        self.deadline[sl] = [r.deadline for r in rows]
        self.next_emit[sl], self.started[sl], self.emitted[sl], self.chunks[sl] = first_emit, started, 0, 0
        self.size = sl.stop

    def handles(self, first: int = 0) -> list[RequestHandle]:
        """The handles of rows first..size-1."""
        return self.handle[first : self.size].tolist()

    def gone(self, now: float, cancelled: deque[RequestHandle]) -> np.ndarray:
        """Rows past their deadline or whose client went away (the handles in `cancelled`, taken
        off it: only a cancellation costs a look at every row)."""
        b = self.size
        gone = self.deadline[:b] < now
        while cancelled:
            handle = cancelled.popleft()
            gone |= np.fromiter((h is handle for h in self.handle[:b]), bool, b)
        return gone

    def apply(self, moves: list[tuple[int, int]], size: int) -> None:
        """The runner's compaction: row src moves to slot dst; rows past `size` are gone."""
        if moves:
            src, dst = np.asarray(moves).T
            for column in self._columns:
                column[dst] = column[src]
        self.truncate(size)

    def truncate(self, size: int) -> None:
        self.handle[size : self.size] = None  # the table does not keep a finished request alive
        self.size = size
