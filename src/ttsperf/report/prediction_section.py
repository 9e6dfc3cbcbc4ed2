"""Predicted vs measured: a `plan --predict` beside the bench points of the same load and work.

A prediction is the simulator's answer for one device at one load (N streams closed loop, or R
requests/s Poisson); a bench point of that load, whose requests made the same audio (within 10%),
streamed as predicted, is the measurement it is checked against; a point of the same load but
other work is named with why, never compared. Each
metric is shown with its error, (predicted - measured) / measured, the same as
benchmarks/plan_accuracy.py prints. Each measured percentile is shown with its n and bench's
distribution-free interval (`-` for an end its n cannot give), so an error inside that interval
reads as such.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from ttsperf.bench.metrics import dist
from ttsperf.bench.quantiles import CONFIDENCE
from ttsperf.bench.results import BenchRun, Dist, PointResult
from ttsperf.i18n import _
from ttsperf.plan.like import STREAMING, bench_flags
from ttsperf.plan.predict import Prediction
from ttsperf.report.document import Section, Table, ms


def _same_load(pred: Prediction, point: PointResult) -> bool:
    s, value = point.strategy, float(pred.load["value"])
    if pred.load["kind"] == "closed loop":
        return s.kind == "concurrent" and s.concurrency == value
    return s.kind == "rate" and s.arrival == "poisson" and math.isclose(s.rate or 0.0, value, rel_tol=1e-6)


# a prediction and a bench point describe the same work when their requests' audio differs by no
# more than this (bench's texts vary; plan --predict --like takes the run's median)
AUDIO_TOLERANCE = 0.10


def workload_mismatch(pred: Prediction, run: BenchRun, index: int) -> str | None:
    """Why a bench point of the prediction's load ran other work (None: the same work): the audio
    per request (its answered measured requests' mean), streamed or not, a listener's think time,
    the senders' ramp-up."""
    mine = [r for r in run.records if r.point == index and r.ok and not r.warmup]
    audio = [r.audio_s or r.server_audio_s or r.expected_audio_s for r in mine]
    reasons = []
    predicted = float(pred.workload["audio_seconds"])
    if audio:
        mean = statistics.fmean(audio)
        if abs(mean - predicted) > AUDIO_TOLERANCE * predicted:
            reasons.append(f"mean audio {mean:.2f} s per request, predicted {predicted:.3g} s")
    streamed = bool(run.config.get("stream")) and run.adapter in STREAMING
    if streamed != pred.streamed:
        reasons.append(("streamed" if streamed else f"not streamed ({run.adapter})") + ", predicted "
                       + ("streamed" if pred.streamed else "not streamed"))  # fmt: skip
    think = run.points[index].strategy.think_s
    if think != pred.load.get("think_s"):
        reasons.append(f"think time {think}, predicted {pred.load.get('think_s')}")
    ramp = run.points[index].strategy.ramp_s or 0.0
    if ramp != pred.load.get("ramp_s", 0.0):
        reasons.append(f"ramp-up {ramp:g} s, predicted {pred.load.get('ramp_s', 0.0):g} s")
    return "; ".join(reasons) or None


def _percentile_of(run: BenchRun, index: int, d: Dist, stat: str) -> Dist:
    """The point's own Dist; for a run.json written before bench gave every percentile an interval
    (it withheld p99 below 1,000 requests), the same Dist recomputed from the point's records."""
    if getattr(d, stat) is not None or not d.n:
        return d
    mine = [r for r in run.records if r.point == index and r.ok and not r.warmup]
    if d is run.points[index].ttfa_s:
        values = [r.t_first_audio - r.t_send for r in mine if r.t_first_audio is not None]
    else:
        values = [r.t_end - r.t_send for r in mine]
    return dist(values, run.config.get("confidence", CONFIDENCE))


def _measured(d: Dist, stat: str) -> str:
    """`1,620 ms (n = 20, CI [1,500 ms, -])`: the percentile, its n, its interval's ends."""
    ci = getattr(d, f"{stat}_ci") or [None, None]
    ends = ", ".join("-" if e is None else ms(e) for e in ci)
    return f"{ms(getattr(d, stat))} (n = {d.n}, CI [{ends}])"


def _error(predicted: float, measured: float | None) -> str:
    if measured is None or measured == 0:
        return "–"
    return f"{100 * (predicted - measured) / measured:+.1f}%"


def prediction_section(path: Path, pred: Prediction, runs: list[tuple[Path, BenchRun]]) -> Section:
    load = pred.load
    closed = load["kind"] == "closed loop"
    what = (_("{n} streams") if closed else _("{n} req/s Poisson")).format(n=f"{load['value']:g}")
    sec = Section(_("Predicted vs measured: {device}, {load}").format(device=pred.device, load=what), [path])
    sec.say(
        _(
            "`ttsperf plan --predict` for {device} at {load}, max batch {batch}, {audio} s of audio per "
            "request; basis: {basis}."
        ).format(
            device=pred.device,
            load=what,
            batch=pred.max_batch,
            audio=f"{pred.workload['audio_seconds']:.3g}",
            basis=pred.basis,
        )
    )
    same_load = [(p, r, i) for p, r in runs for i, point in enumerate(r.points) if _same_load(pred, point)]
    matches = []
    for bench_path, run, i in same_load:  # a prediction is held beside the same work only
        why = workload_mismatch(pred, run, i)
        if why is None:
            matches.append((bench_path, run, i))
        else:
            sec.say(
                _(
                    "Not compared with {file}, {load}: it ran other work ({why}). "
                    "`ttsperf plan --predict --like {file}` predicts that run's load and requests."
                ).format(file=bench_path, load=run.points[i].label, why=why)
            )
    if not same_load:
        flags = bench_flags(pred.as_load())
        sec.say(
            _(
                "No bench point among the inputs ran this load: "
                "`{command}` against the same server measures it."
            ).format(command=f"ttsperf bench URL {flags}")
        )
    n = pred.prediction
    for bench_path, run, i in matches:
        point = run.points[i]
        sec.sources.append(bench_path)
        rows = [
            [_("throughput"), f"{n.throughput_rps:.3g} req/s", f"{point.throughput_rps:.3g} req/s",
             _error(n.throughput_rps, point.throughput_rps)],
            [_("audio"), f"{n.audio_seconds_per_s:.3g} s/s", f"{point.audio_seconds_per_s:.3g} s/s",
             _error(n.audio_seconds_per_s, point.audio_seconds_per_s)],
        ]  # fmt: skip
        for label, predicted, d, stat in (
            ("E2E P50", n.e2e_p50_s, point.latency_s, "p50"),
            ("E2E P99", n.e2e_p99_s, point.latency_s, "p99"),
            ("TTFA P50", n.ttfa_p50_s, point.ttfa_s, "p50"),
            ("TTFA P99", n.ttfa_p99_s, point.ttfa_s, "p99"),
        ):
            measured = _percentile_of(run, i, d, stat)
            rows.append(
                [label, ms(predicted), _measured(measured, stat), _error(predicted, getattr(measured, stat))]
            )
        sec.blocks.append(
            Table(
                [_("metric"), _("predicted"), _("measured"), _("error")],
                rows,
                _(
                    "{file}, {load}: {ok} of {n} requests after {warmup} warm-up; "
                    "error = (predicted - measured) / measured"
                ).format(
                    file=bench_path,
                    load=point.label,
                    ok=point.successes,
                    n=point.requests,
                    warmup=point.warmup,
                ),
            )
        )
    return sec
