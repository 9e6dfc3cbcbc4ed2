"""The first measured card (issue 34): ttsperf's H200 profile, put together from the card's own
measurements (scripts/build_card_h200.py), planned for the catalog's "H200 SXM", and its
predictions of the H200 runs it was measured beside (tests/fixtures/h200-engine-split: bench's
run.json of docs/measurements/h200-2026-12-04-engine-split, trimmed to what --like reads).

On that card, plan's own check failed at 485 listeners and the card held about 150 (TTFA p99 325 ms
at 150, 1.51 s at 300). Before this profile plan promised 485 and predicted a TTFA p99 of 0.1 s at
300 listeners."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from ttsperf.plan.api import make_plan
from ttsperf.plan.predict import predict
from ttsperf.profile.schema import shipped_card_profiles

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests/fixtures/h200-engine-split"


def test_the_shipped_profile_is_what_the_builder_makes_of_the_kept_measurements():
    spec = importlib.util.spec_from_file_location("build_card_h200", ROOT / "scripts/build_card_h200.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    shipped = json.loads((ROOT / "src/ttsperf/data/card-h200-sxm.json").read_text())
    assert shipped == json.loads(json.dumps(builder.build()))
    [(where, profile)] = shipped_card_profiles()
    assert "card-h200-sxm.json" in where and profile.runtime["cuda_graphs"]


def test_plan_plans_the_h200_from_its_measurement_and_no_longer_promises_485():
    plan = make_plan(gpus="H200 SXM,H100 SXM", scenario="realtime", streams=100)
    rows = {r.gpu: r for r in plan.scenarios[0].rows}
    h200, h100 = rows["H200 SXM"], rows["H100 SXM"]
    assert "card-h200-sxm.json" in h200.basis["step.prefill"].how
    assert "card-h200-sxm.json" not in h100.basis["step.prefill"].how  # another card stays projected
    assert h200.settings.mode == "cuda-graphs"
    # the card held ~150 listeners at this SLO (325 ms at 150, 1.51 s at 300)
    assert 80 <= h200.max_streams <= 200
    assert h200.binding == "host"


def test_eager_is_still_projected_the_card_was_measured_in_cuda_graphs():
    p = predict(gpus="H200 SXM", mode="eager", streams=50, requests=100)
    assert not p.profiled and "projected" in p.basis


@pytest.mark.parametrize(
    ("run", "audio_s_per_s", "ttfa_p50_s", "ttfa_p99_s"),
    [  # measured on the card (docs/measurements/h200-2026-12-04-engine-split/*-bench.txt)
        ("warm-150", 136.97, 0.213, 0.325),
        ("warm-300", 224.19, 0.729, 1.507),
        ("warm-600", 285.73, 4.507, 7.683),
    ],
)
def test_the_h200_runs_are_predicted_from_the_card(tmp_path, run, audio_s_per_s, ttfa_p50_s, ttfa_p99_s):
    path = tmp_path / "run.json"
    path.write_bytes(gzip.decompress((RUNS / f"{run}.json.gz").read_bytes()))
    p = predict(gpus="H200 SXM", like=str(path), mode="cuda-graphs", dtype="fp16", max_batch=256)
    assert p.profiled and "card-h200-sxm.json" in p.basis
    got = p.prediction
    # what the fixture says was measured is what the test compares with
    point = json.loads(path.read_text())["points"][0]
    assert point["audio_seconds_per_s"] == pytest.approx(audio_s_per_s, rel=1e-3)
    assert point["ttfa_s"]["p99"] == pytest.approx(ttfa_p99_s, rel=1e-2)
    # prefill, the step, the audio call and the engine's own host work, serially on one core, and
    # bench's run as it ran: its 2 x listeners requests, then no more (the last ones drain a
    # thinning batch): issue 34's bounds, 15% on throughput and 30% on TTFA p50 (the projection
    # before the card: 0.1 s against 1.5 s at 300; while the listeners never stopped, 183 audio s/s
    # against 224)
    assert got.audio_seconds_per_s == pytest.approx(audio_s_per_s, rel=0.15)
    assert got.ttfa_p50_s == pytest.approx(ttfa_p50_s, rel=0.3)
    assert got.ttfa_p99_s == pytest.approx(ttfa_p99_s, rel=0.4)


def test_the_card_measured_an_earlier_engine_and_its_row_shows_both():
    """Issue 34 item 3: the engine changed after the card's runs (prefill without synchronizes),
    so its row keeps the measurement and says what changed, with today's projection beside it."""
    from ttsperf.revisions import CHANGES, ENGINE_REVISION, changed_since

    [(_, profile)] = shipped_card_profiles()
    assert profile.engine_revision == 1 < ENGINE_REVISION
    assert changed_since(1) == [CHANGES[r] for r in range(2, ENGINE_REVISION + 1)]
    assert changed_since(ENGINE_REVISION) == [] and changed_since(None) == []
    plan = make_plan(gpus="H200 SXM,H100 SXM", scenario="realtime", streams=100)
    rows = {r.gpu: r for r in plan.scenarios[0].rows}
    h200, h100 = rows["H200 SXM"], rows["H100 SXM"]
    assert len(plan.scenarios[0].rows) == 2  # the projection is said in the row, not a row of its own
    assert CHANGES[ENGINE_REVISION] in h200.note and "Projected for today's engine" in h200.note
    c, low, high = h200.projected_now
    assert low <= c <= high and c != h200.max_streams  # a projection, not the measurement again
    assert "card-h200-sxm.json" in h200.basis["step.prefill"].how  # the row itself stays measured
    assert h100.projected_now is None and "engine" not in h100.note


