"""ModelProfile contract, and how plan uses profiles: fitted on their own card, defaults elsewhere."""

from __future__ import annotations

import json

import pytest

from ttsperf.errors import UserError
from ttsperf.plan.api import make_plan
from ttsperf.profile.schema import ModelProfile, load_profile


def test_profile_round_trips_through_json(tmp_path, make_profile):
    p = make_profile()
    path = tmp_path / "p.json"
    path.write_text(json.dumps(p.dump()))
    back = load_profile(path)
    assert back == p
    raw = json.loads(path.read_text())
    assert raw["schema"] == "ttsperf.profile" and raw["version"] == 3
    assert raw["weights_bytes"]["kind"] == "measured" and raw["weights_bytes"]["how"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(version=4), r"field 'version': expected 1 or 2 or 3 .* found 4"),
        (lambda d: d.update(schema="other"), r"field 'schema': expected 'ttsperf.profile', found 'other'"),
        (
            lambda d: d["model"].update(name="cosyvoice"),
            r"field 'model.name': expected 'chattts', found 'cosyvoice'",
        ),
        (lambda d: d.pop("kv_bytes_per_token"), r"field 'kv_bytes_per_token': Field required"),
        (lambda d: d["steps"][0].update(batch=0), r"field 'steps.0.batch'"),
    ],
)
def test_bad_profiles_are_one_line_errors(tmp_path, change, message, make_profile):
    d = make_profile().dump()
    change(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match=message):
        load_profile(path)


def test_profile_not_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(UserError, match=r"x\.json: expected JSON, found a syntax error at line 1"):
        load_profile(path)


def _row(plan, gpu, scenario=0):
    return next(r for r in plan.scenarios[scenario].rows if r.gpu == gpu)


@pytest.mark.slow
def test_profile_calibrates_its_own_card_only(profile_file):
    prof = profile_file(device="RTX 4090", t_fixed=0.004)
    plan = make_plan(
        profile=[str(prof)], scenario="realtime", gpus="RTX 4090,RTX 3090", requests=200, mode="eager"
    )
    fitted, default = _row(plan, "RTX 4090"), _row(plan, "RTX 3090")
    assert "least-squares fit to 12 step times" in fitted.basis["step_ms"].how
    assert "4.00 ms" in fitted.basis["step_ms"].how  # t_fixed recovered
    assert "host profile shipped host-amd-epyc.json" in default.basis["step_ms"].how
    # a 4 ms overhead instead of the default 10 ms: more streams per GPU
    assert fitted.max_streams > default.max_streams
    assert "profiled cards fitted" in plan.inputs.calibration
    assert "measured in" in fitted.basis["memory.weights_bytes"].how  # bytes came from the profile


def test_every_input_is_tagged_measured_projected_or_sourced(profile_file):
    prof = profile_file(device="RTX 4090")
    plan = make_plan(profile=[str(prof)], scenario="offline", gpus="RTX 4090,RTX 3090", requests=100)
    fitted, default = _row(plan, "RTX 4090"), _row(plan, "RTX 3090")
    for key in (
        "memory.weights_bytes",
        "memory.kv_bytes_per_token",
        "memory.runtime_bytes",
        "step.t_fixed",
        "step.mbu",
        "step.prefill",
        "step.vocoder",
    ):
        assert fitted.basis[key].kind == "measured", key
    assert fitted.basis["step.mfu"].kind == "sourced"  # not identified by bandwidth-bound points
    assert default.basis["memory.weights_bytes"].kind == "measured"  # bytes hold on any card at this dtype
    assert default.basis["memory.runtime_bytes"].kind == "sourced"
    assert default.basis["step.t_fixed"].kind == "sourced"
    assert default.basis["step.vocoder"].kind == "projected"
    no_profile = make_plan(scenario="offline", gpus="RTX 3090", requests=100).scenarios[0].rows[0]
    assert no_profile.basis["memory.weights_bytes"].kind == "projected"
    assert no_profile.basis["usd_per_gpu_hour"].kind == "sourced"


def test_profile_own_estimates_are_shown_beside_the_fit(profile_file, tmp_path):
    prof = profile_file(device="RTX 4090", t_fixed=0.004)
    d = json.loads(prof.read_text())
    d["fixed_step_overhead_s"] = {"value": 0.0042, "unit": "s", "how": "intercept of its own fit"}
    prof.write_text(json.dumps(d))
    row = (
        make_plan(profile=[str(prof)], scenario="offline", gpus="RTX 4090", requests=100).scenarios[0].rows[0]
    )
    assert (
        "4.00 ms" in row.basis["step.t_fixed"].how
        and "own estimate: 4.20 ms" in row.basis["step.t_fixed"].how
    )


