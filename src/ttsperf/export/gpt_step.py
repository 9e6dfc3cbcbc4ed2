"""The GPT decode step as a standalone module with tensor inputs, for ONNX / TensorRT.

It is the engine's step (`SlotForward.decode` + the code embeddings and heads) with the KV
slots passed in and out as tensors instead of living in `KVSlots`:

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
import torch.nn.functional as F
from torch import nn

from ttsperf.model.forward import SlotForward
from ttsperf.model.weights import ChatTTSModel

INPUT_NAMES = ("codes", "positions", "past_keys", "past_values")
OUTPUT_NAMES = ("logits", "hidden", "present_keys", "present_values")


class GPTDecodeStep(nn.Module):
    def __init__(self, model: ChatTTSModel):
        super().__init__()
        self.embed = model.embed
        self.gpt = model.gpt
        self._fwd = SlotForward(model.gpt)

    def forward(self, codes, positions, past_keys, past_values):
        fwd, llama = self._fwd, self.gpt
        context = past_keys.shape[3]
        x = self.embed.embed_codes(codes).to(past_keys.dtype).unsqueeze(1)  # (B, 1, H)
        cos, sin = llama.rotary_emb(x, positions.unsqueeze(1))
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        slot = torch.arange(context, device=x.device).unsqueeze(0)  # (1, context)
        mask = (slot <= positions.unsqueeze(1)).unsqueeze(1).unsqueeze(1)  # (B, 1, 1, context)
        here = (slot == positions.unsqueeze(1)).unsqueeze(1).unsqueeze(-1)  # (B, 1, context, 1)
        keys, values = [], []
        h = x
        for i, layer in enumerate(fwd.layers):
            q, k, v = fwd._qkv(layer, layer.input_layernorm(h), cos, sin)
            k_all = torch.where(here, k.to(past_keys.dtype), past_keys[i])
            v_all = torch.where(here, v.to(past_values.dtype), past_values[i])
            keys.append(k_all)
            values.append(v_all)
            out = F.scaled_dot_product_attention(q, fwd._expand(k_all), fwd._expand(v_all), attn_mask=mask)
            h = fwd._finish(layer, h, out)
        hidden = llama.norm(h)[:, 0]
        return self.embed.code_logits(hidden), hidden, torch.stack(keys), torch.stack(values)
