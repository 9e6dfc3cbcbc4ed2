"""report/prediction_section.py: a `plan --predict` beside the bench point of its load."""

from __future__ import annotations

import json

from ttsperf.bench.results import BenchRun
from ttsperf.report.build import build_report
from ttsperf.report.inputs import read_inputs

from .blocks import tables as _tables


def test_a_prediction_is_shown_beside_the_bench_point_of_its_load(results, tmp_path):
    from ttsperf.plan.predict import predict
    from ttsperf.report.prediction_section import prediction_section

    # --like: the run's own work (its audio per request, streamed or not), at its 2 streams
    pred = predict(gpus="RTX 4090", streams=2, max_batch=2, like=str(results / "bench" / "run.json"))
    path = tmp_path / "prediction.json"
    path.write_text(json.dumps(pred.dump()))
    inputs = read_inputs([path, results / "bench" / "run.json"])
    assert [p for p, _ in inputs.predictions] == [path]  # recognised by its schema
    sec = prediction_section(path, inputs.predictions[0][1], inputs.bench)
    assert sec.title == "Predicted vs measured: RTX 4090, 2 streams"
    assert sec.sources == [path, results / "bench" / "run.json"]
    (table,) = _tables(sec)
    assert [r[0] for r in table.rows] == ["throughput", "audio", "E2E P50", "E2E P99", "TTFA P50", "TTFA P99"]
    run = inputs.bench[0][1]
    point = next(p for p in run.points if p.strategy.concurrency == 2)
    measured = point.throughput_rps
    assert table.rows[0][2] == f"{measured:.3g} req/s"
    assert table.rows[0][3] == f"{100 * (pred.prediction.throughput_rps - measured) / measured:+.1f}%"
    assert "(n = 20, CI " in table.rows[3][2] and table.rows[3][2].endswith(", -])")  # p99 of 20: no high end
    assert "concurrent@2" in table.caption
    # the report places it, after the plans
    assert any(s.title.startswith("Predicted vs measured") for s in build_report(inputs).sections)


def test_a_prediction_without_a_bench_point_of_its_load_says_how_to_measure_it(results):
    from ttsperf.plan.predict import predict
    from ttsperf.report.prediction_section import prediction_section

    pred = predict(gpus="RTX 4090", rate=3.5, max_batch=4, requests=20)
    run = results / "bench" / "run.json"
    sec = prediction_section(results, pred, [(run, BenchRun.read(run))])
    assert not _tables(sec)
    assert "No bench point among the inputs ran this load: `ttsperf bench URL --rate 3.5`" in sec.blocks[1]
    # listeners: bench's users, who think as predicted (not --concurrency, which sends back to back)
    users = predict(gpus="RTX 4090", users=7, think_time=1.5, max_batch=4, requests=20)
    said = prediction_section(results, users, [(run, BenchRun.read(run))]).blocks[1]
    assert "`ttsperf bench URL --users 7 --think-time 1.5s`" in said
    ramped = predict(gpus="RTX 4090", users=7, ramp_up=3.0, max_batch=4, requests=20)
    said = prediction_section(results, ramped, [(run, BenchRun.read(run))]).blocks[1]
    assert "`ttsperf bench URL --users 7 --ramp-up 3s`" in said  # started as predicted


def test_a_prediction_of_other_work_is_not_compared_and_says_why(results):
    # the "+71% E2E P50": 8 s streamed requests predicted, the run's own texts measured
    from ttsperf.plan.predict import predict
    from ttsperf.report.prediction_section import prediction_section

    pred = predict(gpus="RTX 4090", streams=2, max_batch=2, requests=20)
    run = results / "bench" / "run.json"
    sec = prediction_section(results, pred, [(run, BenchRun.read(run))])
    assert not _tables(sec)
    said = " ".join(b for b in sec.blocks if isinstance(b, str))
    assert f"Not compared with {run}, concurrent@2: it ran other work (mean audio" in said
    assert "predicted 7.99 s" in said and f"`ttsperf plan --predict --like {run}`" in said


def test_a_prediction_started_otherwise_than_the_run_is_not_compared(results):
    """The run's 2 streams all started at once; a prediction of them ramped up over 4 s is of
    other work (the burst a ramp avoids is the TTFA the run measured)."""
    from ttsperf.plan.predict import predict
    from ttsperf.report.prediction_section import prediction_section

    run = results / "bench" / "run.json"
    like = predict(gpus="RTX 4090", streams=2, max_batch=2, like=str(run))
    ramped = like.model_copy(update={"load": {**like.load, "ramp_s": 4.0}})
    said = " ".join(
        b
        for b in prediction_section(results, ramped, [(run, BenchRun.read(run))]).blocks
        if isinstance(b, str)
    )
    assert "it ran other work (ramp-up 0 s, predicted 4 s)" in said
    assert _tables(prediction_section(results, like, [(run, BenchRun.read(run))]))  # as run: compared
