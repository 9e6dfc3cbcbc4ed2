"""The largest batch for which a monotone test holds: double until it fails, then bisect.

Torch-free, so `plan`'s memory model and `profile`'s device search share it. `fits(b)` is called
O(log answer) times and never above the first failure found while doubling, so a test that
really allocates (CUDA) never asks for more than twice the memory of the answer.
"""

from __future__ import annotations

from collections.abc import Callable


def largest_fitting(fits: Callable[[int], bool], cap: int) -> tuple[int, bool]:
    """(largest b in 1..cap with fits(b), whether the cap stopped the search); 0 when fits(1) fails."""
    if cap < 1:
        raise ValueError("cap must be >= 1")
    lo, b = 0, 1  # lo: largest batch known to fit
    hi = None  # smallest batch known not to fit
    while hi is None:
        if not fits(b):
            hi = b
        elif b == cap:
            return b, True
        else:
            lo, b = b, min(2 * b, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, False
