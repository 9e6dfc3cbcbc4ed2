"""bench/slo.py: an SLO against one load point (pass, fail, inconclusive)."""

from __future__ import annotations

import math

import pytest

from ttsperf.bench import metrics, slo
from ttsperf.errors import UserError

from .records import rec


def test_slo_parsing_units_and_directions():
    b = {
        x.name: x
        for x in slo.parse_slo("ttfa_p99=300ms,latency_p99=5s,rtf_p95=1,error_rate=1%,gpu_util_mean=85%")
    }
    assert b["ttfa_p99"].value == pytest.approx(0.3) and b["ttfa_p99"].op == "<="
    assert b["e2e_p99"].value == 5.0 and b["rtf_p95"].value == 1.0
    assert b["error_rate"].value == pytest.approx(0.01)
    assert b["gpu_util_mean"].value == pytest.approx(0.85) and b["gpu_util_mean"].op == ">="
    assert slo.parse_slo("throughput_rps>=3")[0].op == ">="


@pytest.mark.parametrize("spec", ["ttfa_p99", "ttfa_p99=300", "e2e_p99=5 parsecs", "error_rate=5", "foo=1"])
def test_slo_bad_specs(spec):
    with pytest.raises(UserError, match="--slo"):
        slo.parse_slo(spec)


def test_slo_verdict_margin_and_goodput_check():
    from ttsperf.bench.results import Strategy

    recs = [rec(i, 0.0, 0.1 + 0.01 * (i % 10)) for i in range(40)]
    bounds = slo.parse_slo("e2e_p50=120ms,e2e_mean=100ms")
    p = metrics.summarize(Strategy(kind="concurrent", concurrency=1), recs, slo.meets_request_bounds(bounds))
    v = slo.evaluate(bounds, p, recs)
    p50, mean = v.constraints
    assert (
        p50.status == "fail"
        and p50.value == pytest.approx(0.145)
        and p50.margin == pytest.approx(0.12 - 0.145)
    )
    assert p50.ci[0] > 0.12 and p50.ci[0] <= 0.145 <= p50.ci[1] and p50.n == 40  # even the low end is over
    assert mean.status == "fail" and mean.margin == pytest.approx(0.1 - 0.145)
    assert "e2e_mean = 145.0 ms, limit <= 100.0 ms, over by 45.0 ms (45%), n=40" in v.failures
    assert "CI [" in slo.describe(p50) and v.status == "fail"
    # goodput: requests whose own e2e is within both bounds (<= 100 ms): only the 0.10 s ones
    assert p.goodput_rps == pytest.approx(4 / p.window_s)


def test_a_percentile_verdict_is_inconclusive_until_its_interval_clears_the_limit():
    from ttsperf.bench.results import Strategy

    def judge(spec, recs):
        p = metrics.summarize(Strategy(kind="concurrent", concurrency=1), recs)
        return slo.evaluate(slo.parse_slo(spec), p, recs)

    few = [rec(i, 0.0, 0.1 + 0.001 * i) for i in range(100)]  # e2e 100..199 ms, all far under 1 s
    v = judge("e2e_p99=1s", few)
    (c,) = v.constraints
    assert v.status == "inconclusive" and c.ci[0] is not None and c.ci[1] is None
    assert "its high end needs n >= 368" in c.note and 368 <= c.settle_n <= 400
    assert "requests would settle it (pass" in v.undecided[0]
    assert judge("e2e_p99=1s", [rec(i, 0.0, 0.1 + 0.0002 * i) for i in range(400)]).status == "pass"
    # the median's interval (~140..160 ms) straddles 150 ms: more requests, not a coin toss, decide
    (mid,) = judge("e2e_p50=150ms", few).constraints
    assert mid.status == "inconclusive" and mid.ci[0] < 0.15 < mid.ci[1]
    assert "straddles the limit" in mid.note
    assert judge("e2e_p50=130ms", few).status == "fail" and judge("e2e_p50=170ms", few).status == "pass"


def test_requests_to_decide_asks_for_what_settles_an_undecided_percentile_and_no_more():
    from ttsperf.bench.results import Strategy

    def verdict(spec, recs):
        p = metrics.summarize(Strategy(kind="concurrent", concurrency=1), recs)
        return slo.evaluate(slo.parse_slo(spec), p, recs)

    few = [rec(i, 0.0, 0.1 + 0.001 * i) for i in range(100)]
    v = verdict("e2e_p99=1s", few)
    (c,) = v.constraints
    more = slo.requests_to_decide(v, 100, cap=2000)
    assert more == math.ceil(c.settle_n * slo.SETTLE_MARGIN) - 100 and 268 <= more <= 340
    assert slo.requests_to_decide(v, 100, cap=250) == 150  # never past the cap
    decided = verdict("e2e_p99=2s", [rec(i, 0.0, 0.1) for i in range(400)])
    assert slo.requests_to_decide(decided, 400, 2000) == 0
    # a limit no number of requests decides (nothing measures GPU use here): send nothing more
    assert slo.requests_to_decide(verdict("e2e_p99=1s,gpu_util_mean=50%", few), 100, 2000) == 0


def test_a_point_where_nothing_succeeded_fails_every_limit():
    from ttsperf.bench.results import Strategy

    dead = [rec(i, 0.0, 0.001, error="connect") for i in range(5)]
    p = metrics.summarize(Strategy(kind="concurrent", concurrency=1), dead)
    v = slo.evaluate(slo.parse_slo("e2e_p99=5s,ttfa_p50=1s"), p, dead)
    assert v.status == "fail" and [c.status for c in v.constraints] == ["fail", "fail"]
    assert v.failures[0] == "e2e_p99: no request succeeded (5 sent)"