def test_profile_runtime_memory_is_fitted_to_cover_measured_peaks(profile_file):
    prof = profile_file(device="RTX 4090", runtime_extra=2e9)
    plan = make_plan(profile=[str(prof)], scenario="offline", gpus="RTX 4090,RTX 3090", requests=100)
    fitted, default = _row(plan, "RTX 4090"), _row(plan, "RTX 3090")
    assert fitted.memory_bytes["runtime"] == pytest.approx(2e9, rel=0.01)
    assert fitted.max_batch < default.max_batch  # 2 GB held outside the tensors leaves less room


def test_profile_of_a_card_outside_the_selection_adds_no_row(profile_file):
    prof = profile_file(device="NVIDIA GeForce RTX 4090")
    plan = make_plan(profile=[str(prof)], scenario="offline", gpus="T4", requests=100)
    assert [r.gpu for r in plan.scenarios[0].rows] == ["T4"]


def test_cpu_profile_gets_a_row_of_its_own(profile_file):
    prof = profile_file(
        device="AMD EPYC 2-core", kind="cpu", t_fixed=0.07, bw_eff=10e9, memory_bytes=8 * 2**30
    )
    plan = make_plan(profile=[str(prof)], scenario="offline", gpus="T4", requests=100)
    row = _row(plan, "AMD EPYC 2-core (profiled)")
    assert row.fits and row.usd_per_gpu_hour is None
    assert "no price" in row.note
    assert row.basis["memory"].kind == "measured"
    assert row.step_ms > 70  # at least the fitted fixed overhead


def test_cpu_profile_without_memory_is_an_error(profile_file):
    prof = profile_file(device="Some CPU", kind="cpu", memory_bytes=None)
    with pytest.raises(
        UserError, match=r"field 'device.memory_bytes': expected the device's memory, found null"
    ):
        make_plan(profile=[str(prof)], gpus="T4", requests=100)


def test_profile_with_one_step_time_cannot_be_fitted(profile_file, tmp_path):
    prof = profile_file()
    d = json.loads(prof.read_text())
    d["steps"] = d["steps"][:1]
    prof.write_text(json.dumps(d))
    with pytest.raises(UserError, match=rf"{prof}: field 'steps': expected at least 2 measured"):
        make_plan(profile=[str(prof)], gpus="RTX 4090", requests=100)


