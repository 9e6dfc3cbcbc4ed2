"""`plan --predict --like RUN` predicts the server that ran: the settings bench recorded from its
/healthz stand in for what the user did not set, and a user's own setting wins."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ttsperf.bench.api import BenchSettings, run_bench
from ttsperf.bench.results import ServerSettings, write_outputs
from ttsperf.cli.main import app
from ttsperf.plan.predict import predict
from ttsperf.plan.settings import PlanSettings

CARD = "RTX 4090"
# what bench writes for `ttsperf serve --cuda-graphs --dtype fp16 --max-batch 256` on a GPU
GPU_SERVER = ServerSettings(
    source="http://10.0.0.7:8080/healthz", version="0.1.0", status="ok", mode="cuda-graphs", dtype="fp16",
    max_batch=256, max_queue=256, first_chunk_steps=16, chunk_steps=24, device="cuda:0", model="chattts",
    weights="assets",
)  # fmt: skip
LINE = (
    "from the run: cuda-graphs, fp16, max batch 256, queue 256, first chunk 16 steps "
    "(/healthz, ttsperf 0.1.0, chattts on cuda:0)"
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A real bench run against the mock server (another TTS server: no settings), and the same
    file as a run of a ttsperf server on a GPU writes it, and as a run from before the block."""
    cmd = [sys.executable, "-m", "ttsperf.bench.mock_server", "--port", "0", "--slots", "2",
           "--service-time", "0.02"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        run = run_bench(BenchSettings(urls=[line.split()[-1]], concurrency=[4], requests=12, gpu=False))
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    tmp = tmp_path_factory.mktemp("runs")
    write_outputs(run, tmp / "mock")
    data = json.loads((tmp / "mock" / "run.json").read_text(encoding="utf-8"))
    assert data["server"] is None and "not a ttsperf server" in data["server_note"]
    paths = {"mock": tmp / "mock" / "run.json"}
    for name, change in (("gpu", {"server": GPU_SERVER.model_dump(), "server_note": ""}), ("old", None)):
        d = dict(data)
        if change is None:
            del d["server"], d["server_note"]
        else:
            d.update(change)
        paths[name] = tmp / f"{name}.json"
        paths[name].write_text(json.dumps(d), encoding="utf-8")
    return {k: str(v) for k, v in paths.items()}


def test_the_run_s_server_settings_are_predicted_as_if_typed_and_said(runs):
    p = predict(gpus=CARD, like=runs["gpu"])
    assert p.max_batch == 256 and p.workload["first_chunk_steps"] == 16
    assert "cuda-graphs (`ttsperf serve --cuda-graphs`)" in p.basis
    assert p.server == {
        "source": GPU_SERVER.source,
        "taken": {
            "mode": "cuda-graphs",
            "dtype": "fp16",
            "max_batch": 256,
            "max_queue": 256,
            "first_chunk_steps": 16,
        },
        "overridden": {},
        "line": LINE,
    }
    # exactly the prediction of the flags a user typed by hand before bench recorded them
    typed = predict(gpus=CARD, like=runs["mock"], mode="cuda-graphs", dtype="fp16", max_batch=256,
                    max_queue=256, first_chunk_steps=16)  # fmt: skip
    assert typed.server is None
    assert typed.prediction == p.prediction and typed.basis == p.basis


def test_a_setting_the_user_gave_wins_and_is_said(runs, monkeypatch):
    p = predict(gpus=CARD, like=runs["gpu"], mode="eager", max_batch=64)
    assert p.max_batch == 64 and "eager (`ttsperf serve` without a mode flag)" in p.basis
    assert p.server["taken"] == {"dtype": "fp16", "max_queue": 256, "first_chunk_steps": 16}
    assert p.server["overridden"] == {"mode": "cuda-graphs", "max_batch": 256}
    assert p.server["line"] == (
        "from the run: fp16, queue 256, first chunk 16 steps (/healthz, ttsperf 0.1.0, chattts on cuda:0); "
        "--mode eager as given (the run's: cuda-graphs); --max-batch 64 as given (the run's: max batch 256)"
    )
    # a variable (or a settings file) is the user's too: resolve() records it, plan's defaults are not
    monkeypatch.setenv("TTSPERF_PLAN_DTYPE", "bf16")
    settings, sources = PlanSettings.resolve({"gpus": CARD, "like": runs["gpu"]})
    assert sources["dtype"] == "env" and sources["mode"] == "default"
    p = predict(settings)
    assert p.server["overridden"] == {"dtype": "fp16"} and p.server["taken"]["mode"] == "cuda-graphs"


def test_a_profile_keeps_its_own_mode_and_dtype(runs, profile_file):
    prof = str(profile_file(device=CARD, dtype="fp32"))
    p = predict(profile=[prof], like=runs["gpu"])  # fp16 and cuda-graphs would be refused for it
    assert p.profiled and p.max_batch == 256
    assert p.server["taken"] == {"max_batch": 256, "max_queue": 256, "first_chunk_steps": 16}
    assert p.server["line"].endswith("; mode and dtype the profile's (the run's: cuda-graphs, fp16)")


def test_a_run_of_another_server_or_an_older_run_predicts_as_before(runs):
    mock, old = predict(gpus=CARD, like=runs["mock"]), predict(gpus=CARD, like=runs["old"])
    assert mock.server is None and old.server is None
    assert mock.prediction == old.prediction and "eager" in old.basis and old.max_batch != 256


def test_the_command_prints_the_settings_it_took_from_the_run(runs):
    res = CliRunner().invoke(app, ["plan", "--predict", "--gpus", CARD, "--like", runs["gpu"],
                                   "--max-batch", "64"], env={"COLUMNS": "200"})  # fmt: skip
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stdout.splitlines() if ln.lstrip().startswith("server "))
    assert line.split(None, 1)[1].startswith("from the run: cuda-graphs, fp16, queue 256, first chunk 16")
    assert "--max-batch 64 as given (the run's: max batch 256)" in line
    assert "max batch 64" in res.stdout.splitlines()[0]
    data = json.loads(CliRunner().invoke(app, ["plan", "--predict", "--gpus", CARD, "--like", runs["gpu"],
                                               "--json"]).stdout)  # fmt: skip
    assert data["server"]["line"] == LINE and data["max_batch"] == 256


