"""`ttsperf plan` end to end: JSON schema, tables, recommendations and one-line errors with exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.plan.api import make_plan
from ttsperf.plan.memory import MemoryModel, Workload
from ttsperf.plan.schema import Plan

runner = CliRunner()
ROW_KEYS = {
    "gpu",
    "fits",
    "max_batch",
    "step_ms",
    "p50_s",
    "p99_s",
    "ttfa_p99_s",
    "max_streams",
    "gpus_needed",
    "usd_per_gpu_hour",
    "usd_per_audio_hour",
    "basis",
}


def run(*args: str):
    return runner.invoke(app, ["plan", *args])


def test_help_has_an_example():
    r = run("--help")
    assert r.exit_code == 0
    assert "ttsperf plan --scenario realtime --streams 200" in r.output


def test_json_is_a_versioned_plan_with_the_issue_keys(tmp_path):
    out = tmp_path / "plan.json"
    r = run(
        "--gpus",
        "T4,RTX 4090",
        "--scenario",
        "realtime",
        "--streams",
        "20",
        "--requests",
        "200",
        "--json",
        "-o",
        str(out),
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data == json.loads(out.read_text())
    plan = Plan.model_validate(data)
    assert data["schema"] == "ttsperf.plan" and data["version"] == 1
    rows = data["scenarios"][0]["rows"]
    assert [row["gpu"] for row in rows] == ["T4", "RTX 4090"]
    for row in rows:
        assert ROW_KEYS <= set(row)
        if row["fits"]:  # per-stream real-time factor and playback stalls at the target load
            assert row["rtf_p99"] > 0 and row["underrun_p99_s"] >= 0 and row["mean_batch"] >= 1
        for b in row["basis"].values():
            assert b["kind"] in ("measured", "projected", "sourced") and b["how"]
    assert plan.inputs.defaults["host_profile"].value == "shipped host-amd-epyc.json"
    assert plan.scenarios[0].recommendation.startswith("realtime (ttfa_p99=300ms,underrun_p99=100ms")


def test_table_output_names_missing_prices_and_recommends_per_scenario():
    r = run("--gpus", "RTX 3080,RTX 4090", "--requests", "200")
    assert r.exit_code == 0, r.output
    assert "no price for RTX 3080" in r.output
    for scenario in ("realtime", "offline", "concurrency"):
        assert f"answer, {scenario} (" in r.output  # each scenario's answer block


def test_memory_at_shows_the_breakdown():
    r = run("--gpus", "RTX 3080", "--scenario", "offline", "--memory-at", "4", "--requests", "100")
    assert r.exit_code == 0, r.output
    assert "memory at batch 4" in r.output
    line = next(x for x in r.output.splitlines() if x.startswith("RTX 3080 ") and "yes" in x)
    assert "0.521" in line  # fp16 weights: 559,315,480 B = 0.521 GiB


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--streams", "0"], "--streams: expected a positive number of streams, found 0"),
        (["--rate", "-1"], "--rate: expected a positive request rate"),
        (["--streams", "5", "--rate", "1"], "--streams and --rate: expected one load, found both"),
        (["--gpus", "RTX 4900"], "--gpus: unknown GPU 'RTX 4900' (did you mean 'RTX 4090'?)"),
        (["--price", "RTX 4090=abc"], "--price 'RTX 4090=abc': USD per GPU-hour: expected a positive number"),
        (["--scenario", "fast"], "--scenario: expected one of realtime, offline, concurrency, found 'fast'"),
        (["--slo", "ttfa=300ms"], "--slo 'ttfa=300ms': unknown metric 'ttfa'; expected METRIC_STAT"),
        (["--slo", "ttfa_p99=soon"], "--slo 'ttfa_p99=soon': 'soon' is not a number with a unit, e.g. 300ms"),
        (["--dtype", "int4"], "--dtype: expected one of fp32, fp16, bf16, found 'int4'"),
        (["--catalog", "/nonexistent.csv"], "/nonexistent.csv: cannot read"),
        (["--profile", "/nonexistent.json"], "/nonexistent.json: cannot read"),
        (["--memory-at", "0"], "--memory-at: expected a batch >= 1, found 0"),
        (["--step-overhead", "fast"], "--step-overhead 'fast': expected a duration"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    r = run("--gpus", "RTX 4090", *args) if "--gpus" not in args else run(*args)
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert "Traceback" not in r.output
    assert len([x for x in r.stderr.splitlines() if x.strip()]) == 1


def test_bad_catalog_row_names_file_row_field(tmp_path):
    bad = tmp_path / "gpus.csv"
    bad.write_text(
        "name,memory_gb,mem_bandwidth_gbs,fp16_dense_tflops,fp32_tflops,source\n"
        "Card,24,abc,100,50,datasheet\n"
    )
    r = run("--catalog", str(bad), "--prices", str(tmp_path / "none.csv"))
    assert r.exit_code == 2
    assert f"{bad}: line 2: field 'mem_bandwidth_gbs': expected a positive number, found 'abc'" in r.output


def test_user_catalog_and_price_file_work_together(tmp_path):
    cat = tmp_path / "gpus.csv"
    cat.write_text(
        "name,memory_gb,mem_bandwidth_gbs,fp16_dense_tflops,fp32_tflops,source\n"
        "MyCard,16,500,50,20,my datasheet\n"
    )
    prices = tmp_path / "prices.csv"
    prices.write_text("gpu,currency,per_gpu_hour,source\nMyCard,USD,0.4,my Alibaba Cloud quote 2026-11\n")
    plan = make_plan(catalog=str(cat), prices=str(prices), scenario="offline", requests=100)
    row = plan.scenarios[0].rows[0]
    assert row.gpu == "MyCard" and row.usd_per_gpu_hour == 0.4
    assert "Alibaba" in row.basis["usd_per_gpu_hour"].how
    assert row.usd_per_audio_hour is not None and row.usd_per_audio_hour > 0


def test_a_price_file_merges_over_the_shipped_prices(tmp_path):
    """A file pricing one card changes that card only: the others keep the shipped price, so the
    recommendation cannot flip because a user priced the card they rent."""
    shipped = make_plan(gpus="RTX 3090,RTX 4090", scenario="offline", requests=100).scenarios[0]
    prices = tmp_path / "prices.csv"
    prices.write_text("gpu,currency,per_gpu_hour,source\nRTX 4090,USD,0.05,my quote 2026-11\n")
    plan = make_plan(gpus="RTX 3090,RTX 4090", prices=str(prices), scenario="offline", requests=100)
    rows = {r.gpu: r for r in plan.scenarios[0].rows}
    before = {r.gpu: r for r in shipped.rows}
    assert rows["RTX 4090"].usd_per_gpu_hour == 0.05
    assert rows["RTX 3090"].usd_per_gpu_hour == before["RTX 3090"].usd_per_gpu_hour is not None
    assert f"with {prices} over it (1 card(s) priced from it)" in plan.inputs.prices


def test_output_dir_writes_plan_and_a_pareto_chart_per_scenario(tmp_path):
    import xml.dom.minidom

    out = tmp_path / "plan-out"
    r = run("--gpus", "RTX 3090,RTX 4090,A100 40GB PCIe", "--requests", "100", "-o", f"{out}/")
    assert r.exit_code == 0, r.output
    assert Plan.model_validate(json.loads((out / "plan.json").read_text()))
    for name in ("realtime", "offline", "concurrency"):
        doc = xml.dom.minidom.parse(str(out / f"pareto-{name}.svg"))
        drawn = [t.firstChild.data for t in doc.getElementsByTagName("text")]
        assert "RTX 3090" in drawn  # every card here meets the SLO and has a price


def test_pareto_front_drops_dominated_cards():
    from ttsperf.plan.schema import PlanRow
    from ttsperf.report.cost_chart import pareto

    def row(gpu, p99, cost):
        return PlanRow(
            gpu=gpu,
            fits=True,
            max_batch=1,
            step_ms=1,
            p50_s=p99,
            p99_s=p99,
            ttfa_p99_s=0.1,
            max_streams=1,
            max_rate_rps=None,
            meets_slo=True,
            gpus_needed=1,
            usd_per_gpu_hour=1,
            usd_per_hour=1,
            usd_per_audio_hour=cost,
            memory_bytes={},
            basis={},
        )

    rows = [
        row("fast-dear", 1.0, 5.0),
        row("slow-cheap", 3.0, 1.0),
        row("dominated", 3.5, 6.0),
        row("middle", 2.0, 2.0),
    ]
    assert [r.gpu for r in pareto(rows)] == ["fast-dear", "middle", "slow-cheap"]


def test_card_without_the_dtype_or_the_memory_does_not_fit(tmp_path):
    plan = make_plan(gpus="T4,RTX 4090", dtype="bf16", scenario="offline", requests=100)
    t4 = plan.scenarios[0].rows[0]
    assert not t4.fits and t4.note == "no bf16 support listed in the catalog"
    cat = tmp_path / "gpus.csv"
    cat.write_text(
        "name,memory_gb,mem_bandwidth_gbs,fp16_dense_tflops,fp32_tflops,source\n"
        "Tiny,1,100,10,5,made up for a test\n"
    )
    row = make_plan(catalog=str(cat), scenario="offline", requests=100).scenarios[0].rows[0]
    assert not row.fits and row.max_batch == 0
    need = MemoryModel("fp16").total(1, Workload()) / 2**30  # weights + CUDA context alone exceed 1 GiB
    assert need > 1 and row.note == f"does not fit: one sequence needs {need:.2f} GiB"


def test_slot_tokens_below_one_request_is_an_error():
    r = run("--gpus", "RTX 4090", "--slot-tokens", "100")
    assert r.exit_code == 2
    assert (
        "--slot-tokens: expected at least the 432 tokens of the longest prompt and reply (51 + 381 steps), "
        "found 100" in r.output
    )


def test_the_answer_comes_first_as_a_block_whose_commands_paste_whole():
    args = ["--scenario", "realtime", "--gpus", "T4,L4,RTX 3090", "--requests", "200"]
    plan = json.loads(run(*args, "--json").output)
    rec = plan["scenarios"][0]["recommended"]
    lines = subprocess.run(
        [sys.executable, "-m", "ttsperf", "plan", *args], capture_output=True, text=True, check=True,
        env={**os.environ, "COLUMNS": "80"},
    ).stdout.splitlines()  # fmt: skip
    assert lines[0].startswith("answer, realtime (100 streams; SLO ttfa_p99=300ms")
    block = lines[: lines.index("")]
    assert all(len(line) <= 80 for line in block)
    assert f"{rec['gpus_needed']} x {rec['gpu']}" in block[1]

    def command(start: str) -> str:  # the lines from `start`, joined as a shell joins `\` lines
        i = next(i for i, line in enumerate(block) if line.strip().startswith(start))
        parts = []
        for line in block[i:]:
            parts.append(line.strip().removesuffix("\\").strip())
            if not line.endswith("\\"):
                return " ".join(parts)
        raise AssertionError(block)

    assert command("ttsperf serve") == rec["settings"]["serve_flags"]
    assert command("ttsperf bench") == rec["check"]
    assert rec["check"].startswith("ttsperf bench URL --adapter openai --stream --text-set zh-8s --users")
    assert f"{rec['max_streams']} streams per GPU" in "\n".join(block)
    # whose price the cost rests on, as --list-prices names it
    assert rec["price"] and f"  price: {rec['price']}" in block
    # the legend follows the tables, and the long sentence is not printed again
    assert not any(line.startswith("realtime: realtime (") for line in lines)


def test_users_plan_the_dialogue_scenarios_listeners_as_streams_do():
    args = ["--scenario", "realtime", "--gpus", "T4", "--requests", "200", "--json"]
    users = json.loads(run(*args, "--users", "100").output)["scenarios"][0]
    streams = json.loads(run(*args, "--streams", "100").output)["scenarios"][0]
    assert users["load"]["value"] == 100 and users["rows"] == streams["rows"]
    refused = run(*args, "--users", "100", "--rate", "5")
    assert refused.exit_code == 2 and "--users and --rate: expected one load" in refused.output


def test_the_bare_plan_names_each_tier_once_and_explains_its_one_sided_ranges():
    """Issue 35, on `ttsperf plan` as typed: the price line read "RunPod community RTX 3090
    community", and the 10,000-user table's "41 (-44)" and "112 (109-)" went unexplained."""
    r = run()
    assert r.exit_code == 0, r.output
    prices = [ln for ln in r.stdout.splitlines() if ln.startswith("  price: ")]
    assert prices and all(not re.search(r"\b(community|secure)\b.*\b\1\b", ln) for ln in prices), prices
    assert "  price: RunPod community RTX 3090, read " in prices[0]
    table = r.stdout.split("concurrency: tens of thousands")[1]
    assert re.search(r" \d+ \(-\d+\) ", table) and re.search(r" \d+ \(\d+-\) ", table), table
    assert "n (-b), n (a-) = n is one end of its range itself: n to b, a to n" in r.stdout
    alike = run("--scenario", "realtime", "--gpus", "RTX 3090", "--requests", "200")  # no one-sided cell
    assert alike.exit_code == 0 and "n (-b)" not in alike.stdout, alike.output


def test_a_plan_no_card_meets_exits_3_after_showing_and_writing_it(tmp_path):
    args = ["--scenario", "realtime", "--gpus", "T4", "--slo", "ttfa_p99=1ms", "--requests", "100"]
    r = run(*args, "-o", str(tmp_path / "plans") + "/")
    assert r.exit_code == 3, r.output
    said = r.stderr.strip().splitlines()[-1]
    assert said == "plan: no card meets the SLO of realtime (ttfa_p99=1ms): exit 3"
    assert "T4: misses the SLO even at the least load" in r.stdout  # the plan is shown all the same
    assert (tmp_path / "plans" / "plan.json").is_file()
    assert run(*args, "--json").exit_code == 3
    met = run("--scenario", "realtime", "--gpus", "T4", "--slo", "ttfa_p99=1s", "--requests", "100")
    assert met.exit_code == 0 and "no card meets" not in met.stderr, met.output
    helped = run("--help").output
    assert "3 when no card meets one" in helped