def test_fitted_rows_are_marked_in_the_table(profile_file):
    from typer.testing import CliRunner

    from ttsperf.cli.main import app

    prof = profile_file(device="NVIDIA GeForce RTX 4090")
    r = CliRunner().invoke(
        app,
        [
            "plan",
            "--profile",
            str(prof),
            "--gpus",
            "RTX 4090,T4",
            "--scenario",
            "offline",
            "--requests",
            "100",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "RTX 4090 (fit)" in r.output and "T4 (fit)" not in r.output


def test_profiles_with_different_dtypes_need_dtype(profile_file):
    a, b = profile_file(dtype="fp16"), profile_file(dtype="fp32", device="RTX 3090")
    with pytest.raises(UserError, match=r"profiles use different dtypes \(fp16, fp32\); pass --dtype"):
        make_plan(profile=[str(a), str(b)], gpus="T4", requests=100)


def test_model_profile_schema_is_strict(make_profile):
    d = make_profile().dump()
    d["unexpected"] = 1
    with pytest.raises(Exception, match="unexpected"):
        ModelProfile.model_validate(d)


@pytest.mark.parametrize(
    ("device", "card"),
    [
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4090 D", "RTX 4090 D"),  # the China-only cut, not the RTX 4090
        ("NVIDIA A800-SXM4-80GB", "A800 80GB SXM"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
        ("Tesla T4", "T4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA H200", "H200 SXM"),  # torch names the SXM part plainly; the catalog's one H200
        ("NVIDIA H20", "H20"),  # not H200: model numbers must match whole
        ("NVIDIA H200 NVL", None),  # a form the catalog lacks: no guess
        ("NVIDIA H100 80GB HBM3", None),  # PCIe or SXM? no guess
        ("AMD EPYC 7B13", None),
    ],
)
def test_profiled_device_names_match_catalog_cards(device, card):
    from ttsperf.plan.cards import match_device
    from ttsperf.plan.catalog import load_gpus

    assert match_device(device, list(load_gpus()[1])) == card


# docs/reference/chattts.md [meas]: official package, fp32, 2 CPU threads, LlamaModel step (s)
CPU_STEPS = [
    (1, 64, 0.069),
    (1, 512, 0.073),
    (1, 1024, 0.082),
    (4, 64, 0.103),
    (4, 512, 0.118),
    (4, 1024, 0.154),
    (16, 64, 0.124),
    (16, 512, 0.256),
    (16, 1024, 0.742),
]


def test_profiled_card_returns_the_measured_step_times(make_profile, tmp_path):
    from ttsperf.plan.cards import build_cards
    from ttsperf.plan.catalog import load_catalog
    from ttsperf.plan.memory import Workload
    from ttsperf.plan.simulate import EngineModel, Load, simulate
    from ttsperf.profile.schema import StepPoint

    prof = make_profile(device="2-core x86-64 CPU", kind="cpu", dtype="fp32", memory_bytes=8 * 2**30)
    prof.steps = [
        StepPoint(batch=b, context=c, seconds=prof.weights_bytes.model_copy(update={"value": t, "unit": "s"}))
        for b, c, t in CPU_STEPS
    ]
    card = build_cards(load_catalog(only=["T4"]), [("cpu.json", prof)], "fp32")[-1]
    assert card.name == "2-core x86-64 CPU (profiled)"
    for b, c, t in CPU_STEPS:  # the roofline alone misses these by up to 60%; the correction keeps them
        assert float(card.step.step(b, b * c)) == pytest.approx(t, rel=1e-9)
    # between measured points the factor interpolates, so a batch-4 step lies between its neighbours
    assert 0.103 < float(card.step.step(4, 4 * 200)) < 0.118
    # one stream, 2 s of audio: the simulated E2E is the sum of the corrected steps (+ prefill, vocoder)
    w = Workload(audio_seconds=2.0, prompt_tokens=64)
    r = simulate(EngineModel(card.step, 4, w), Load("streams", 1), n_requests=10)
    steps = sum(float(card.step.step(1, 64 + j)) for j in range(w.steps - 1))  # prefill made the first
    assert r.e2e_p50 - steps == pytest.approx(card.step.prefill(64) + 2.0 * 0.01, rel=0.02)


def test_measured_chunk_call_is_the_vocoder_cost_per_row(make_profile):
    from ttsperf.plan.cards import build_cards
    from ttsperf.plan.catalog import load_catalog
    from ttsperf.profile.schema import Measured

    prof = make_profile(device="RTX 4090")
    prof.vocoder_chunk_seconds = Measured(value=0.004, unit="s", how="median of 50 chunk calls")
    card = build_cards(load_catalog(only=["RTX 4090"]), [("p.json", prof)], "fp16")[0]
    assert card.step.vocoder(0.512) == 0.004 and card.step.vocoder(0.1) == 0.004
    assert "one chunk's call measured in p.json" in card.step.basis["vocoder"].how
    # a call over 8 rows' chunks, with only one row's call measured: 8 of them (an upper bound)
    assert card.step.vocoder(8 * 0.512, rows=8) == pytest.approx(0.032)


def test_a_batched_prefill_point_counts_all_its_tokens(make_profile):
    from ttsperf.plan.cards import build_cards
    from ttsperf.plan.catalog import load_catalog
    from ttsperf.profile.schema import Measured, PrefillPoint

    prof = make_profile(device="RTX 4090")
    prof.prefill = [
        PrefillPoint(prompt_tokens=64, seconds=Measured(value=0.002, unit="s", how="one")),
        PrefillPoint(prompt_tokens=64, rows=16, seconds=Measured(value=0.010, unit="s", how="16 at once")),
    ]
    step = build_cards(load_catalog(only=["RTX 4090"]), [("p.json", prof)], "fp16")[0].step
    assert step.prefill(64, 16) == pytest.approx(0.010)  # 16 joining at once: the batched point
    assert step.prefill(64, 8) == pytest.approx(0.002 + 0.008 * (8 * 64 - 64) / (16 * 64 - 64))


def test_measured_batched_audio_calls_are_interpolated_in_rows(make_profile):
    from ttsperf.plan.cards import build_cards
    from ttsperf.plan.catalog import load_catalog
    from ttsperf.profile.schema import AudioCallPoint, Measured

    prof = make_profile(device="RTX 4090")
    prof.vocoder_chunk_seconds = Measured(value=0.004, unit="s", how="one chunk")
    prof.audio_calls = [
        AudioCallPoint(rows=r, seconds=Measured(value=t, unit="s", how="median"))
        for r, t in ((1, 0.004), (16, 0.010), (64, 0.030))
    ]
    card = build_cards(load_catalog(only=["RTX 4090"]), [("p.json", prof)], "fp16")[0]
    step = card.step
    assert step.vocoder(0.5, rows=1) == pytest.approx(0.004)  # the measured points themselves
    assert step.vocoder(0.5, rows=16) == pytest.approx(0.010)
    assert step.vocoder(0.5, rows=40) == pytest.approx(0.020)  # between: linear in rows
    assert step.vocoder(0.5, rows=128) == pytest.approx(0.030 + 64 * 0.020 / 48)  # beyond: last slope
    assert "batched call measured in p.json at 1, 16, 64 rows" in step.basis["vocoder"].how


def test_profile_host_cost_per_row_replaces_the_default(profile_file):
    prof = profile_file(device="RTX 4090", t_fixed=0.004)
    d = json.loads(prof.read_text())
    d["host_per_row_step_s"] = {"value": 2.5e-6, "unit": "s", "how": "engine step minus bare step"}
    d["host_per_step_s"] = {"value": 4e-4, "unit": "s", "how": "intercept of the same line"}
    prof.write_text(json.dumps(d))
    plan = make_plan(profile=[str(prof)], scenario="offline", gpus="RTX 4090,RTX 3090", requests=100)
    fitted, default = _row(plan, "RTX 4090"), _row(plan, "RTX 3090")
    assert fitted.basis["step.t_row"].kind == "measured"
    assert fitted.basis["step.t_row"].how.startswith("2.5 us, measured in")
    assert default.basis["step.t_row"].kind == "sourced"
    assert default.basis["step.t_row"].how.startswith("7 us, measured: host share")
    assert fitted.basis["step.t_host"].how.startswith("400 us per step, measured in")
    assert default.basis["step.t_host"].how.startswith("0.37 ms per step, measured: the engine's host work")
    assert default.basis["step.t_chunk"].how.startswith("0.3 ms per chunk, beside the engine")
    assert default.basis["step.t_request"].how.startswith("1.1 ms per request taken in, beside the engine")


def test_cpu_profile_without_a_bandwidth_term_plans_beside_cards_in_processes(profile_file, monkeypatch):
    # a CPU whose step time does not grow with context fits no bandwidth term (inv_bw 0); the
    # parallel plan orders card groups by bandwidth and once divided by it (make demo's crash)
    prof = profile_file(
        device="AMD EPYC 2-core", kind="cpu", t_fixed=0.07, bw_eff=1e30, memory_bytes=8 * 2**30
    )
    monkeypatch.setattr("ttsperf.plan.api._workers", lambda groups: 2)
    plan = make_plan(
        profile=[str(prof)], scenario="offline", gpus="T4,L4,A10,L40S,A100 40GB SXM,H100 SXM", requests=100
    )
    rows = {r.gpu: r for r in plan.scenarios[0].rows}
    assert len(rows) == 7 and rows["AMD EPYC 2-core (profiled)"].fits


def test_a_cpu_profile_of_another_model_is_not_planned_in_modes_it_cannot_run(tmp_path, make_profile):
    # the "AMD EPYC graphs fp32 c16 259 (31-248)": a tiny profile calibrates nothing for
    # chattts, and the CPU row used to be planned from zero step times in every mode, CUDA graphs too
    p = make_profile(device="AMD EPYC 2-core", kind="cpu", dtype="fp32", memory_bytes=8 * 2**30)
    p.model.config = "tiny"
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(p.dump()), encoding="utf-8")
    plan = make_plan(profile=[str(path)], scenario="realtime", gpus="T4", dtype="fp32", requests=100)
    row = _row(plan, "AMD EPYC 2-core (profiled)")
    assert not row.fits and row.settings is None and row.max_streams is None
    assert "is tiny/fp32, plan is chattts/fp32: not used" in row.note


def test_a_plan_in_processes_is_the_plan_in_one_and_says_how_far_it_is(monkeypatch):
    """The card groups are shared out among processes (this one included, from the cheap end):
    every card's row is the same as planned in one process, and progress counts the groups done
    as it goes."""
    gpus = "T4,L4,A10,A10G,L40S,RTX 3090,RTX 4090,A100 40GB SXM"
    kw = dict(scenario="realtime", gpus=gpus, requests=250)
    monkeypatch.setattr("ttsperf.plan.api._workers", lambda groups: 2)
    said: list[str] = []
    parallel = make_plan(**kw, progress=said.append)
    monkeypatch.setattr("ttsperf.plan.api._workers", lambda groups: 1)
    serial = make_plan(**kw)
    rows = [[r.model_dump() for r in p.scenarios[0].rows] for p in (parallel, serial)]
    assert rows[0] == rows[1]
    counts = [int(m.split("(")[-1].split("/")[0]) for m in said]
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] < 8
    assert all(m.endswith("/8 done, 2 processes)") for m in said)


def test_an_error_planning_in_this_process_stops_the_others_and_is_raised(monkeypatch):
    def boom(group, work, ctx):
        raise RuntimeError(f"planning {group[0].name} failed")

    monkeypatch.setattr("ttsperf.plan.api._workers", lambda groups: 2)
    monkeypatch.setattr("ttsperf.plan.api._group_rows", boom)  # this process's only
    with pytest.raises(RuntimeError, match="planning .* failed"):
        make_plan(scenario="realtime", gpus="T4,L4,A10,A10G,L40S,RTX 3090,RTX 4090", requests=250)
