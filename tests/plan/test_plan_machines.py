"""Replicas and machines: `serve --ray` runs one engine per GPU, so replicas = GPUs needed, and
machines = ceil(GPUs / --gpus-per-machine)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.plan.api import make_plan
from ttsperf.plan.cost import DEFAULT_GPUS_PER_MACHINE, machines_needed

runner = CliRunner()


@pytest.mark.parametrize(
    ("gpus", "per_machine", "machines"),
    [(1, 8, 1), (8, 8, 1), (9, 8, 2), (16, 8, 2), (17, 8, 3), (5, 4, 2), (3, 1, 3)],
)
def test_machines_hold_the_gpus(gpus, per_machine, machines):
    assert machines_needed(gpus, per_machine) == machines


def test_rows_report_replicas_and_machines_for_the_target_load():
    plan = make_plan(gpus="RTX 4090", scenario="realtime", streams=1500, requests=200, gpus_per_machine=4)
    row = plan.scenarios[0].rows[0]
    assert row.gpus_needed is not None and row.gpus_needed > 4  # enough load for several machines
    assert row.replicas == row.gpus_needed == -(-1500 // row.max_streams)
    assert row.machines == -(-row.gpus_needed // 4)
    assert row.basis["machines"].how == "ceil(gpus_needed / 4 GPUs per machine)"
    assert plan.inputs.gpus_per_machine == 4


def test_default_is_eight_gpus_per_machine():
    plan = make_plan(gpus="RTX 4090", scenario="realtime", streams=500, requests=200)
    row = plan.scenarios[0].rows[0]
    assert DEFAULT_GPUS_PER_MACHINE == 8 and plan.inputs.gpus_per_machine == 8
    assert row.machines == -(-row.gpus_needed // 8)


def test_a_card_that_does_not_fit_has_no_replicas(tmp_path):
    cat = tmp_path / "gpus.csv"
    cat.write_text(
        "name,memory_gb,mem_bandwidth_gbs,fp16_dense_tflops,fp32_tflops,source\nTiny,0.5,100,10,5,test\n"
    )
    row = make_plan(catalog=str(cat), scenario="offline", requests=100).scenarios[0].rows[0]
    assert not row.fits and row.replicas is None and row.machines is None


def test_cli_json_and_table_show_machines():
    args = ["plan", "--gpus", "RTX 4090", "--scenario", "realtime", "--streams", "500", "--requests", "200"]
    r = runner.invoke(app, [*args, "--gpus-per-machine", "2", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    row = data["scenarios"][0]["rows"][0]
    assert row["replicas"] == row["gpus_needed"] and row["machines"] == -(-row["gpus_needed"] // 2)
    assert data["inputs"]["gpus_per_machine"] == 2
    table = runner.invoke(app, [*args, "--wide"])
    assert table.exit_code == 0 and "serve --ray replicas" in table.stdout and "machines" in table.stdout


def test_gpus_per_machine_below_one_is_one_line_exit_2():
    r = runner.invoke(app, ["plan", "--gpus", "RTX 4090", "--gpus-per-machine", "0"])
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: --gpus-per-machine: expected >= 1, found 0"
