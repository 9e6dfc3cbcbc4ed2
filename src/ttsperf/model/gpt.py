"""The ChatTTS GPT: transformers' LlamaModel (without its token embedding) + ChatTTS's own
embeddings and heads.

A prompt position holds either a text token (embedded by `emb_text`) or 4 audio codes (the sum of
the 4 `emb_code` tables); each decode step reads the last hidden state through 4 `head_code`
projections, one per codebook. `head_text` serves only the official refine-text pass, which
ttsperf does not run; it is here so `Embed.safetensors` loads whole and the count is honest.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm
from transformers import LlamaConfig, LlamaModel

from ttsperf.model.config import GPTConfig

# transformers renamed `past_key_values` to `cache` (5.x) and dropped `cache_position`; speak both.
_FORWARD = inspect.signature(LlamaModel.forward).parameters
_CACHE_KW = "cache" if "cache" in _FORWARD else "past_key_values"
_HAS_CACHE_POSITION = "cache_position" in _FORWARD


def llama_forward(
    model: LlamaModel,
    inputs_embeds: torch.Tensor,
    *,
    attention_mask: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
    cache=None,
    cache_position: torch.Tensor | None = None,
    use_cache: bool = True,
):
    """(last hidden states, KV cache) from one LlamaModel forward, on any transformers >= 4.41."""
    kwargs = {"inputs_embeds": inputs_embeds, "attention_mask": attention_mask, "position_ids": position_ids}
    kwargs[_CACHE_KW] = cache
    if _HAS_CACHE_POSITION and cache_position is not None:
        kwargs["cache_position"] = cache_position
    out = model(use_cache=use_cache, **kwargs)
    new_cache = getattr(out, "cache", None) if _CACHE_KW == "cache" else out.past_key_values
    return out.last_hidden_state, new_cache


def llama_config(cfg: GPTConfig) -> LlamaConfig:
    return LlamaConfig(
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        num_hidden_layers=cfg.num_hidden_layers,
        max_position_embeddings=cfg.max_position_embeddings,
        rms_norm_eps=cfg.rms_norm_eps,
        rope_theta=cfg.rope_theta,
        use_cache=True,
    )


def build_llama(cfg: GPTConfig) -> LlamaModel:
    model = LlamaModel(llama_config(cfg))
    del model.embed_tokens  # ChatTTS embeds its own inputs (official: the same deletion after load)
    return model


class Embed(nn.Module):
    """The official `Embed.safetensors` module: input tables and weight-normalised output heads."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        h = cfg.hidden_size
        self.num_vq = cfg.num_vq
        self.emb_code = nn.ModuleList(nn.Embedding(cfg.num_audio_tokens, h) for _ in range(cfg.num_vq))
        self.emb_text = nn.Embedding(cfg.num_text_tokens, h)
        self.head_text = weight_norm(nn.Linear(h, cfg.num_text_tokens, bias=False), name="weight")
        self.head_code = nn.ModuleList(
            weight_norm(nn.Linear(h, cfg.num_audio_tokens, bias=False), name="weight")
            for _ in range(cfg.num_vq)
        )

    def fold_weight_norm(self) -> None:
        """Replace g * v/|v| by its value once, so no decode step recomputes the norm."""
        for head in (self.head_text, *self.head_code):
            if parametrize.is_parametrized(head, "weight"):
                parametrize.remove_parametrizations(head, "weight", leave_parametrized=True)

    def embed_prompt(self, input_ids: torch.Tensor, text_mask: torch.Tensor) -> torch.Tensor:
        """input_ids (B, T, num_vq), text_mask (B, T) -> (B, T, hidden)."""
        # Text ids overflow the code tables: give each table only the ids that are its own.
        text = self.emb_text(input_ids[..., 0].masked_fill(~text_mask, 0))
        codes = self.embed_codes(input_ids.masked_fill(text_mask.unsqueeze(-1), 0))
        return torch.where(text_mask.unsqueeze(-1), text, codes)

    def embed_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (..., num_vq) -> (..., hidden): the sum over codebooks."""
        out = self.emb_code[0](codes[..., 0])
        for i in range(1, self.num_vq):
            out = out + self.emb_code[i](codes[..., i])
        return out

    def code_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (B, hidden) -> float32 logits (B, num_vq, num_audio_tokens)."""
        hidden = hidden.to(self.head_code[0].weight.dtype)
        return torch.stack([head(hidden).float() for head in self.head_code], dim=1)