def test_a_profile_of_todays_engine_is_planned_as_measured_alone(tmp_path):
    from ttsperf.revisions import ENGINE_REVISION

    data = json.loads((ROOT / "src/ttsperf/data/card-h200-sxm.json").read_text())
    data["engine_revision"] = ENGINE_REVISION
    path = tmp_path / "h200-today.json"
    path.write_text(json.dumps(data))
    row = (
        make_plan(profile=[str(path)], gpus="H200 SXM", scenario="realtime", streams=100).scenarios[0].rows[0]
    )
    assert str(path) in row.basis["step.prefill"].how
    assert row.projected_now is None and "earlier engine" not in row.note


FIRST_TREE = ROOT / "tests/fixtures/h200-2026-12-04"  # the runs issue 34 names: tree 3dd0b04
SLO = {"ttfa_p99_s": 0.3, "underrun_p99_s": 0.1}  # what they were judged on


def _met(ttfa_p99_s: float, underrun_p99_s: float) -> bool:
    return ttfa_p99_s <= SLO["ttfa_p99_s"] and underrun_p99_s <= SLO["underrun_p99_s"]


@pytest.mark.parametrize(
    "run", ["users-100", "users-200", "users-300-warm", "users-485-warm", "users-485-cold"]
)
def test_the_runs_issue_34_names_are_predicted_with_their_verdicts(tmp_path, run):
    """Each run of ../shared/measurements/h200-2026-12-04 with the server's flags as a user gives
    them (the runs predate bench's server block; serve's queue was 64 then): the warm ones within
    15% on throughput and 30% on TTFA p50, and the SLO verdict agrees (met at 100 listeners,
    failed at 200 and above). The cold run (graphs captured inside its requests) is predicted to
    fail, as it did; the simulation has no capture on first use (docs/PLANNING.md)."""
    path = tmp_path / "run.json"
    path.write_bytes(gzip.decompress((FIRST_TREE / f"{run}.json.gz").read_bytes()))
    point = json.loads(path.read_text())["points"][0]
    got = predict(
        gpus="H200 SXM", like=str(path), mode="cuda-graphs", dtype="fp16", max_batch=256, max_queue=64
    ).prediction
    measured_met = _met(point["ttfa_s"]["p99"], point["underrun_s"]["p99"])
    assert measured_met == (run == "users-100")
    assert _met(got.ttfa_p99_s, got.underrun_p99_s) == measured_met
    if run.endswith("cold"):
        return
    assert got.audio_seconds_per_s == pytest.approx(point["audio_seconds_per_s"], rel=0.15)
    assert got.ttfa_p50_s == pytest.approx(point["ttfa_s"]["p50"], rel=0.3)
