"""bench/search.py: --find-max's doubling and bisection."""

from __future__ import annotations

import pytest

from ttsperf.bench.search import find_max


@pytest.mark.parametrize("true_max", [1, 5, 13, 64])
def test_find_max_concurrency_finds_the_edge(true_max):
    r = find_max(lambda c: c <= true_max, start=1, integer=True, limit=1024)
    assert r.best == true_max
    assert true_max < r.first_fail <= true_max + max(1, int(0.05 * r.first_fail))


def test_find_max_rate_within_tolerance_and_when_nothing_passes():
    r = find_max(lambda x: x <= 7.3, start=1.0, integer=False, limit=1000)
    assert r.best <= 7.3 and (r.first_fail - r.best) / r.first_fail <= 0.05
    none = find_max(lambda c: False, start=4, integer=True, limit=64)
    assert none.best is None and none.first_fail == 1
