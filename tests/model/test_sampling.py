"""The batched sampler: per-row settings as tensors, stateless per-row randomness, the official
filter order (checked against a plain full-sort implementation of it)."""

from __future__ import annotations

import pytest
import torch

from ttsperf.model.sampling import (
    MIN_TOKENS_TO_KEEP,
    RowParams,
    SamplingParams,
    candidates,
    row_seeds,
    sample,
    seed_key,
    uniforms,
    width,
)

V, Q, EOS = 50, 4, 49


def _logits(seed: int, b: int = 1) -> torch.Tensor:
    return torch.randn(b, Q, V, generator=torch.Generator().manual_seed(seed))


def _empty(b: int) -> torch.Tensor:
    return torch.full((b, Q, 16), -1, dtype=torch.long)


def _sample(logits, params, *, history=None, allow=True, uniform=None):
    b = logits.shape[0]
    rows = RowParams.of(params, V)
    top = width(max(candidates(p, V) for p in params), V)
    history = _empty(b) if history is None else history
    uniform = torch.full((b, Q), 0.5) if uniform is None else uniform
    return sample(logits.clone(), history, rows, torch.full((b,), allow), EOS, uniform, top)


def reference_probs(logits: torch.Tensor, p: SamplingParams, allow_eos: bool) -> torch.Tensor:
    """The official order on one row, the obvious way: full sorts over the vocabulary."""
    scores = logits / p.temperature
    ascending, order = torch.sort(scores, dim=-1)
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative <= 1.0 - p.top_p
    drop[..., -MIN_TOKENS_TO_KEEP:] = False
    filtered = scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    k = candidates(p, V)
    kth = torch.sort(filtered, dim=-1, descending=True).values[..., k - 1 : k]
    filtered = filtered.masked_fill(filtered < kth, float("-inf"))
    if not allow_eos:
        filtered[..., EOS] = float("-inf")
    return filtered.softmax(dim=-1)


@pytest.mark.parametrize(
    "params, allow",
    [
        (SamplingParams(), True),
        (SamplingParams(temperature=1.0, top_p=0.9, top_k=40), True),
        (SamplingParams(temperature=0.7, top_p=0.5, top_k=5), False),
        (SamplingParams(temperature=2.0, top_p=1.0, top_k=50), True),
    ],
)
def test_draws_follow_the_official_filters(params, allow):
    """Inverse-CDF draws over an even grid of uniforms reproduce each code's probability under
    the reference filters to within the grid's resolution."""
    n = 4096
    for seed in range(5):
        logits = _logits(seed)
        logits[0, :, EOS] += 2.0  # make EOS a likely candidate, so banning it matters
        grid = ((torch.arange(n) + 0.5) / n).view(n, 1).expand(n, Q)
        codes = _sample(logits.expand(n, Q, V), [params] * n, allow=allow, uniform=grid)
        for q in range(Q):
            freq = torch.bincount(codes[:, q], minlength=V).float() / n
            expected = reference_probs(logits[0, q], params, allow)
            assert (freq - expected).abs().max() <= 2.0 / n, (seed, q)


def test_a_row_draws_the_same_alone_or_in_a_batch():
    logits = _logits(0, 3)
    params = [SamplingParams(seed=1), SamplingParams(temperature=1.0, top_k=40), SamplingParams(top_k=1)]
    u = uniforms(seed_key(torch.tensor([11, 12, 13])), torch.tensor([5, 0, 9]), Q)
    together = _sample(logits, params, uniform=u)
    for r in range(3):
        alone = _sample(logits[r : r + 1], [params[r]], uniform=u[r : r + 1])
        assert torch.equal(alone[0], together[r])


def test_greedy_is_argmax_and_eos_can_be_forbidden():
    logits = _logits(1)
    logits[0, :, EOS] = 100.0
    assert (_sample(logits, [SamplingParams(top_k=1)]) == EOS).all()
    forbidden = _sample(logits, [SamplingParams(top_k=1)], allow=False)
    assert torch.equal(forbidden[0], logits[0, :, :EOS].argmax(-1))


def test_top_k_keeps_only_the_k_best():
    logits = _logits(2)
    best3 = logits[0].topk(3, dim=-1).indices
    params = [SamplingParams(temperature=1.0, top_p=1.0, top_k=3)]
    for u in torch.linspace(0, 0.999, 50):
        codes = _sample(logits, params, uniform=torch.full((1, Q), float(u)))[0]
        assert all(codes[q] in best3[q] for q in range(Q))


def test_repetition_penalty_turns_greedy_away_from_a_repeated_code():
    logits = torch.zeros(1, Q, V)
    logits[0, :, 7] = 1.0
    logits[0, :, 8] = 0.99
    history = _empty(1)
    history[0, :, -3:] = 7  # code 7 seen three times: 1.0 / 1.05**3 < 0.99
    greedy = [SamplingParams(top_k=1, repetition_penalty=1.05)]
    assert (_sample(logits, greedy, history=history) == 8).all()
    assert (_sample(logits, greedy) == 7).all()


def _lowbias32(x: int) -> int:
    """The hash, on Python integers (no overflow anywhere), to check the tensor version's wrap."""
    m = 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & m
    x ^= x >> 15
    x = (x * 0x846CA68B) & m
    return x ^ (x >> 16)


def test_uniforms_are_a_pure_function_of_seed_step_and_codebook():
    seeds = torch.tensor([0, 1, 2**40 + 7, 2**62 + 3])
    keys = seed_key(seeds)
    for s, k in zip(seeds.tolist(), keys.tolist(), strict=True):
        assert k == _lowbias32((s & 0xFFFFFFFF) ^ _lowbias32(((s >> 32) & 0xFFFFFFFF) ^ 0x9E3779B9))
    steps = torch.tensor([0, 3, 1000, 5])
    u = uniforms(keys, steps, Q)
    for r in range(4):
        for q in range(Q):
            counter = (steps[r].item() * Q + q + 0x85EBCA6B) & 0xFFFFFFFF
            h = _lowbias32(keys[r].item() ^ _lowbias32(counter))
            assert u[r, q].item() == (h >> 8) / 2**24
    assert torch.equal(u, uniforms(keys, steps, Q))  # no state: the same call, the same numbers
    assert torch.equal(u[2:3], uniforms(keys[2:3], steps[2:3], Q))  # a row alone draws the same


def test_uniforms_look_uniform_and_independent():
    keys = seed_key(torch.arange(64))
    u = torch.cat([uniforms(keys, torch.full((64,), s), Q) for s in range(200)]).flatten()
    assert 0.0 <= float(u.min()) and float(u.max()) < 1.0
    counts = torch.histc(u, bins=16, min=0, max=1)
    expected = u.numel() / 16
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 40  # 15 degrees of freedom: p < 0.001 would be 37.7; a broken hash is in the thousands
    a, b = u[:-1], u[1:]
    assert abs(float(torch.corrcoef(torch.stack([a, b]))[0, 1])) < 0.02


def test_rows_without_a_seed_get_different_ones():
    seeds = row_seeds([None, None, 5, 2**64 + 5])
    assert seeds[0] != seeds[1] and seeds[2] == 5 and seeds[3] == 5
