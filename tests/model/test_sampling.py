"""The batched sampler: per-row settings, per-row generators, the official filter order."""

from __future__ import annotations

import torch

from ttsperf.model.sampling import SamplingParams, sample

V, Q, EOS = 50, 4, 49


def _logits(seed: int, b: int = 1) -> torch.Tensor:
    return torch.randn(b, Q, V, generator=torch.Generator().manual_seed(seed))


def _empty(b: int) -> torch.Tensor:
    return torch.full((b, Q, 16), -1, dtype=torch.long)


def test_a_row_draws_the_same_alone_or_in_a_batch():
    logits = _logits(0, 3)
    params = [SamplingParams(seed=1), SamplingParams(temperature=1.0, top_k=40), SamplingParams(top_k=1)]
    together = sample(
        logits, _empty(3), params, [True] * 3, EOS, [torch.Generator().manual_seed(i) for i in range(3)]
    )
    for r in range(3):
        alone = sample(
            logits[r : r + 1], _empty(1), [params[r]], [True], EOS, [torch.Generator().manual_seed(r)]
        )
        assert torch.equal(alone[0], together[r])


def test_greedy_is_argmax_and_eos_can_be_forbidden():
    logits = _logits(1)
    logits[0, :, EOS] = 100.0
    assert (sample(logits, _empty(1), [SamplingParams(top_k=1)], [True], EOS, [None]) == EOS).all()
    forbidden = sample(logits, _empty(1), [SamplingParams(top_k=1)], [False], EOS, [None])
    assert torch.equal(forbidden[0], logits[0, :, :EOS].argmax(-1))


def test_top_k_keeps_only_the_k_best():
    logits = _logits(2)
    params = [SamplingParams(temperature=1.0, top_p=1.0, top_k=3)]
    best3 = logits[0].topk(3, dim=-1).indices
    for seed in range(50):
        codes = sample(logits, _empty(1), params, [True], EOS, [torch.Generator().manual_seed(seed)])[0]
        assert all(codes[q] in best3[q] for q in range(Q))


def test_repetition_penalty_turns_greedy_away_from_a_repeated_code():
    logits = torch.zeros(1, Q, V)
    logits[0, :, 7] = 1.0
    logits[0, :, 8] = 0.99
    history = _empty(1)
    history[0, :, -3:] = 7  # code 7 seen three times: 1.0 / 1.05**3 < 0.99
    codes = sample(logits, history, [SamplingParams(top_k=1, repetition_penalty=1.05)], [True], EOS, [None])
    assert (codes == 8).all()
    plain = sample(logits, _empty(1), [SamplingParams(top_k=1, repetition_penalty=1.05)], [True], EOS, [None])
    assert (plain == 7).all()
