"""The OOM policy: what the scheduler does when the device runs out of memory — shrink the batch
and go on, losing no request that can still be answered honestly.

A step that fails keeps the older half of the batch. Of the newer half, a row that has streamed
nothing yet goes back to the front of the queue: it restarts identically (its seed was drawn at
submission); a row that already streamed audio cannot restart unnoticed and is answered 'oom',
as is a request that cannot run even alone. A prefill of several that fails puts them all back
and lets half as many join next time. The policy only decides (`Shrink`); the engine applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ttsperf.engine.scheduler_rows import RowTable
from ttsperf.engine.types import RequestHandle


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


@dataclass(frozen=True)
class Shrink:
    keep: int | None = None  # rows 0..keep-1 go on running (None: the batch as it is)
    back: list[RequestHandle] = field(default_factory=list)  # to the queue's front, in this order
    fail: list[tuple[RequestHandle, str]] = field(default_factory=list)  # answered 'oom': why
    max_batch: int | None = None  # the batch's new limit (None: as it was)


def after_step(table: RowTable, batch: int | None = None) -> Shrink:
    """A decode step of `batch` rows (default: the table's) ran out of memory; `table` holds the
    rows still running (one step ahead, rows the step before said finished left since)."""
    rows = table.handles()
    batch = len(rows) if batch is None else batch
    if batch <= 1:
        return Shrink(keep=0, fail=[(h, "out of memory even alone in the batch") for h in rows])
    keep = min(len(rows), max(1, batch // 2))
    back, fail = [], []
    for slot in range(keep, len(rows)):
        if table.chunks[slot]:
            fail.append((rows[slot], "out of memory after audio was streamed"))
        else:
            back.append(rows[slot])
    return Shrink(keep=keep, back=back, fail=fail, max_batch=max(1, batch // 2))


def after_prefill(joining: list[RequestHandle], running: int) -> Shrink:
    """Prefilling `joining` beside `running` rows ran out of memory (the batch is as it was)."""
    if not running and len(joining) == 1:
        return Shrink(fail=[(joining[0], "out of memory prefilling alone")])
    # a prefill of several that failed alone retries with half as many
    return Shrink(back=joining, max_batch=max(1, running or len(joining) // 2))
