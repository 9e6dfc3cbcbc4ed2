"""The OOM policy's decisions: who keeps running, who goes back to the queue, who is answered."""

from __future__ import annotations

import torch

from ttsperf.engine import oom
from ttsperf.engine.scheduler_rows import Joining, RowTable
from ttsperf.engine.types import RequestHandle, SynthRequest


def table_of(n: int, chunks: dict[int, int]) -> tuple[RowTable, list[RequestHandle]]:
    hs = [RequestHandle(SynthRequest(f"text {i}"), None) for i in range(n)]
    table = RowTable.empty(8)
    table.add([Joining(h, 100, True, False, True, float("inf")) for h in hs], started=0.0, first_emit=24)
    for slot, count in chunks.items():
        table.chunks[slot] = count
    return table, hs


def test_a_step_keeps_the_older_half_and_requeues_rows_that_streamed_nothing():
    table, hs = table_of(5, {3: 2})
    shrink = oom.after_step(table)
    assert shrink.keep == shrink.max_batch == 2
    assert shrink.back == [hs[2], hs[4]]  # in order: they go first next time
    assert shrink.fail == [(hs[3], "out of memory after audio was streamed")]


def test_one_step_ahead_the_batch_that_failed_decides_not_the_rows_left():
    """Step N failed with 8 rows; 6 had finished at step N-1 and left before the policy runs:
    the survivors keep running, the limit is half the failed batch, and a survivor that never ran
    alone is not answered as if it had."""
    table, hs = table_of(2, {})
    shrink = oom.after_step(table, 8)
    assert shrink.keep == 2 and shrink.max_batch == 4 and not shrink.back and not shrink.fail
    table, hs = table_of(1, {})
    shrink = oom.after_step(table, 2)
    assert shrink.keep == 1 and shrink.max_batch == 1 and not shrink.fail


def test_a_row_alone_is_answered():
    table, hs = table_of(1, {})
    shrink = oom.after_step(table)
    assert shrink.keep == 0 and shrink.back == [] and shrink.max_batch is None
    assert shrink.fail == [(hs[0], "out of memory even alone in the batch")]


def test_a_prefill_retries_with_half_as_many_or_answers_one_alone():
    _, hs = table_of(4, {})
    several = oom.after_prefill(hs, running=0)
    assert several.back == hs and several.max_batch == 2 and several.keep is None and not several.fail
    beside = oom.after_prefill(hs[:1], running=3)
    assert beside.back == hs[:1] and beside.max_batch == 3
    alone = oom.after_prefill(hs[:1], running=0)
    assert alone.fail == [(hs[0], "out of memory prefilling alone")] and alone.max_batch is None


def test_is_oom():
    assert oom.is_oom(torch.OutOfMemoryError("CUDA out of memory"))
    assert oom.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: out of memory"))
    assert not oom.is_oom(RuntimeError("shape mismatch"))
