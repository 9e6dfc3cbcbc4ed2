"""The capacity search on a fake simulator: a latency that grows with load by a known law, so the
answer is known exactly (integer streams and float rates; a load that never meets the SLO; one
that always does)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from ttsperf.plan.capacity import Capacity, RateBracket, StreamBracket, find_capacity
from ttsperf.plan.simulate import Load


@dataclass
class Fake:
    """What find_capacity reads of a SimResult: the SLO metrics and the throughput."""

    ttfa_p99: float
    throughput_rps: float
    load: Load

    def metric(self, name: str) -> float:
        return float(getattr(self, name))


class FakeSim:
    """TTFA = per_unit x load (a streams load) or per_unit x rate; saturated throughput `top`."""

    def __init__(self, per_unit: float, top: float = 10.0) -> None:
        self.per_unit, self.top, self.calls = per_unit, top, []

    def __call__(self, load: Load) -> Fake:
        self.calls.append(load)
        return Fake(self.per_unit * load.value, self.top, load)


SLO = {"ttfa_p99": 0.3}


def test_streams_capacity_is_the_largest_whole_load_meeting_the_slo():
    sim = FakeSim(0.01)  # 30 streams reach exactly 0.3 s; 31 miss
    cap = find_capacity(64, "streams", SLO, sim)
    assert cap.value == 30 and isinstance(cap.value, int)
    assert cap.result.load == Load("streams", 30)
    assert cap.above_load == Load("streams", 31) and cap.above.ttfa_p99 > 0.3
    assert cap.closest is None
    assert all(load.kind == "streams" and load.value == int(load.value) for load in sim.calls)


@pytest.mark.parametrize("guess", [None, 1, 12, 30, 31, 200, 10_000])
def test_any_guess_finds_the_same_streams_capacity(guess):
    assert find_capacity(64, "streams", SLO, FakeSim(0.01), guess=guess).value == 30


def test_a_guess_near_the_answer_costs_fewer_runs():
    cold, warm = FakeSim(0.01), FakeSim(0.01)
    find_capacity(64, "streams", SLO, cold)
    find_capacity(64, "streams", SLO, warm, guess=29)
    assert len(warm.calls) < len(cold.calls)


def test_rate_capacity_bisects_to_1_256_of_the_saturated_throughput():
    sim = FakeSim(0.1, top=10.0)  # 3 req/s reach 0.3 s
    cap = find_capacity(8, "rate", SLO, sim)
    assert sim.calls[0] == Load("streams", 8)  # the saturated closed loop bounds the rate
    assert 3.0 - 10.0 / 256 <= cap.value <= 3.0
    assert cap.above_load.kind == "rate" and cap.above_load.value > 3.0


def test_resolution_stops_the_bisection_early():
    fine, coarse = FakeSim(0.01), FakeSim(0.01)
    a = find_capacity(1000, "streams", SLO, fine, guess=20)
    b = find_capacity(1000, "streams", SLO, coarse, guess=20, resolution=0.05)
    assert a.value == 30 and 30 * 0.95 <= b.value <= 30
    assert len(coarse.calls) <= len(fine.calls)


@pytest.mark.parametrize("kind", ["streams", "rate"])
def test_a_load_that_never_meets_the_slo_has_capacity_zero_and_its_closest_run(kind):
    sim = FakeSim(1.0, top=4.0)  # the least load (1 stream, 4/256 req/s) already misses 1 ms
    never = {"ttfa_p99": 1e-3}
    cap = find_capacity(8, kind, never, sim)
    assert cap.value == 0 and cap.result is None
    assert cap.closest is not None and cap.closest is cap.above
    least = 1 if kind == "streams" else 4.0 / 256
    assert cap.above_load == Load(kind, least)


def test_a_load_that_always_meets_the_slo_is_capped_by_the_bracket():
    streams = find_capacity(8, "streams", SLO, FakeSim(0.0))
    assert streams.value == 32 and streams.above is None  # 4 x the batch: past it requests only queue
    rate = find_capacity(8, "rate", SLO, FakeSim(0.0, top=7.5))
    # up to the saturated throughput, within the bisection's 1/256 of it (the top is never run)
    assert 7.5 - 7.5 / 256 <= rate.value <= 7.5 and rate.above is None


def test_no_slo_is_the_saturated_card():
    sim = FakeSim(1.0, top=5.0)
    assert find_capacity(16, "streams", {}, sim).value == 16
    assert find_capacity(16, "rate", {}, sim).value == 5.0


def test_brackets_step_as_documented():
    doubling, stepping = StreamBracket(100, False, 0.0), StreamBracket(100, True, 0.0)
    assert [doubling.up(n) for n in (1, 2, 64)] == [2, 4, 100]
    assert [stepping.up(n) for n in (1, 4, 40, 90)] == [2, 5, 50, 100]
    assert [doubling.down(n) for n in (1, 2, 30)] == [1, 1, 20]
    assert doubling.mid(10, 11) is None and doubling.mid(10, 20) == 15
    rate = RateBracket(10.0, True, 0.0)
    assert rate.least == pytest.approx(10 / 256) and rate.up(9.0) == 10.0
    assert rate.down(rate.least) == rate.least and rate.mid(1.0, 1.0 + 10 / 512) is None
    assert isinstance(Capacity(0, None, None).value, int) and not math.isnan(rate.mid(1.0, 2.0))
