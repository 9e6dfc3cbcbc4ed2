"""The GPT decode step as a standalone module with tensor inputs, for ONNX / TensorRT.

It is the engine's step (model/step.py's `Step`: code embeddings, slot forward, code heads) with
the KV slots passed in and out as tensors instead of living in `KVSlots`:

    codes        (batch, num_vq)                             int64  each row's last sampled codes
    positions    (batch,)                                    int64  where each row's new token goes
    past_keys    (layers, batch, kv_heads, context, head_dim) float  the rows' KV slots, any length
    past_values  (layers, batch, kv_heads, context, head_dim)         > max(positions)
 -> logits       (batch, num_vq, num_audio_tokens)           fp32   the 4 code heads
    hidden       (batch, hidden)                                    for the Decoder
    present_keys / present_values: the slots with each row's new K/V written at its position

Row r attends to slot positions 0..positions[r], as in the engine; positions past that are
masked, so a caller may pass the slots at their allocated length or trimmed to max(positions)+1
(what the engine does). The new K/V is written with a one-hot select instead of a scatter, so the
graph has no data-dependent shapes and TensorRT needs no ScatterND.
"""

from __future__ import annotations

import torch
from torch import nn

from ttsperf.model.forward import SlotForward
from ttsperf.model.step import Step
from ttsperf.model.weights import ChatTTSModel

INPUT_NAMES = ("codes", "positions", "past_keys", "past_values")
OUTPUT_NAMES = ("logits", "hidden", "present_keys", "present_values")


class TensorKV:
    """The step's KV store over the graph's past K/V tensors: each layer's new K/V selected in at
    each row's position (no scatter), the whole context read back."""

    def __init__(self, past_keys: torch.Tensor, past_values: torch.Tensor, positions: torch.Tensor):
        self.dtype = past_keys.dtype
        slot = torch.arange(past_keys.shape[3], device=past_keys.device).unsqueeze(0)  # (1, context)
        self.here = (slot == positions.unsqueeze(1)).unsqueeze(1).unsqueeze(-1)  # (B, 1, context, 1)
        self.k, self.v = list(past_keys.unbind(0)), list(past_values.unbind(0))

    def write_step(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (B, kv_heads, head_dim), written where `here` (built from the same positions)."""
        self.k[layer] = torch.where(self.here, k.unsqueeze(2).to(self.dtype), self.k[layer])
        self.v[layer] = torch.where(self.here, v.unsqueeze(2).to(self.dtype), self.v[layer])

    def view(self, layer: int, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k[layer], self.v[layer]


class GPTDecodeStep(nn.Module):
    def __init__(self, model: ChatTTSModel):
        super().__init__()
        self.embed = model.embed
        self.gpt = model.gpt
        self._fwd = SlotForward(model.gpt)

    def forward(self, codes, positions, past_keys, past_values):
        kv = TensorKV(past_keys, past_values, positions)
        hidden, logits = Step(self.embed, self._fwd, kv)(codes, positions, past_keys.shape[3])
        return logits, hidden, torch.stack(kv.k), torch.stack(kv.v)
