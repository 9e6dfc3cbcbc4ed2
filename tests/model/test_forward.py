"""The slot forward is LlamaModel's forward, each row at its own position."""

from __future__ import annotations

import torch

from ttsperf.model.forward import SlotForward
from ttsperf.model.gpt import llama_forward
from ttsperf.model.kv import KVSlots


def _slots(pipe, batch=4, length=128):
    g = pipe.cfg.gpt
    return KVSlots(
        g.num_hidden_layers, batch, g.num_key_value_heads, length, g.hidden_size // g.num_attention_heads,
        dtype=torch.float32, device=torch.device("cpu"),
    )  # fmt: skip


@torch.inference_mode()
def test_prefill_and_decode_match_llama_model(tiny_pipe):
    gpt = tiny_pipe.model.gpt
    gen = torch.Generator().manual_seed(0)
    h = tiny_pipe.cfg.gpt.hidden_size
    prompts = [torch.randn(1, n, h, generator=gen) for n in (7, 12, 3)]  # rows at different positions
    steps = [torch.randn(len(prompts), h, generator=gen) for _ in range(5)]
    slots, fwd = _slots(tiny_pipe), SlotForward(gpt)
    ours = [fwd.prefill(p, slots, i) for i, p in enumerate(prompts)]
    positions = torch.tensor([p.shape[1] for p in prompts])
    ours_steps = []
    for x in steps:
        ours_steps.append(fwd.decode(x, slots, positions))
        positions = positions + 1
    for i, p in enumerate(prompts):  # reference: each row alone through LlamaModel with its cache
        full = torch.cat([p] + [x[i : i + 1].unsqueeze(1) for x in steps], dim=1)
        ref, _ = llama_forward(gpt, full, position_ids=torch.arange(full.shape[1])[None], use_cache=False)
        torch.testing.assert_close(ours[i], ref[0, p.shape[1] - 1], atol=1e-5, rtol=1e-5)
        for s, out in enumerate(ours_steps):
            torch.testing.assert_close(out[i], ref[0, p.shape[1] + s], atol=1e-5, rtol=1e-5)


def test_slot_move_keeps_a_row_intact(tiny_pipe):
    slots = _slots(tiny_pipe)
    slots.k[0][3, :, :5] = 7.0
    slots.move_many(torch.tensor([3]), torch.tensor([1]), 5)
    assert torch.equal(slots.k[0][1, :, :5], slots.k[0][3, :, :5])
    assert slots.nbytes == KVSlots.bytes_needed(2, 4, 4, 128, 16, 4)


def test_slot_moves_in_layer_groups_equal_one_copy_of_every_layer(tiny_pipe, monkeypatch):
    """The card's moves (a gather and a scatter), bounded to a layer at a time (MOVE_BYTES), leave
    the slots as one over every layer."""
    from ttsperf.model import kv

    gen = torch.Generator().manual_seed(1)
    whole, grouped = _slots(tiny_pipe), _slots(tiny_pipe)
    for slots in (whole, grouped):
        slots.k.copy_(torch.randn(slots.k.shape, generator=gen.manual_seed(3)))
        slots.v.copy_(torch.randn(slots.v.shape, generator=gen.manual_seed(4)))
    src, dst = torch.tensor([3, 2]), torch.tensor([0, 1])
    whole._gather_scatter(src, dst, 9)
    monkeypatch.setattr(kv, "MOVE_BYTES", 1)  # one layer per group
    grouped._gather_scatter(src, dst, 9)
    assert torch.equal(whole.k, grouped.k) and torch.equal(whole.v, grouped.v)
    assert torch.equal(whole.k[1][0, :, :9], whole.k[1][3, :, :9])  # the layers' views moved too
    assert not torch.equal(whole.k[1][0, :, 9:], whole.k[1][3, :, 9:])  # past `length`: left


def test_slot_moves_copied_slice_by_slice_equal_the_gather_and_scatter(tiny_pipe):
    """On a CPU, given the moves on the host, each is a slice copy (bytes cost there, not calls):
    the slots end as the card's gather and scatter leave them, past `length` included."""
    gen = torch.Generator().manual_seed(1)
    indexed, sliced = _slots(tiny_pipe), _slots(tiny_pipe)
    for slots in (indexed, sliced):
        slots.k.copy_(torch.randn(slots.k.shape, generator=gen.manual_seed(3)))
        slots.v.copy_(torch.randn(slots.v.shape, generator=gen.manual_seed(4)))
    before = sliced.k.clone()
    src, dst = torch.tensor([3, 2]), torch.tensor([0, 1])
    indexed._gather_scatter(src, dst, 9)
    sliced.move_many(src, dst, 9, moves=[(3, 0), (2, 1)])
    assert torch.equal(indexed.k, sliced.k) and torch.equal(indexed.v, sliced.v)
    assert not torch.equal(sliced.k, before)
