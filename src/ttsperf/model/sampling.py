"""Choosing the next 4 codes from the logits, per row, with that row's own settings and generator.

The order is the official one: temperature, repetition penalty over the row's last 16 generated
codes, top-p then top-k (each keeping at least 3 candidates), EOS masked before `min_new_tokens`,
softmax, one draw. `top_k == 1` is plain argmax (greedy), which the official sampler cannot do:
its min-3 rule turns top_k=1 into top_k=3.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PENALTY_WINDOW = 16
MIN_TOKENS_TO_KEEP = 3


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.05
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.top_k == 1 or self.temperature == 0.0


def apply_repetition_penalty(logits: torch.Tensor, history: torch.Tensor, penalty: float) -> torch.Tensor:
    """logits (R, V); history (R, n) of recent codes. Each repeat divides a positive logit by the
    penalty (multiplies a negative one), so a code seen k times is penalised penalty**k."""
    if penalty == 1.0 or history.numel() == 0:
        return logits
    freq = torch.zeros_like(logits).scatter_add_(1, history, torch.ones_like(history, dtype=logits.dtype))
    alpha = torch.pow(torch.as_tensor(penalty, dtype=logits.dtype), freq)
    return torch.where(logits < 0, logits * alpha, logits / alpha)


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    if top_p >= 1.0:
        return logits
    ascending, order = torch.sort(logits, dim=-1)
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop_sorted = cumulative <= (1.0 - top_p)
    drop_sorted[..., -MIN_TOKENS_TO_KEEP:] = False
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def top_k_filter(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    k = min(max(top_k, MIN_TOKENS_TO_KEEP), logits.size(-1))
    if k >= logits.size(-1):
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def sample_row(
    logits: torch.Tensor,
    history: torch.Tensor,
    params: SamplingParams,
    allow_eos: bool,
    eos_token: int,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """One sequence's next codes. logits (num_vq, V) float32; history (num_vq, n) -> (num_vq,)."""
    window = history[:, -PENALTY_WINDOW:]
    if params.greedy:
        scores = apply_repetition_penalty(logits, window, params.repetition_penalty)
        if not allow_eos:
            scores = scores.clone()
            scores[:, eos_token] = float("-inf")
        return scores.argmax(dim=-1)
    scores = logits / params.temperature
    scores = apply_repetition_penalty(scores, window, params.repetition_penalty)
    scores = top_k_filter(top_p_filter(scores, params.top_p), params.top_k)
    if not allow_eos:
        scores[:, eos_token] = float("-inf")
    probs = torch.softmax(scores, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
