"""Percentiles with a distribution-free confidence interval (order statistics, binomial).

For the p-quantile q of any continuous distribution, the k-th smallest of n samples lies below q
exactly when at least k samples do, so P(x_(k) <= q) = P(Binomial(n, p) >= k). The interval
[x_(l), x_(u)] takes the largest l and the smallest u whose tails are each at most (1 - c) / 2:
a two-sided interval of confidence c, assuming nothing about the shape (no bootstrap, no normal
approximation). Where n is too small for an end to exist it is None: the 97.5% upper end of a
p99 needs n >= 368 (0.99^n <= 0.025), the lower end of a p50 n >= 6.

    >>> interval(list(range(1, 101)), 0.5)   # the textbook ranks 40 and 61
    (40.0, 61.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95


def percentile(values: Sequence[float] | np.ndarray, p: float) -> float:
    """The point estimate: numpy's linear interpolation between order statistics."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), 100.0 * p, method="linear"))


def _binom_cdf(n: int, p: float) -> np.ndarray:
    """P(Binomial(n, p) <= j) for j = 0..n, in log space so n in the millions neither under- nor
    overflows (no scipy in the dependencies)."""
    j = np.arange(1, n + 1, dtype=np.float64)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log((n - j + 1) / j))))
    k = np.arange(n + 1, dtype=np.float64)
    with np.errstate(divide="ignore"):
        logpmf = log_choose + k * math.log(p) + (n - k) * math.log1p(-p)
    return np.cumsum(np.exp(logpmf))


def ranks(n: int, p: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the order statistics bounding the p-quantile; None where n has none."""
    if n < 1:
        return None, None
    tail = (1.0 - confidence) / 2.0
    cdf = _binom_cdf(n, p)
    # l: the largest k with P(Bin <= k - 1) <= tail; u: the smallest k with P(Bin <= k - 1) >= 1 - tail
    low = int(np.searchsorted(cdf[:n], tail, side="right"))
    up = int(np.searchsorted(cdf[:n], 1.0 - tail, side="left")) + 1
    return (low if low >= 1 else None), (up if up <= n else None)


def needed_n(p: float, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """Fewest samples for the (lower, upper) end of the p-quantile's interval to exist."""
    tail = (1.0 - confidence) / 2.0
    # the lower end exists once (1 - p)^n <= tail, the upper once p^n <= tail
    low, up = math.ceil(math.log(tail) / math.log1p(-p)), math.ceil(math.log(tail) / math.log(p))
    # ceil of a float can land one short at an exact boundary: step to where it holds
    while (1 - p) ** low > tail:
        low += 1
    while p**up > tail:
        up += 1
    return low, up


def interval(
    values: Sequence[float] | np.ndarray, p: float, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """[low, high] for the p-quantile of the distribution the values came from. Widened where
    needed to hold the sample's own (interpolated) percentile: with few samples an order statistic
    can sit past it (n = 2: the p99's low end is the larger sample), which reads as a contradiction;
    widening keeps the coverage."""
    a = np.sort(np.asarray(values, dtype=np.float64))
    lo, up = ranks(int(a.size), p, confidence)
    if a.size == 0:
        return None, None
    est = percentile(a, p)
    return (None if lo is None else min(float(a[lo - 1]), est)), (
        None if up is None else max(float(a[up - 1]), est)
    )


def decided(n: int, at_or_below: int, below: int, p: float, op: str, confidence: float) -> str | None:
    """ "pass", "fail" or None (undecided) for `quantile op limit` from counts alone: how many of n
    samples are <= the limit and < it. x_(k) <= limit exactly when at least k samples are."""
    lo, up = ranks(n, p, confidence)
    if op == "<=":
        if up is not None and up <= at_or_below:
            return "pass"
        if lo is not None and lo > at_or_below:
            return "fail"
        return None
    if lo is not None and below < lo:  # x_(lo) >= limit
        return "pass"
    if up is not None and below >= up:  # x_(up) < limit
        return "fail"
    return None


MAX_SETTLE_N = 1_000_000


def settle_n(
    values: Sequence[float], p: float, op: str, limit: float, confidence: float = CONFIDENCE
) -> tuple[int, str] | None:
    """About how many samples would decide `quantile op limit` if later ones fall like these did:
    (n, the verdict then). None when not even MAX_SETTLE_N would (the quantile sits at the limit)."""
    a = np.asarray(values, dtype=np.float64)
    n = int(a.size)
    if n == 0:
        return None
    f_le, f_lt = float(np.mean(a <= limit)), float(np.mean(a < limit))

    def verdict(m: int) -> str | None:
        return decided(m, round(f_le * m), round(f_lt * m), p, op, confidence)

    hi = n
    while True:  # double until decided, then bisect to within 5%
        hi = min(2 * hi, MAX_SETTLE_N)
        if (v := verdict(hi)) is not None:
            break
        if hi >= MAX_SETTLE_N:
            return None
    lo = max(n, hi // 2)
    while hi > lo * 1.05 + 1:
        mid = (lo + hi) // 2
        if verdict(mid) is not None:
            hi = mid
        else:
            lo = mid
    return hi, verdict(hi) or v
