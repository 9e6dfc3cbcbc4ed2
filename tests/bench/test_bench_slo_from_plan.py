"""A plan's SLO is checked by bench: `ttsperf plan --json`'s `slo.spec`, handed to `--slo` as is."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.plan.api import make_plan

runner = CliRunner()


@pytest.mark.parametrize("user_slo", [None, "p99=2s,rtf_p99=1,underrun_p99=100ms"])
def test_a_plans_slo_handed_to_bench_unchanged_gives_the_same_limits(user_slo, tmp_path, server_factory):
    """The plan's `slo.spec`, from `ttsperf plan --json`, passed as is to `ttsperf bench --slo`."""
    args = ["plan", "--gpus", "RTX 4090", "--scenario", "realtime", "--requests", "50", "--json"]
    res = runner.invoke(app, args + (["--slo", user_slo] if user_slo else []))
    assert res.exit_code == 0, res.output
    plan_slo = json.loads(res.stdout)["scenarios"][0]["slo"]
    in_code = make_plan(gpus="RTX 4090", scenario="realtime", requests=50, slo=user_slo).scenarios[0].slo
    assert plan_slo["spec"] == in_code.spec and plan_slo["limits"] == in_code.limits

    srv = server_factory(slots=0, service_time=0.01)
    out = tmp_path / "bench"
    bench = runner.invoke(
        app,
        [
            "bench",
            srv.url,
            "--adapter",  # the realtime SLO judges first audio and underrun: streamed replies
            "openai",
            "--stream",
            "--requests",
            "20",
            "--slo",
            plan_slo["spec"],
            "--no-gpu",
            "--no-progress",
            "-o",
            str(out),
        ],
    )
    assert bench.exit_code in (0, 1, 3), bench.output  # a verdict, not a refusal of the spec (2)
    constraints = json.loads((out / "run.json").read_text())["slo"] or {}
    points = json.loads((out / "run.json").read_text())["points"]
    judged = {c["name"]: (c["op"], c["bound"]) for c in points[0]["slo"]["constraints"]}
    assert judged == {name: ("<=", limit) for name, limit in plan_slo["limits"].items()}
    assert constraints["status"] in ("pass", "fail", "inconclusive")
