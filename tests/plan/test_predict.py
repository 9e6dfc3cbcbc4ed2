"""`ttsperf plan --predict`: one device, one load -> what bench would report, with its basis."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.plan.memory import Workload
from ttsperf.plan.predict import predict
from ttsperf.plan.simulate import EngineModel, Load, simulate
from ttsperf.plan.steptime import DEFAULT_T_CHUNK_S, DEFAULT_T_REQUEST_S

runner = CliRunner()
KEYS = {"throughput_rps", "audio_seconds_per_s", "e2e_p50_s", "e2e_p99_s"}
KEYS |= {"ttfa_p50_s", "ttfa_p99_s", "mean_batch", "mean_step_s", "underrun_p99_s", "error_rate"}


def run(*args: str):
    return runner.invoke(app, ["plan", "--predict", *args])


def test_a_profiled_device_at_a_closed_loop_is_the_simulation_of_its_fitted_card(profile_file, tmp_path):
    prof = profile_file(device="NVIDIA GeForce RTX 4090", t_fixed=0.004)
    out = tmp_path / "prediction.json"
    r = run("--profile", str(prof), "--streams", "16", "--max-batch", "16", "--json", "-o", str(out))
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data == json.loads(out.read_text())
    assert data["schema"] == "ttsperf.prediction" and set(data["prediction"]) == KEYS
    assert data["device"] == "RTX 4090" and data["profiled"] is True and data["max_batch"] == 16
    assert data["load"] == {"kind": "closed loop", "value": 16}
    assert f"fitted to {prof}" in data["basis"]
    # the same numbers as simulating that card's fitted engine directly, under bench's protocol
    # (the streams start together after a drained warm-up; bench's window throughput)
    p = predict(profile=[str(prof)], streams=16, max_batch=16)
    from ttsperf.plan.cards import build_cards
    from ttsperf.plan.catalog import load_catalog
    from ttsperf.profile.schema import load_profile

    cards = build_cards(load_catalog(), [(str(prof), load_profile(prof))], "fp16")
    card = next(c for c in cards if c.profiled)
    from ttsperf.textsets import lengths

    engine = EngineModel.of(card.step, 16, Workload.mixed(lengths("zh-8s")))  # plan's default requests
    sim = simulate(engine, Load("streams", 16), n_requests=1000, cold_start=True)
    assert p.prediction.ttfa_p50_s == pytest.approx(sim.ttfa_p50, rel=1e-12)
    assert p.prediction.throughput_rps == pytest.approx(sim.window_rps, rel=1e-12)
    assert data["prediction"]["mean_batch"] == pytest.approx(sim.mean_batch)


def test_more_load_waits_longer_and_an_open_loop_is_poisson(profile_file):
    prof = str(profile_file(device="RTX 4090"))
    light = predict(profile=[prof], streams=4, max_batch=8).prediction
    heavy = predict(profile=[prof], streams=32, max_batch=8).prediction
    assert heavy.e2e_p50_s > 3 * light.e2e_p50_s and heavy.mean_batch == pytest.approx(8, rel=0.01)
    open_loop = predict(profile=[prof], rate=0.5, max_batch=8)
    assert open_loop.load == {"kind": "poisson", "value": 0.5}
    assert open_loop.prediction.throughput_rps == pytest.approx(0.5, rel=0.1)


def test_a_closed_loop_is_predicted_as_bench_runs_it(profile_file):
    """bench's N streams start together into an empty server: equal requests run in waves of N,
    and its req/s is the measured requests over [first sent, last answered]."""
    prof = str(profile_file(device="RTX 4090"))
    one_wave = predict(profile=[prof], streams=16, max_batch=16, requests=16, audio_seconds=8.0).prediction
    # all 16 alike but for the server's event loop, one request after another: taking them in
    # (the later ones join a few steps late) and handing their last chunks out
    loop = 16 * (DEFAULT_T_REQUEST_S + DEFAULT_T_CHUNK_S) + 3 * one_wave.mean_step_s
    assert 0 < one_wave.e2e_p99_s - one_wave.e2e_p50_s < loop
    assert one_wave.throughput_rps == pytest.approx(16 / one_wave.e2e_p99_s, rel=1e-3)
    assert one_wave.mean_batch == pytest.approx(16.0, rel=0.01)
    # 32 streams on 16 slots: the second wave waits for the first, the median between 1 and 2 waves
    two = predict(profile=[prof], streams=32, max_batch=16, requests=32, audio_seconds=8.0).prediction
    assert one_wave.e2e_p50_s < two.e2e_p50_s < 2.1 * one_wave.e2e_p50_s
    assert two.e2e_p99_s == pytest.approx(2 * one_wave.e2e_p99_s, rel=0.05)


def test_a_gpu_without_a_profile_answers_from_defaults_and_says_so():
    r = run("--gpus", "H100 SXM", "--streams", "64")
    assert r.exit_code == 0, r.output
    assert "H100 SXM, 64 streams" in r.output
    assert "projected from documented defaults for H100 SXM, not measured" in " ".join(r.output.split())
    assert "run `ttsperf profile` on that card" in " ".join(r.output.split())
    p = predict(gpus="H100 SXM", streams=64)
    assert p.profiled is False and p.max_batch > 64  # from the memory model


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "T4"], "--predict: expected one load, --streams N or --rate R, found neither"),
        (["--gpus", "T4", "--streams", "4", "--rate", "1"], "found both"),
        (["--gpus", "T4", "--streams", "0"], "--streams: expected a positive number of streams, found 0"),
        (["--gpus", "T4", "--rate", "-1"], "--rate: expected a positive request rate"),
        (["--streams", "4"], "--predict: expected the device, --profile FILE (measured) or --gpus NAME"),
        (["--gpus", "T4,L4", "--streams", "4"], "found 2 cards"),
        (["--gpus", "T4", "--streams", "4", "--max-batch", "0"], "--max-batch: expected >= 1, found 0"),
    ],
)
def test_bad_requests_are_one_line_errors(args, message):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split())


def test_a_missing_profile_is_named(tmp_path):
    r = run("--profile", str(tmp_path / "nope.json"), "--streams", "4")
    assert r.exit_code == 2 and "nope.json" in r.output


def test_a_tiny_profile_needs_the_servers_max_batch(profile_file, tmp_path):
    prof = profile_file(device="RTX 4090")
    d = json.loads(prof.read_text())
    d["model"]["config"] = "tiny"
    prof.write_text(json.dumps(d))
    r = run("--profile", str(prof), "--streams", "4")
    assert r.exit_code == 2 and "--max-batch: expected the server's max batch with a tiny profile" in r.output
    p = predict(profile=[str(prof)], streams=4, max_batch=4)  # a tiny profile calibrates its device here
    assert p.profiled and "(tiny, fp16, measured)" in p.basis


def test_flags_a_prediction_does_not_use_are_refused_by_name():
    r = run("--gpus", "T4", "--streams", "4", "--scenario", "realtime", "--price", "T4=0.3")
    assert r.exit_code == 2
    assert "--predict: --scenario, --price not used (one device, one load, no SLO or cost)" in r.output


def test_output_file_or_directory(tmp_path):
    r = run("--gpus", "T4", "--streams", "2", "-o", str(tmp_path) + "/")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "prediction.json").read_text())["device"] == "T4"
    r = run("--gpus", "T4", "--streams", "2", "-o", str(tmp_path / "missing" / "dir" / "p.json"))
    assert r.exit_code == 0 and (tmp_path / "missing" / "dir" / "p.json").exists()


def test_a_profile_predicts_at_its_own_dtype(profile_file):
    r = run("--profile", str(profile_file(device="RTX 4090")), "--streams", "4", "--dtype", "fp32")
    assert r.exit_code == 2 and "--dtype fp32: " in r.output and "measured in fp16" in r.output


def test_what_ifs_apply_to_a_card_from_defaults_and_are_named():
    base = predict(gpus="RTX 4090", streams=8)
    cut = predict(gpus="RTX 4090", streams=8, step_overhead="3ms", vocoder_overhead="1ms")
    assert cut.prediction.e2e_p50_s < base.prediction.e2e_p50_s / 2
    assert "--step-overhead 3ms (what-if)" in cut.basis and "--vocoder-overhead 1ms (what-if)" in cut.basis


def test_a_max_batch_beyond_the_profiled_batches_says_it_is_extrapolated(profile_file):
    prof = str(profile_file(device="RTX 4090"))  # batches 1, 4, 16, 64 measured
    inside = predict(profile=[prof], streams=8, max_batch=64)
    assert "extrapolated" not in inside.basis
    beyond = predict(profile=[prof], streams=8, max_batch=256)
    assert "batches above 64 extrapolated from the profile's largest" in beyond.basis
    assert "`ttsperf profile --batches ...,256` measures them" in beyond.basis


def test_a_card_without_a_profile_is_predicted_in_the_servers_mode_from_the_host_profile():
    """No quoted 10 ms: eager (serve's default) at the shipped host profile's eager step, or the
    mode --mode names; CUDA graphs cap the batch at the 256 rows they capture."""
    from ttsperf.plan.overhead import default_modes

    eager = predict(gpus="RTX 4090", streams=64, requests=200)
    assert (
        "eager (`ttsperf serve` without a mode flag), its fixed costs from the host profile shipped"
        in eager.basis
    )
    graphs = predict(gpus="RTX 4090", streams=64, requests=200, mode="cuda-graphs")
    assert "cuda-graphs (`ttsperf serve --cuda-graphs`)" in graphs.basis and graphs.max_batch == 256
    assert graphs.prediction.mean_step_s < eager.prediction.mean_step_s
    assert default_modes()["cuda-graphs"].t_fixed < default_modes()["eager"].t_fixed
    listeners = predict(gpus="RTX 4090", streams=64, requests=200, think_time=0.0)
    assert listeners.load == {"kind": "closed loop", "value": 64.0, "think_s": 0.0}
    assert listeners.prediction.throughput_rps < eager.prediction.throughput_rps  # they listen between
    # --users N: the same listeners, spelled as people count them
    users = predict(gpus="RTX 4090", users=64, requests=200)
    assert users.load == listeners.load and users.prediction == listeners.prediction
    thinking = predict(gpus="RTX 4090", users=64, think_time=2.0, requests=200)
    assert thinking.load["think_s"] == 2.0


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"gpus": "RTX 4090", "streams": 4, "mode": "turbo"}, "--mode turbo: expected one of eager, compile"),
        ({"gpus": "RTX 4090", "rate": 4.0, "think_time": 1.0}, "--think-time is a closed loop's listeners"),
        ({"gpus": "RTX 4090", "users": 4, "rate": 1.0}, "--users and --rate: expected one load"),
        ({"gpus": "RTX 4090", "users": 4, "streams": 8}, "--users and --streams: expected one load"),
        ({"gpus": "RTX 4090", "users": 0}, "--users: expected a positive number of users"),
        (
            {"gpus": "RTX 4090", "rate": 2.0, "ramp_up": 4.0},
            "--ramp-up 4s: expected seconds >= 0 with --streams",
        ),
        ({"gpus": "RTX 4090", "users": 4, "ramp_up": -1.0}, "--ramp-up -1s: expected seconds >= 0"),
        ({"gpus": "RTX 4090", "like": "run.json", "text_set": "zh"}, "--predict --like: --text-set not used"),
        ({"gpus": "RTX 4090", "streams": 2, "text_set": "zh", "audio_seconds": 3.0}, "--text-set zh and"),
        ({"gpus": "RTX 4090", "streams": 2, "text_set": "klingon"}, "--text-set: unknown set 'klingon'"),
    ],
)
def test_a_mode_or_think_time_that_cannot_apply_is_refused(kw, message):
    from ttsperf.errors import UserError

    with pytest.raises(UserError, match=message):
        predict(requests=100, **kw)


def test_a_profiled_device_keeps_its_own_mode(profile_file):
    from ttsperf.errors import UserError

    with pytest.raises(UserError, match="measured its own mode"):
        predict(profile=[str(profile_file(device="RTX 4090"))], streams=4, mode="compile")


def test_a_streamed_prediction_reports_underruns_and_they_grow_past_real_time(profile_file):
    # underruns bind realtime: a stream whose steps are slower than it plays stalls (1/46.875 s a
    # step is real time); a fast card's streams never stall
    fast = predict(profile=[str(profile_file(device="RTX 4090"))], streams=4, max_batch=8).prediction
    slow = predict(profile=[str(profile_file(device="RTX 4090", t_fixed=0.04))], streams=4, max_batch=8)
    assert fast.underrun_p99_s == 0.0
    # each 24-step chunk takes ~0.98 s to decode and plays 0.51 s: the worst stall is ~0.5 s
    assert slow.prediction.underrun_p99_s > 0.3
    shown = run(
        "--profile", str(profile_file(device="RTX 4090")), "--predict", "--streams", "4", "--max-batch", "8"
    )
    assert "underrun    P99 0.000 s" in shown.output


def test_the_plans_check_is_predicted_as_printed_ramp_and_all():
    """The realtime check of README's plan (82 users on an RTX 3090, graphs, 16-step first chunk):
    started at once, their first requests arrive as one wave and its first chunks queue behind
    each other, far over the 300 ms the plan met; started over one cycle (--ramp-up 8, what the
    check prints), TTFA P99 is back near the plan's steady state."""
    kw = dict(gpus="RTX 3090", mode="cuda-graphs", first_chunk_steps=16, users=82, requests=400)
    at_once, ramped = predict(**kw), predict(**kw, ramp_up=8.0)
    assert ramped.load == {"kind": "closed loop", "value": 82.0, "think_s": 0.0, "ramp_s": 8.0}
    assert at_once.prediction.ttfa_p50_s > 0.3 > ramped.prediction.ttfa_p99_s
    assert ramped.as_load().ramp_s == 8.0 and at_once.as_load().ramp_s == 0.0


def test_ramp_up_and_like_are_a_predictions_not_a_plans():
    from ttsperf.errors import UserError
    from ttsperf.plan.api import make_plan

    with pytest.raises(UserError, match="--ramp-up: a bench run's load, used with --predict only"):
        make_plan(scenario="realtime", gpus="T4", ramp_up=8.0, requests=100)
