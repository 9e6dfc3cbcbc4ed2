"""bench/quantiles.py: percentiles and their distribution-free intervals."""

from __future__ import annotations

import numpy as np

from ttsperf.bench import quantiles


def test_order_statistic_ranks_match_the_binomial_tails():
    from math import comb

    def cdf(n, p, k):  # P(Binomial(n, p) <= k), exactly
        return sum(comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k + 1))

    for n, p in [(20, 0.5), (100, 0.9), (400, 0.99), (1000, 0.95)]:
        lo, up = quantiles.ranks(n, p)
        assert cdf(n, p, lo - 1) <= 0.025 < cdf(n, p, lo)  # the largest rank with tail <= 2.5%
        assert cdf(n, p, up - 2) < 0.975 <= cdf(n, p, up - 1)  # the smallest with coverage >= 97.5%
    assert quantiles.needed_n(0.99) == (1, 368) and quantiles.needed_n(0.5) == (6, 6)
    assert quantiles.ranks(367, 0.99)[1] is None and quantiles.ranks(368, 0.99)[1] == 368


def test_interval_covers_the_true_percentile_at_its_confidence():
    """Any distribution: exponential samples of 400, p99 = ln(100); 95% intervals cover it >= 95%."""
    rng = np.random.default_rng(0)
    truth = -np.log(0.01)
    hits = [
        lo <= truth <= hi
        for lo, hi in (quantiles.interval(rng.exponential(1.0, 400), 0.99) for _ in range(400))
    ]
    assert 0.95 <= np.mean(hits) <= 0.995
    lo, hi = quantiles.interval(rng.exponential(1.0, 5000), 0.99)
    assert lo < truth < hi and hi - lo < 1.5


def test_an_interval_always_holds_the_samples_own_percentile():
    # n = 2: the p99's valid low end is the larger sample, above the interpolated p99 itself
    lo, hi = quantiles.interval([2.0, 4.0], 0.99)
    assert hi is None and lo is not None and lo <= quantiles.percentile([2.0, 4.0], 0.99) < 4.0
    rng = np.random.default_rng(3)
    for n in (2, 3, 5, 20, 400):
        v = rng.exponential(1.0, n)
        for p in (0.5, 0.9, 0.99):
            lo, hi = quantiles.interval(v, p)
            est = quantiles.percentile(v, p)
            assert (lo is None or lo <= est) and (hi is None or est <= hi)
