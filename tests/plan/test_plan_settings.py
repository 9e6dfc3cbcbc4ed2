"""plan searches engine settings per card, says what binds and over what range (issue 12)."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.plan.api import make_plan
from ttsperf.plan.steptime import MODE_FLAGS

runner = CliRunner()
FEW = ["--requests", "200"]


def _cli(*args: str, columns: int | None = None) -> subprocess.CompletedProcess:
    """The real console script's process, so the width is what a terminal or pipe gives."""
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "ttsperf", *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_json_rows_carry_settings_binding_and_range_and_the_recommendation_names_them():
    r = runner.invoke(
        app, ["plan", "--scenario", "realtime", "--streams", "100", "--gpus", "T4,RTX 3090", *FEW, "--json"]
    )
    assert r.exit_code == 0, r.output
    sc = json.loads(r.stdout)["scenarios"][0]
    for row in sc["rows"]:
        st = row["settings"]
        assert isinstance(st["serve_flags"], str) and st["serve_flags"].startswith("ttsperf serve ")
        assert f"--dtype {st['dtype']}" in st["serve_flags"]
        assert f"--first-chunk-steps {st['first_chunk_steps']}" in st["serve_flags"]
        assert st["mode"] in MODE_FLAGS
        assert MODE_FLAGS[st["mode"]] in st["serve_flags"]
        assert row["binding"] in ("ttfa", "underrun", "e2e", "rtf", "host", "memory", "max batch")
        assert row["binding_how"]
        low, high = row["max_streams_range"]
        assert low <= row["max_streams"] <= high  # the central overhead lies inside its range
    rec = sc["recommended"]
    best = next(r for r in sc["rows"] if r["gpu"] == rec["gpu"])
    assert rec["gpus_needed"] == best["gpus_needed"] and rec["settings"] == best["settings"]
    assert rec["measured"] is False
    text = sc["recommendation"]
    assert rec["settings"]["mode"] in text and rec["settings"]["serve_flags"] in text
    assert f"bound by {rec['binding']}" in text
    assert "projected, not measured on this card" in text and "ttsperf profile" in text
    lo, hi = rec["max_streams_range"]
    assert f"{rec['max_streams']} streams per GPU ({lo}-{hi} over the overhead's sourced range" in text
    assert rec["max_streams"] == best["max_streams"] and rec["usd_per_hour"] == best["usd_per_hour"]
    # listeners: bench's users (think 0 s), started over one cycle: at least their 8 s of audio
    cycle = max(8, math.ceil(best["p50_s"]))
    load = f"--users {best['max_streams']} --ramp-up {cycle}s --requests 400"
    # on the plan's own requests: bench's zh-8s texts
    check = f"ttsperf bench URL --adapter openai --stream --text-set zh-8s {load} --slo {sc['slo']['spec']}"
    assert f"`{check}`" in text


@pytest.mark.slow
def test_cpu_profile_keeps_its_dtype_its_row_apart_and_takes_a_price(profile_file):
    cpu = profile_file(
        device="AMD EPYC 2-core", kind="cpu", t_fixed=0.07, bw_eff=10e9, memory_bytes=8 * 2**30, dtype="fp32"
    )
    plan = make_plan(
        profile=[str(cpu)],
        scenario="realtime",
        gpus="RTX 3090",
        requests=200,
        price=["AMD EPYC 2-core (profiled)=0.1"],
    )
    assert plan.inputs.workload["dtype"] == "fp16"  # the GPUs: not the CPU profile's fp32
    sc = plan.scenarios[0]
    gpu = next(r for r in sc.rows if r.gpu == "RTX 3090")
    cpu_row = next(r for r in sc.rows if r.device == "other")
    assert gpu.settings.dtype == "fp16" and cpu_row.settings.dtype == "fp32"
    assert cpu_row.gpu == "AMD EPYC 2-core (profiled)" and cpu_row.usd_per_gpu_hour == 0.1
    assert "--device cpu" in cpu_row.settings.serve_flags
    assert sc.recommended is not None and sc.recommended.gpu == "RTX 3090"
    # the table shows it apart, under its own heading
    r = runner.invoke(
        app, ["plan", "--profile", str(cpu), "--scenario", "realtime", "--gpus", "RTX 3090", *FEW]
    )
    assert r.exit_code == 0, r.output
    head, _, apart = r.stdout.partition("profiled devices that are not GPUs")
    assert "AMD EPYC" in apart and "AMD EPYC" not in head.split("SLO", 1)[1].split("setting =", 1)[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "load",
    [
        ["--scenario", "realtime"],
        ["--scenario", "offline"],  # req/s ranges are wider than stream counts
        ["--scenario", "offline", "--rate", "5000"],  # three-digit GPU counts beside three-digit rates
        ["--scenario", "realtime", "--streams", "5000"],
        [],  # all three scenarios, as `ttsperf plan` prints by default
    ],
    ids=["realtime", "offline", "offline-5000rps", "realtime-5000", "all"],
)
def test_plan_at_80_columns_cuts_nothing_and_names_every_card_in_full(load):
    r = _cli("plan", *load, *FEW, columns=80)
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    lines = r.stdout.splitlines()
    for sc in json.loads(_cli("plan", *load, *FEW, "--json").stdout)["scenarios"]:
        rows = [row for row in sc["rows"] if row["device"] == "gpu"]
        for row in rows:
            assert any(line.startswith(row["gpu"] + " ") for line in lines), row["gpu"]
        # what binds is always on screen: once above the table when every card shares it, else a column
        title = next(i for i, line in enumerate(lines) if line.startswith(sc["scenario"] + ":"))
        block = "\n".join(lines[title : title + 4])
        bindings = {row["binding"] for row in rows}
        if len(bindings) == 1:
            assert f"every card is bound by {bindings.pop()}" in block
        else:
            assert "binds" in block and all(any(b in line for line in lines) for b in bindings)


