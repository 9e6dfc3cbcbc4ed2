"""model/transfer.py: host tensors packed into one buffer come back with their values, dtypes and
shapes (the CUDA copy itself: benchmarks/gpu_check.py)."""

from __future__ import annotations

import torch

from ttsperf.model.transfer import ALIGN, pack, to_device, unpack


def test_pack_and_unpack_keep_every_tensor_whatever_its_dtype_and_shape():
    g = torch.Generator().manual_seed(0)
    tensors = [
        torch.randint(0, 1000, (3, 5, 4), generator=g),  # prompt ids, int64
        torch.rand(3, 5, generator=g) > 0.5,  # a text mask, bool: 1-byte elements before int64
        torch.tensor([4, 2, 0]),
        torch.empty(0, dtype=torch.long),  # no rows of this kind
        torch.rand(7, generator=g, dtype=torch.float32),  # odd length: the next part realigns
        torch.tensor([True]),
        torch.arange(6, dtype=torch.int32).view(2, 3).t(),  # not contiguous
    ]
    buffer, offsets = pack(tensors)
    assert buffer.dtype == torch.uint8 and buffer.dim() == 1
    assert all(at % ALIGN == 0 for at in offsets)
    back = unpack(buffer, offsets, tensors)
    for original, got in zip(tensors, back, strict=True):
        assert got.dtype == original.dtype and got.shape == original.shape
        assert torch.equal(got, original)


def test_to_device_on_a_cpu_keeps_the_values():
    ids, mask = torch.arange(12).view(3, 4), torch.tensor([True, False, True])
    got = to_device("cpu", ids, mask)
    assert torch.equal(got[0], ids) and torch.equal(got[1], mask)