@pytest.mark.slow
def test_bench_of_a_live_ttsperf_server_then_predict_takes_its_settings(tmp_path):
    """The whole path on real parts: `ttsperf serve` (tiny, CPU), bench against it, plan reads the file."""
    from tests.server.helpers import ServeProcess

    texts = tmp_path / "texts.txt"
    texts.write_text("你好，世界。\n", encoding="utf-8")
    args = ("--synthetic", "--config", "tiny", "--max-batch", "6", "--first-chunk-steps", "12")
    with ServeProcess(*args) as srv:
        run = run_bench(BenchSettings(urls=[srv.url], adapter="openai", stream=True, texts=str(texts),
                                      concurrency=[2], requests=4, gpu=False))  # fmt: skip
    assert run.points[0].successes == 4
    write_outputs(run, tmp_path / "run")
    p = predict(gpus=CARD, like=str(tmp_path / "run"))
    # serve's queue by default: a batch's worth, at least 64 (facts.MIN_QUEUE)
    assert p.server["taken"] == {"mode": "eager", "dtype": "fp32", "max_batch": 6, "max_queue": 64,
                                 "first_chunk_steps": 12}  # fmt: skip
    assert p.max_batch == 6 and p.workload["first_chunk_steps"] == 12
    assert p.server["line"].endswith(f"(/healthz, ttsperf {run.server.version}, tiny on cpu)")


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("engines", 2, "ran 2 engines (serve --engines)"),
        ("steps_per_turn", 4, "ran 4 steps a turn (serve --steps-per-turn)"),
    ],
)
def test_a_run_plan_does_not_model_is_predicted_as_one_and_says_so(runs, tmp_path, field, value, said):
    """plan models one engine process per card and prices a host turn per decode step: a run of
    `serve --engines 2` or `--steps-per-turn 4` is not what it predicts, and the server line says
    so rather than compare them silently."""
    data = json.loads(open(runs["gpu"], encoding="utf-8").read())
    data["server"][field] = value
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    p = predict(gpus=CARD, like=str(path))
    assert p.server[field] == value
    assert p.server["line"] == LINE + f"; the run's server {said}: predicted as one"
    assert field not in predict(gpus=CARD, like=runs["gpu"]).server
