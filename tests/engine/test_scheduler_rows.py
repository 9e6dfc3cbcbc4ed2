"""The scheduler's row table follows the runner's compaction slot for slot."""

from __future__ import annotations

import time
from collections import deque

import numpy as np
import torch

from ttsperf.engine.device_batch import BatchState
from ttsperf.engine.scheduler_rows import Joining, RowTable
from ttsperf.engine.types import RequestHandle, SynthRequest
from ttsperf.model.sampling import RowParams, SamplingParams, seed_key


def handles(n: int) -> list[RequestHandle]:
    return [RequestHandle(SynthRequest(f"text {i}"), None) for i in range(n)]


def table_of(hs: list[RequestHandle], deadline: float = float("inf")) -> RowTable:
    table = RowTable.empty(8)
    rows = [
        Joining(h, limit=10 + i, forced=i % 2 == 0, capped=False, stream=True, deadline=deadline)
        for i, h in enumerate(hs)
    ]
    table.add(rows, started=1.0, first_emit=24)
    return table


def test_the_table_applies_the_batchs_moves():
    """Rows 1 and 3 of 6 leave: the batch moves its last rows into the holes, and each request's
    row in the table lands where its batch row did."""
    hs = handles(6)
    table = table_of(hs)
    state = BatchState(8, 4, 16, 32, 0, torch.device("cpu"))
    params = RowParams.of([SamplingParams()] * 6, 626)
    state.add(
        list(range(6)), [10 + i for i in range(6)], [False] * 6, seed_key(torch.arange(6)), params, [1] * 6
    )
    moves = state.compact(np.array([1, 3]))
    table.apply(moves, 4)
    assert table.size == state.size == 4
    assert moves == [(4, 1), (5, 3)]
    assert table.handles() == [hs[0], hs[4], hs[2], hs[5]]
    assert table.limit[:4].tolist() == state.limits[:4].tolist() == [10, 14, 12, 15]
    assert table.handle[4:6].tolist() == [None, None]  # a request that left is not kept alive


def test_rows_past_their_deadline_or_cancelled_are_gone():
    hs = handles(4)
    now = time.monotonic()
    table = table_of(hs, deadline=now + 60)
    table.deadline[2] = now - 1
    cancelled = deque([hs[0], handles(1)[0]])  # the second is not a row (still queued, or done)
    assert table.gone(now, cancelled).tolist() == [True, False, True, False]
    assert not cancelled  # taken: a cancellation is looked for once
    assert table.gone(now, cancelled).tolist() == [False, False, True, False]
