"""The persistent batch: one sync tells the host what the step took; leaving rows move the last
rows into their slots, host mirror and tensors alike."""

from __future__ import annotations

import numpy as np
import torch

from ttsperf.engine.device_batch import BatchState
from ttsperf.model.sampling import RowParams, SamplingParams, seed_key


def batch_of(n: int) -> BatchState:
    state = BatchState(8, 4, 16, 32, 0, torch.device("cpu"))
    params = RowParams.of([SamplingParams()] * n, 626)
    positions, limits, kept = [10 + i for i in range(n)], [20] * n, [30 + i for i in range(n)]
    state.add(positions, limits, [True] * n, seed_key(torch.arange(n)), params, kept)
    return state


def test_sync_mirrors_steps_and_eos_and_counts_what_was_taken():
    state = batch_of(3)
    state.steps[:3] = torch.tensor([1, 1, 0])  # as a prefill leaves them: one row sampled EOS
    state.done[2] = True
    assert state.sync() == 2
    state.steps[:2] += 1
    assert state.sync() == 2
    assert state.host.steps[:3].tolist() == [2, 2, 0] and state.host.done[:3].tolist() == [False, False, True]


def test_compaction_moves_the_host_mirror_with_the_tensors():
    state = batch_of(5)
    moves = state.compact(np.array([0, 2]))
    assert moves == [(3, 0), (4, 2)] and state.size == 3
    assert state.host.positions[:3].tolist() == [13, 11, 14] == state.positions[:3].tolist()
    assert state.host.kept[:3].tolist() == [33, 31, 34]


def test_every_row_tensor_moves_with_its_row_in_one_copy_of_the_packed_columns():
    """The small per-row tensors are views of one buffer: a compaction moves each of them (and
    the codes, positions and hidden states) with its row, and a column written through its view
    is what the buffer holds."""
    state = batch_of(5)
    for i, t in enumerate(state.tensors()):  # a distinct value per row and tensor
        t[:5] = (torch.arange(5) * 10 + i).view(5, *[1] * (t.dim() - 1)).to(t.dtype)
    before = [t[:5].clone() for t in state.tensors()]
    state.compact(np.array([1]))  # row 4 moves into slot 1
    for t, old in zip(state.tensors()[:-1], before[:-1], strict=True):
        assert torch.equal(t[:4], old[[0, 4, 2, 3]]), t.dtype
    # the hidden states as far as row 4 can have written them (its position, 14), no further
    assert torch.equal(state.hidden[:4, :14], before[-1][[0, 4, 2, 3], :14])
    assert torch.equal(state.hidden[1, 14:], before[-1][1, 14:])
    # the views share one storage and do not overlap one another
    packed = [
        t
        for t in state.tensors()
        if t.untyped_storage().data_ptr() == state.steps.untyped_storage().data_ptr()
    ]
    assert len(packed) == len(state.tensors()) - 3  # all but codes, positions and hidden
    spans = sorted((t.storage_offset() * t.element_size(), t[0].nbytes) for t in packed)
    assert all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:], strict=False))