@pytest.mark.slow
def test_wide_table_keeps_latencies_and_piped_output_is_never_cut():
    r = _cli("plan", "--scenario", "realtime", "--gpus", "A100 40GB PCIe,H100 SXM", *FEW, "--wide")
    assert r.returncode == 0, r.stderr
    assert "TTFA" in r.stdout and "serve --ray replicas" in r.stdout and "…" not in r.stdout


HELP_EXAMPLE = ["--gpus", "RTX 3080", "--audio-seconds", "8", "--memory-at", "4", "--scenario", "offline"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        HELP_EXAMPLE,  # plan --help's examples, as printed there (issue 25 item 4)
        [*HELP_EXAMPLE, "--wide"],
        ["--scenario", "realtime", "--streams", "200", "--gpus", "T4,RTX 4090,A100 40GB PCIe", *FEW],
        ["--scenario", "realtime", "--streams", "5000", "--gpus", "L4,H100 SXM",
         "--gpus-per-machine", "8", *FEW],
        ["--scenario", "realtime", "--step-overhead", "3ms", *FEW],
        ["--wide", *FEW],  # every card, all three scenarios: --wide fits 80 columns too
        ["--list-prices"],
    ],
    ids=["help-memory-at", "help-memory-at-wide", "help-realtime", "help-5000", "help-what-if", "wide-all",
         "list-prices"],
)  # fmt: skip
def test_help_examples_and_wide_are_whole_at_80_columns(args):
    r = _cli("plan", *args, columns=80)
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80


@pytest.mark.slow
def test_help_example_shows_whole_memory_figures_and_wide_the_batch_that_applies():
    r = _cli("plan", *HELP_EXAMPLE, "--wide", *FEW, columns=80)
    plan = json.loads(_cli("plan", *HELP_EXAMPLE, *FEW, "--json").stdout)
    row = plan["scenarios"][0]["rows"][0]
    memory = row["memory_bytes"]
    line = next(x for x in r.stdout.splitlines() if x.startswith("RTX 3080 ") and "yes" in x)
    assert f"{memory['total'] / 2**30:.3f}" in line and f"{memory['card'] / 2**30:.3f}" in line
    # the compact table's row carries the setting ("graphs c24"), the details table's does not
    details = [
        x.split() for x in r.stdout.splitlines() if x.startswith("RTX 3080 ") and not re.search(r" c\d+ ", x)
    ]
    # the setting's batch: memory's (227 of serve's slots for 8 s) or a mode's cap, as the wide table shows
    assert row["settings"]["max_batch"] <= row["max_batch"]
    assert details[0][2] == str(row["settings"]["max_batch"])
    header = next(x for x in r.stdout.splitlines() if x.startswith("GPU ") and "batch" in x)
    assert header.rstrip().endswith("hour")  # no unlabelled column after the last


@pytest.mark.slow
def test_the_readme_plan_example_prints_what_the_readme_shows():
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ COLUMNS=80 ttsperf plan ", 1)[1].split("```", 1)[0]
    command, *shown = block.splitlines()
    r = _cli("plan", *shlex.split(command), columns=80)
    assert r.returncode == 0, r.stderr
    printed = [line.rstrip() for line in r.stdout.splitlines()]
    for line in shown:
        assert line.rstrip() in printed, line


@pytest.mark.parametrize(
    ("flags", "text_set", "source"),
    [
        ({}, "zh-8s", "the guide's 8 s utterances as bench's zh-8s texts"),
        ({"text_set": "mixed"}, "mixed", "bench's mixed texts (--text-set)"),
        ({"audio_seconds": 3.0}, None, None),
    ],
)
def test_the_plan_says_which_texts_it_simulated_and_sources_only_the_default_to_the_guide(
    flags, text_set, source
):
    plan = make_plan(scenario="realtime", gpus="T4", requests=200, **flags)
    w, defaults = plan.inputs.workload, plan.inputs.defaults
    assert w.get("text_set") == text_set
    if text_set is None:
        assert w["requests"] == "--audio-seconds" and "text_set" not in defaults
        assert defaults["audio_seconds"].value == 3.0
    else:
        assert w["requests"] == f"--text-set {text_set}"
        assert defaults["text_set"].value == text_set and defaults["text_set"].source.startswith(source)
        assert ("guide" in defaults["text_set"].source) == (text_set == "zh-8s")
