"""Choosing the next 4 codes from the logits, per row, with that row's own settings and generator.

The order is the official one: temperature, repetition penalty over the row's last 16 generated
codes, top-p then top-k (each keeping at least 3 candidates), EOS masked before `min_new_tokens`,
softmax, one draw (inverse CDF of one uniform from the row's own generator). `top_k == 1` is
plain argmax (greedy), which the official sampler cannot do: its min-3 rule turns top_k=1 into
top_k=3.
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


def sample(
    logits: torch.Tensor,
    history: torch.Tensor,
    params: list[SamplingParams],
    allow_eos: list[bool],
    eos_token: int,
    generators: list[torch.Generator | None],
) -> torch.Tensor:
    """Next codes for a batch of rows in one pass, each row with its own settings and generator.

    logits (B, Q, V) float32; history (B, Q, W) of recent codes, -1 where a row has fewer than W;
    returns (B, Q). Each row's draws come from its own generator, so its output does not depend on
    the other rows.
    """
    b, _, v = logits.shape
    temperature = torch.tensor([p.temperature for p in params], dtype=logits.dtype)
    greedy = torch.tensor([p.greedy for p in params])
    penalty = torch.tensor([p.repetition_penalty for p in params], dtype=logits.dtype)
    top_p = torch.tensor([p.top_p for p in params], dtype=logits.dtype)
    top_k = torch.tensor([min(max(p.top_k, MIN_TOKENS_TO_KEEP), v) for p in params])

    scores = logits / torch.where(greedy, 1.0, temperature).view(b, 1, 1)
    if history.numel():  # a code seen k times in the window: positive logit / p**k, negative * p**k
        valid = history >= 0
        freq = torch.zeros_like(scores).scatter_add_(2, history.clamp(min=0), valid.to(scores.dtype))
        alpha = torch.pow(penalty.view(b, 1, 1), freq)
        scores = torch.where(scores < 0, scores * alpha, scores / alpha)
    no_eos = ~torch.tensor(allow_eos)
    if bool(greedy.all()):
        scores[no_eos, :, eos_token] = float("-inf")
        return scores.argmax(dim=-1)

    # top-p (keep the smallest set with probability > top_p, at least 3), then top-k (at least 3)
    ascending, order = torch.sort(scores, dim=-1)
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop_sorted = cumulative <= (1.0 - top_p).view(b, 1, 1)
    drop_sorted[..., -MIN_TOKENS_TO_KEEP:] = False
    filtered = scores.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    kth = torch.sort(filtered, dim=-1, descending=True).values.gather(
        -1, (top_k - 1).view(b, 1, 1).expand(b, filtered.shape[1], 1)
    )
    filtered = filtered.masked_fill(filtered < kth, float("-inf"))
    # EOS is masked after the filters, as the official sampler does (min_new_token)
    filtered[no_eos, :, eos_token] = float("-inf")
    scores[no_eos, :, eos_token] = float("-inf")
    codes = scores.argmax(dim=-1)  # for the greedy rows of a mixed batch
    probs = torch.softmax(filtered, dim=-1)
    uniform = torch.stack([torch.rand(probs.shape[1], generator=g) for g in generators]).to(probs.dtype)
    drawn = torch.searchsorted(probs.cumsum(dim=-1), uniform.unsqueeze(-1)).squeeze(-1).clamp(max=v - 1)
    return torch.where(greedy.view(b, 1), codes, drawn)
