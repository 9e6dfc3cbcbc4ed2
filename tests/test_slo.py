"""One SLO grammar (ttsperf.slo) for plan and bench: names, units, aliases, the spec plan writes."""

from __future__ import annotations

import pytest

from ttsperf import slo
from ttsperf.errors import UserError
from ttsperf.plan.scenarios import parse_slo as plan_parse_slo


def test_one_value_rule_units_aliases_and_directions():
    limits = {
        x.name: x for x in slo.parse("p99=10s,latency_p50=300ms,underrun_max=0.1s,rtf_p99=1x,error_rate=1%")
    }
    assert set(limits) == {"e2e_p99", "e2e_p50", "underrun_max", "rtf_p99", "error_rate"}  # canonical names
    assert limits["e2e_p99"].value == 10.0 and limits["e2e_p50"].value == 0.3
    assert limits["underrun_max"].metric == "underrun" and limits["underrun_max"].stat == "max"
    assert limits["rtf_p99"].value == 1.0 and limits["error_rate"].value == 0.01
    assert slo.parse("gpu_util_mean=85%")[0].op == ">=" and slo.parse("e2e_p99>=1s")[0].op == ">="
    assert slo.parse("none") == [] and slo.parse("") == [] and slo.parse(None) == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ttfa_p99=300", "--slo 'ttfa_p99=300': give a time unit (ms or s)"),
        ("ttfa_p99=soon", "--slo 'ttfa_p99=soon': 'soon' is not a number with a unit"),
        ("ttfa=300ms", "--slo 'ttfa=300ms': unknown metric 'ttfa'; expected METRIC_STAT"),
        ("e2e_p99=5parsecs", "unknown time unit 'parsecs'"),
        ("rtf_p99=1s", "this metric takes a plain number"),
        ("e2e_p99=1s,p99=2s", "e2e_p99 is given twice"),
    ],
)
def test_bad_specs_name_the_item_and_what_was_expected(spec, message):
    with pytest.raises(UserError, match="^--slo") as info:
        slo.parse(spec)
    assert message in str(info.value)


def test_format_spec_reads_back_to_the_same_limits():
    spec = "ttfa_p99=300ms,e2e_p99=5s,rtf_p95=1.5,error_rate=0.5%,throughput_rps=3,underrun_p99=100ms"
    limits = slo.parse(spec)
    assert slo.format_spec(limits) == spec
    assert slo.parse(slo.format_spec(limits)) == limits
    assert slo.spec_of({"p99": 1.5, "ttfa_p99": 0.3}) == "e2e_p99=1.5s,ttfa_p99=300ms"
    assert slo.format_spec([]) == "none"


def test_plan_reads_the_same_grammar_and_refuses_what_it_cannot_project():
    assert plan_parse_slo("p99=10s,ttfa_p99=300ms") == {"e2e_p99": 10.0, "ttfa_p99": 0.3}
    assert plan_parse_slo("none") == {}
    with pytest.raises(UserError, match="'error_rate' .*: expected upper limits .* on ttfa_p99"):
        plan_parse_slo("error_rate=1%")
    with pytest.raises(UserError, match="give a time unit"):
        plan_parse_slo("ttfa_p99=0.3")  # one rule for both commands: a bare time is an error
