"""Choosing the next 4 codes from the logits, for a whole batch at once, on the logits' device.

The order is the official one: temperature, repetition penalty over the row's last 16 generated
codes, top-p then top-k (each keeping at least 3 candidates), EOS masked before `min_new_tokens`,
softmax, one draw (inverse CDF of one uniform). `top_k == 1` is plain argmax (greedy), which the
official sampler cannot do: its min-3 rule turns top_k=1 into top_k=3.

Every per-row setting is a tensor (`RowParams`), so the batch is sampled with no Python loop over
rows and no device sync. Randomness is stateless: a row's uniform for (step, codebook) is a hash
of (row seed, step, codebook) (`uniforms`), so a row draws the same whatever else is in the batch
and no generator object has to live anywhere — the engine's device step and a CUDA graph can
compute it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ttsperf.model.sampling_params import SamplingParams  # torch-free: the server builds it

PENALTY_WINDOW = 16
MIN_TOKENS_TO_KEEP = 3
_M32 = 0xFFFFFFFF


@dataclass
class RowParams:
    """Per-row sampling settings as (B,) tensors; `kept` = top_k raised to the min-3 rule."""

    temperature: torch.Tensor  # float32, 1.0 for greedy rows
    top_p: torch.Tensor  # float32
    kept: torch.Tensor  # int64
    penalty: torch.Tensor  # float32
    greedy: torch.Tensor  # bool

    @classmethod
    def of(cls, params: list[SamplingParams], vocab: int, device: torch.device | str = "cpu") -> RowParams:
        def t(values, dtype):
            return torch.tensor(values, dtype=dtype, device=device)

        return cls(
            temperature=t([1.0 if p.greedy else p.temperature for p in params], torch.float32),
            top_p=t([p.top_p for p in params], torch.float32),
            kept=t([candidates(p, vocab) for p in params], torch.long),
            penalty=t([p.repetition_penalty for p in params], torch.float32),
            greedy=t([p.greedy for p in params], torch.bool),
        )

    def fields(self) -> tuple[torch.Tensor, ...]:
        return self.temperature, self.top_p, self.kept, self.penalty, self.greedy


def candidates(p: SamplingParams, vocab: int) -> int:
    """How many top codes a row may draw from (its top_k after the min-3 rule)."""
    return min(max(p.top_k, MIN_TOKENS_TO_KEEP), vocab)


def width(max_kept: int, vocab: int) -> int:
    """The static number of top candidates to sort for a batch: the largest row's, rounded up to
    a power of two so a compiled or captured step sees few distinct shapes."""
    w = 4
    while w < max_kept:
        w *= 2
    return min(w, vocab)


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (lowbias32) on int64 tensors holding values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _M32  # wraps past 2**63 in int64; the low 32 bits stay exact
    return x ^ (x >> 16)


def row_seeds(seeds: list[int | None]) -> torch.Tensor:
    """(B,) int64 seeds; a row without one gets a fresh random seed (from torch's global RNG)."""
    fresh = torch.randint(0, 2**62, (len(seeds),)).tolist()
    return torch.tensor([s % 2**63 if s is not None else f for s, f in zip(seeds, fresh, strict=True)])


def seed_key(seeds: torch.Tensor) -> torch.Tensor:
    """(B,) int64 seeds -> (B,) 32-bit keys: both halves of the seed count."""
    return _mix32((seeds & _M32) ^ _mix32(((seeds >> 32) & _M32) ^ 0x9E3779B9))


def uniforms(keys: torch.Tensor, steps: torch.Tensor, num_vq: int) -> torch.Tensor:
    """(B,) keys from `seed_key`, (B,) step numbers -> (B, num_vq) float32 uniforms in [0, 1),
    a pure function of (key, step, codebook): counter-based, no state, same on any device."""
    counter = steps.unsqueeze(1) * num_vq + torch.arange(num_vq, device=steps.device)
    h = _mix32(keys.unsqueeze(1) ^ _mix32((counter + 0x85EBCA6B) & _M32))
    return (h >> 8).to(torch.float32) * (1.0 / (1 << 24))


def sample(
    logits: torch.Tensor,
    history: torch.Tensor,
    params: RowParams,
    allow_eos: torch.Tensor,
    eos_token: int,
    uniform: torch.Tensor,
    top: int,
) -> torch.Tensor:
    """Next codes for a batch of rows, each with its own settings.

    logits (B, Q, V) float32; history (B, Q, W) of recent codes, -1 where a row has fewer than W;
    allow_eos (B,) bool; uniform (B, Q) in [0, 1); top: how many best codes to sort, at least
    every row's `kept` (see `width`). Returns (B, Q) int64, on the logits' device, without a sync.
    """
    b, q, v = logits.shape
    scores = logits / params.temperature.view(b, 1, 1)
    if history.shape[-1]:  # a code seen k times in the window: positive score / p**k, negative * p**k
        valid = history >= 0
        seen = ((history.unsqueeze(-1) == history.unsqueeze(-2)) & valid.unsqueeze(-2)).sum(-1)
        # Work on the W history entries, not the vocabulary. An empty entry (-1) stands for the
        # newest entry (valid whenever any is), so the scatter writes one value per code.
        index = torch.where(valid, history, history[..., -1:]).clamp(min=0)
        seen = torch.where(valid, seen, seen[..., -1:])
        alpha = torch.pow(params.penalty.view(b, 1, 1), seen)
        old = scores.gather(2, index)
        scores.scatter_(2, index, torch.where(old < 0, old * alpha, old / alpha))
    banned = ~allow_eos.view(b, 1)
    eos_column = scores[:, :, eos_token].clone()
    scores[:, :, eos_token] = eos_column.masked_fill(banned, float("-inf"))
    greedy = scores.argmax(dim=-1)

    # top-p keeps the smallest set of best codes whose probability exceeds top_p (at least 3);
    # top-k keeps the k best. Both are prefixes of the best-first order, so the kept set is the
    # shorter prefix, found among the `top` best with probabilities over the whole vocabulary.
    # EOS is masked after the filters, as the official sampler does (min_new_token): it still
    # counts in the probabilities that decide top-p, so restore its score for them.
    scores[:, :, eos_token] = eos_column
    values, index = scores.topk(top, dim=-1)  # (B, Q, top), best first
    probs = torch.exp(values - torch.logsumexp(scores, dim=-1, keepdim=True))
    before = probs.cumsum(dim=-1) - probs  # probability of the codes ranked above each one
    rank = torch.arange(top, device=logits.device)
    keep = (before < params.top_p.view(b, 1, 1)) | (rank < MIN_TOKENS_TO_KEEP)
    keep &= rank < params.kept.view(b, 1, 1)
    keep &= ~((index == eos_token) & banned.view(b, 1, 1))
    weights = probs * keep
    cdf = weights.cumsum(dim=-1)
    threshold = (uniform * cdf[..., -1]).unsqueeze(-1)
    pick = torch.searchsorted(cdf, threshold, right=True).clamp(max=top - 1)
    drawn = index.gather(-1, pick).squeeze(-1)
    return torch.where(params.greedy.view(b, 1), greedy, drawn)
