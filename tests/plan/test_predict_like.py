"""`plan --predict --like RUN`: a prediction of exactly the work a bench run did, read from its file."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pytest

from ttsperf.bench.api import BenchSettings, run_bench
from ttsperf.bench.results import write_outputs
from ttsperf.errors import UserError
from ttsperf.plan.predict import predict


@pytest.fixture(scope="module")
def mock_url():
    """A real TTS server on loopback (ttsperf.bench.mock_server), 2 slots of 50 ms."""
    args = ["--port", "0", "--slots", "2", "--service-time", "0.05"]
    cmd = [sys.executable, "-m", "ttsperf.bench.mock_server", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    yield line.split()[-1]
    proc.terminate()
    proc.wait(timeout=5)


def _run(url: str, tmp_path, name: str, **kw):
    run = run_bench(BenchSettings(urls=[url], gpu=False, **kw))
    write_outputs(run, tmp_path / name)
    return run, tmp_path / name


def test_a_streamed_closed_loop_is_predicted_on_its_own_load_requests_and_audio(mock_url, tmp_path):
    run, path = _run(mock_url, tmp_path, "run", adapter="openai", stream=True, concurrency=[4], requests=12,
                     warmup=2, think_time=0.0)  # fmt: skip
    p = predict(gpus="RTX 4090", like=str(path))
    assert p.load == {"kind": "closed loop", "value": 4.0, "think_s": 0.0}
    assert p.simulated_requests == 12 and p.streamed
    audio = statistics.median(r.audio_s for r in run.records if not r.warmup and r.ok)
    assert p.workload["audio_seconds"] == pytest.approx(audio)
    assert "point concurrent@4,think0s: 12 measured requests after 2 warm-up" in p.like
    # the mock sends none: the plan's default texts' mean (zh-8s)
    assert "prompt 50 tokens (--prompt-tokens: the run does not say)" in p.basis


def test_a_buffered_run_is_predicted_with_ttfa_the_whole_response(mock_url, tmp_path):
    _, path = _run(mock_url, tmp_path, "buffered", concurrency=[2], requests=6)
    p = predict(gpus="RTX 4090", like=str(path / "run.json"))
    assert not p.streamed and "not streamed (invoke): TTFA is the whole response" in p.like
    assert p.prediction.ttfa_p50_s == p.prediction.e2e_p50_s


def test_a_sweep_needs_its_point_named(mock_url, tmp_path):
    _, path = _run(mock_url, tmp_path, "sweep", concurrency=[1, 2], requests=4)
    with pytest.raises(
        UserError, match=r"expected one load point, found 2 \(its points: concurrent@1, concurrent@2\)"
    ):
        predict(gpus="RTX 4090", like=str(path))
    assert predict(gpus="RTX 4090", like=str(path), streams=2).load["value"] == 2.0
    with pytest.raises(UserError, match="--like .*nope: no such bench run"):
        predict(gpus="RTX 4090", like=str(tmp_path / "nope"))


def test_a_file_that_is_not_a_bench_run_is_named(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text('{"schema": "ttsperf.plan", "points": []}', encoding="utf-8")
    with pytest.raises(UserError, match=r"--like .*plan.json: schema 'ttsperf.plan', expected a bench run"):
        predict(gpus="RTX 4090", like=str(plan))


def test_a_ramped_run_is_predicted_ramped_and_its_flags_read_back(mock_url, tmp_path):
    """like() reads a run's ramp-up; bench_flags writes the prediction's load back as the flags
    that ran it (the check a report names)."""
    from ttsperf.plan.like import bench_flags

    run, path = _run(mock_url, tmp_path, "ramped", adapter="openai", stream=True, users=[3], ramp_up=0.3,
                     requests=6)  # fmt: skip
    assert run.points[0].strategy.label == "concurrent@3,think0s,ramp0.3s"
    p = predict(gpus="RTX 4090", like=str(path))
    assert p.load == {"kind": "closed loop", "value": 3.0, "think_s": 0.0, "ramp_s": 0.3}
    assert bench_flags(p.as_load()) == "--users 3 --ramp-up 0.3s"
    flags = bench_flags(p.as_load()).split()
    again, _ = BenchSettings.resolve({"urls": [mock_url], "users": flags[1], "ramp_up": flags[3]})  # as typed
    assert [s.label for s in again.strategies()] == [run.points[0].strategy.label]


@pytest.mark.parametrize(
    ("load", "flags"),
    [
        (("rate", 3.5), "--rate 3.5"),
        (("constant", 2.0), "--rate 2 --arrival constant"),
        (("streams", 4.0), "--concurrency 4"),
        (("streams", 4.0, None, 2.0), "--concurrency 4 --ramp-up 2s"),
        (("streams", 7.0, 0.0), "--users 7"),
        (("streams", 7.0, 1.5, 8.0), "--users 7 --think-time 1.5s --ramp-up 8s"),
    ],
)
def test_bench_flags_name_each_load_as_bench_takes_it(load, flags):
    from ttsperf.plan.like import bench_flags
    from ttsperf.plan.simulate import Load

    assert bench_flags(Load(*load)) == flags


def test_a_run_of_many_lengths_is_predicted_on_its_own_lengths(mock_url, tmp_path):
    """bench's mixed text set: short turns to paragraphs. The prediction draws each request's
    length from the run's, so its mean audio is the run's and its P99 latency is a long
    request's, far above P50 (one median length would make them equal)."""
    run, path = _run(mock_url, tmp_path, "mixed", adapter="openai", stream=True, concurrency=[2],
                     text_set="mixed", requests=40)  # fmt: skip
    audio = [r.audio_s for r in run.records if not r.warmup and r.ok]
    p = predict(gpus="RTX 4090", like=str(path), max_batch=2)
    assert p.workload["audio_seconds"] == pytest.approx(statistics.fmean(audio), rel=1e-6)
    assert p.workload["audio_max_s"] == pytest.approx(max(audio)) and p.workload["lengths"] == len(audio)
    assert f"P99 {statistics.quantiles(audio, n=100, method='inclusive')[98]:.2f} s of 40 answered" in p.like
    assert p.prediction.e2e_p99_s > 2 * p.prediction.e2e_p50_s
    # in the order bench sent them: the k-th simulated request takes the k-th measured length
    from ttsperf.plan.like import like

    sent = sorted((r for r in run.records if not r.warmup and r.ok), key=lambda r: r.i)
    assert [a for a, _ in like(str(path)).lengths] == [r.audio_s for r in sent]
