"""The ChatTTS GPT forward over KV slots, built from the LlamaModel's own modules.

transformers' cache classes keep every row of a batch at one shared position; continuous
batching needs each row at its own. So this module runs the same layers (norms, projections,
rotary embedding, MLP) in the same order, reading and writing `KVSlots`. `tests/engine` checks it
against `LlamaModel.forward` on the same inputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import LlamaModel

from ttsperf.model.kv import KV, KVSlots


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


class SlotForward:
    def __init__(self, llama: LlamaModel):
        self.llama = llama
        cfg = llama.config
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.groups = self.heads // self.kv_heads
        self.layers = list(llama.layers)

    def _qkv(self, layer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x (B, T, H) -> q (B, heads, T, d), k, v (B, kv_heads, T, d), rotary applied."""
        b, t, _ = x.shape
        attn = layer.self_attn
        q = attn.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = attn.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = attn.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return _rope(q, cos, sin), _rope(k, cos, sin), v

    def _expand(self, kv: torch.Tensor) -> torch.Tensor:
        return kv if self.groups == 1 else kv.repeat_interleave(self.groups, dim=1)

    def _finish(self, layer, residual: torch.Tensor, attn_out: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = attn_out.shape
        h = residual + layer.self_attn.o_proj(attn_out.transpose(1, 2).reshape(b, t, -1))
        return h + layer.mlp(layer.post_attention_layernorm(h))

    def prefill(self, embeds: torch.Tensor, slots: KVSlots, slot: int) -> torch.Tensor:
        """One prompt (1, P, H) into `slot` at positions 0..P-1 -> last hidden state (H,)."""
        return self.prefill_many(embeds, slots, slot)[0]

    def prefill_many(
        self,
        embeds: torch.Tensor,
        slots: KVSlots,
        first: int | torch.Tensor,
        last: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """n prompts, right-padded to (n, P, H), into slots first..first+n-1 (or the n slots a
        tensor `first` names) at positions 0..P-1 -> each prompt's last hidden state (n, H); `last`
        (n,) on the device: each prompt's last position (None: every prompt fills all P).
        Attention is causal, so a prompt never sees the padding after it; the padding's K/V land
        past the row's position, where its decode steps overwrite them before any step reads them."""
        n, p, _ = embeds.shape
        positions = torch.arange(p, device=embeds.device).unsqueeze(0).expand(n, p)
        cos, sin = self.llama.rotary_emb(embeds, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        h = embeds
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, layer.input_layernorm(h), cos, sin)
            slots.write_prefixes(i, first, k, v)
            out = F.scaled_dot_product_attention(q, self._expand(k), self._expand(v), is_causal=True)
            h = self._finish(layer, h, out)
        if last is None:
            return self.llama.norm(h[:, -1])
        return self.llama.norm(h[torch.arange(n, device=embeds.device), last])

    def decode(
        self, embeds: torch.Tensor, slots: KV, positions: torch.Tensor, length: int | None = None
    ) -> torch.Tensor:
        """One step for rows 0..B-1: embeds (B, H), positions (B,) where each row's new token goes
        -> last hidden states (B, H). Attention reads KV positions 0..length-1 (default: the
        longest row's); a longer `length` only adds masked positions, which is how compiled and
        captured steps keep their shapes in buckets."""
        b = embeds.shape[0]
        x = embeds.unsqueeze(1)
        cos, sin = self.llama.rotary_emb(x, positions.unsqueeze(1))
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        if length is None:  # reading the device here syncs it: the engine passes `length` instead
            length = int(positions.max()) + 1
        # row r attends to its positions 0..positions[r]; longer rows' extra slots are masked
        mask = (torch.arange(length, device=x.device).unsqueeze(0) <= positions.unsqueeze(1)).view(
            b, 1, 1, length
        )
        h = x
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, layer.input_layernorm(h), cos, sin)
            slots.write_step(i, positions, k[:, :, 0], v[:, :, 0])
            keys, values = slots.view(i, b, length)
            out = F.scaled_dot_product_attention(q, self._expand(keys), self._expand(values), attn_mask=mask)
            h = self._finish(layer, h, out)
        return self.llama.norm(h)[:, 0]
