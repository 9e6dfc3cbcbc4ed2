"""Predicted vs measured: a `plan --predict` beside the bench points of the same load.

A prediction is the simulator's answer for one device at one load (N streams closed loop, or R
requests/s Poisson); a bench point of that load is the measurement it is checked against. Each
metric is shown with its error, (predicted - measured) / measured, the same as
benchmarks/plan_accuracy.py prints. A bench percentile its n cannot resolve (p99 below 1,000
requests) is computed here from the point's records and marked with its n.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ttsperf.bench.results import BenchRun, PointResult
from ttsperf.plan.predict import Prediction
from ttsperf.report.document import Section, Table, ms


def _same_load(pred: Prediction, point: PointResult) -> bool:
    s, value = point.strategy, float(pred.load["value"])
    if pred.load["kind"] == "closed loop":
        return s.kind == "concurrent" and s.concurrency == value
    return s.kind == "rate" and s.arrival == "poisson" and math.isclose(s.rate or 0.0, value, rel_tol=1e-6)


def _from_records(run: BenchRun, index: int, metric: str, q: float) -> tuple[float | None, int]:
    """The q-th percentile of E2E or TTFA over the point's measured successes, and their n."""
    mine = [r for r in run.records if r.point == index and r.ok and not r.warmup]
    if metric == "ttfa":
        values = [r.t_first_audio - r.t_send for r in mine if r.t_first_audio is not None]
    else:
        values = [r.t_end - r.t_send for r in mine]
    return (float(np.percentile(values, q)) if values else None), len(values)


def _error(predicted: float, measured: float | None) -> str:
    if measured is None or measured == 0:
        return "–"
    return f"{100 * (predicted - measured) / measured:+.1f}%"


def prediction_section(path: Path, pred: Prediction, runs: list[tuple[Path, BenchRun]]) -> Section:
    load = pred.load
    closed = load["kind"] == "closed loop"
    what = f"{load['value']:g} streams" if closed else f"{load['value']:g} req/s Poisson"
    sec = Section(f"Predicted vs measured: {pred.device}, {what}", [path])
    sec.say(
        f"`ttsperf plan --predict` for {pred.device} at {what}, max batch {pred.max_batch}, "
        f"{pred.workload['audio_seconds']:g} s of audio per request; basis: {pred.basis}."
    )
    matches = [(p, r, i) for p, r in runs for i, point in enumerate(r.points) if _same_load(pred, point)]
    if not matches:
        flag = "--concurrency" if closed else "--rate"
        sec.say(
            f"No bench point among the inputs ran this load: `ttsperf bench URL {flag} {load['value']:g}` "
            "against the same server measures it."
        )
    n = pred.prediction
    for bench_path, run, i in matches:
        point = run.points[i]
        sec.sources.append(bench_path)
        rows = [
            ["throughput", f"{n.throughput_rps:.3g} req/s", f"{point.throughput_rps:.3g} req/s",
             _error(n.throughput_rps, point.throughput_rps)],
            ["audio", f"{n.audio_seconds_per_s:.3g} s/s", f"{point.audio_seconds_per_s:.3g} s/s",
             _error(n.audio_seconds_per_s, point.audio_seconds_per_s)],
        ]  # fmt: skip
        for label, metric, q, predicted, dist in (
            ("E2E P50", "e2e", 50, n.e2e_p50_s, point.latency_s.p50),
            ("E2E P99", "e2e", 99, n.e2e_p99_s, point.latency_s.p99),
            ("TTFA P50", "ttfa", 50, n.ttfa_p50_s, point.ttfa_s.p50),
            ("TTFA P99", "ttfa", 99, n.ttfa_p99_s, point.ttfa_s.p99),
        ):
            measured, shown = dist, ms(dist)
            if measured is None:  # bench withholds what its n cannot resolve: the sample's own
                measured, count = _from_records(run, i, metric, q)
                shown = f"{ms(measured)} (n = {count}, unresolved)"
            rows.append([label, ms(predicted), shown, _error(predicted, measured)])
        sec.blocks.append(
            Table(
                ["metric", "predicted", "measured", "error"],
                rows,
                f"{bench_path}, {point.label}: {point.successes} of {point.requests} requests after "
                f"{point.warmup} warm-up; error = (predicted - measured) / measured",
            )
        )
    return sec
