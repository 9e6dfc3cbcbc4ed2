"""profile/search.py: the largest batch for which a monotone test holds."""

from __future__ import annotations

import pytest

from ttsperf.profile.search import largest_fitting


@pytest.mark.parametrize("cap", [1, 7, 32])
def test_largest_fitting_is_exact_and_never_probes_far_past_the_answer(cap):
    for threshold in range(0, 45):
        tried = []

        def fits(b, t=threshold, tried=tried):
            tried.append(b)
            return b <= t

        best, capped = largest_fitting(fits, cap)
        assert best == min(threshold, cap)
        assert capped == (threshold >= cap)
        assert max(tried) <= max(1, 2 * best)  # doubling stops at the first failure
        assert len(tried) <= 2 * cap.bit_length() + 2
