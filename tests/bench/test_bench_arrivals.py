"""bench/arrivals.py: open-loop schedules and the --arrival grammar."""

from __future__ import annotations

import numpy as np
import pytest

from ttsperf.bench import arrivals
from ttsperf.errors import UserError


def test_constant_schedule_is_exactly_periodic():
    off = arrivals.schedule("constant", 4.0, seed=0, n=9)
    np.testing.assert_allclose(off, np.arange(9) * 0.25)


@pytest.mark.parametrize(
    ("kind", "shape", "cv"), [("poisson", 1.0, 1.0), ("gamma", 4.0, 0.5), ("gamma", 0.25, 2.0)]
)
def test_random_schedules_have_the_asked_rate_and_burstiness(kind, shape, cv):
    gaps = np.diff(arrivals.schedule(kind, 10.0, seed=1, n=200_001, shape=shape))
    assert gaps.mean() == pytest.approx(0.1, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)


def test_duration_schedule_stays_inside_the_duration():
    off = arrivals.schedule("poisson", 50.0, seed=3, duration=10.0)
    assert off[0] == 0.0 and off[-1] < 10.0
    assert len(off) == pytest.approx(500, rel=0.15)


@pytest.mark.parametrize("spec", ["uniform", "gamma:0", "gamma:x", "poisson:2"])
def test_bad_arrival_specs(spec):
    with pytest.raises(UserError, match="--arrival"):
        arrivals.parse_arrival(spec)
