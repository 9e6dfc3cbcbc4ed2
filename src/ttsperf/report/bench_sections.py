"""Sections from bench runs: latency and throughput vs load, and the telemetry over the run."""

from __future__ import annotations

from pathlib import Path

from ttsperf.bench.results import BenchRun, PointResult
from ttsperf.charts import HLine, LineChart, Series
from ttsperf.i18n import N_, _
from ttsperf.report.document import Chart, Section, Table, mb, ms, num

# SLO constraints drawn as a line on the latency chart: bench's names for latency percentiles.
LATENCY_SLOS = ("e2e_", "latency_", "ttfa_")


def _xlabel(run: BenchRun) -> str:
    kind = run.points[0].strategy.kind
    return "concurrency (requests in flight)" if kind == "concurrent" else "offered rate (requests/s)"


def _slo_lines(run: BenchRun) -> list[HLine]:
    """One line per latency bound, from the run's verdict or, where that has none, its points'."""
    verdicts = [run.slo] + [p.slo for p in run.points]
    bounds = {(c.name, c.op, c.bound) for v in verdicts if v for c in v.constraints}
    return [
        HLine(f"SLO {name} {op} {bound:g} s", bound)
        for name, op, bound in sorted(bounds)
        if name.startswith(LATENCY_SLOS)
    ]


def _bounded(d, stat: str) -> bool:
    """Drawn only when n gives the percentile's interval both ends (P90 needs n >= 36, P99 368):
    a line through the top few samples would read as a measured tail."""
    ci = getattr(d, f"{stat}_ci", None)
    return ci is None or None not in ci


def _pct_series(pts: list[PointResult], dist: str, stats: tuple[str, ...], prefix: str) -> list[Series]:
    out = []
    for stat in stats:
        dists = [(p.strategy.load, getattr(p, dist)) for p in pts]
        xy = [(x, getattr(d, stat)) for x, d in dists if _bounded(d, stat) and getattr(d, stat) is not None]
        # the interval as a bar at its point (a run written before bench kept intervals: none)
        cis = [(x, getattr(d, f"{stat}_ci", None)) for x, d in dists if getattr(d, stat) is not None]
        bars = [(x, ci[0], ci[1]) for x, ci in cis if ci and None not in ci]
        if xy:
            name = stat.upper() if stat.startswith("p") else stat
            out.append(Series(f"{prefix} {name}", xy, dashed=prefix == "TTFA", intervals=bars))
    return out


def pct(dist, stat: str) -> str:
    """A percentile with its interval when the run holds one (`p99_ci`: [low, high], None where
    this n cannot bound it); runs written before bench kept intervals show the value alone."""
    value, ci = getattr(dist, stat), getattr(dist, f"{stat}_ci", None)
    if value is None or not ci:
        return ms(value)
    return f"{ms(value)} [{ms(ci[0])}, {ms(ci[1])}]"


def load_section(path: Path, run: BenchRun, key: str) -> Section:
    title = _("Load test: {targets} ({adapter})").format(targets=", ".join(run.targets), adapter=run.adapter)
    sec = Section(title, [path])
    if not run.points:
        return sec.say(_("This run has no completed load points (interrupted before the first finished)."))
    pts = sorted(run.points, key=lambda p: p.strategy.load)
    said = _(
        "{points} load point(s), {requests} measured requests ({warmup} warm-up excluded); "
        "throughput = successes / window, never n / sum(latency). "
    ).format(points=len(pts), requests=sum(p.requests for p in pts), warmup=pts[0].warmup)
    sec.say(said + (_("The run was interrupted; the points shown finished.") if run.interrupted else ""))
    sec.say(_server_line(run))
    if run.slo is not None:
        verdict = {
            "pass": _("SLO passed."),
            "fail": _("SLO failed: {why}.").format(why="; ".join(run.slo.failures)),
            "inconclusive": _("SLO inconclusive: {why}.").format(why="; ".join(run.slo.undecided)),
        }[run.slo.status]
        sec.say(verdict)
    _latency_chart(sec, run, pts, key)
    sec.blocks.append(_throughput_chart(run, pts, key))
    sec.blocks.append(_points_table(pts))
    return sec


def _server_line(run: BenchRun) -> str:
    """What the server under test said it ran (its /healthz, read before the load): the settings
    a prediction of this run needs, or why none were recorded."""
    srv = getattr(run, "server", None)  # runs written before bench recorded it have none
    if srv is None:
        why = getattr(run, "server_note", "") or _("not recorded")
        return _("Server settings: none ({why}).").format(why=why)
    said = [srv.mode, srv.dtype or ""]
    said += [
        _("max batch {n}").format(n=srv.max_batch) if srv.max_batch is not None else "",
        _("queue {n}").format(n=srv.max_queue) if srv.max_queue is not None else "",
        _("first chunk {n} steps").format(n=srv.first_chunk_steps) if srv.first_chunk_steps else "",
        srv.device or "",
        f"{srv.model or ''} ({srv.weights})" if srv.weights else srv.model or "",
    ]
    return _("Server settings (from {source}, ttsperf {version}): {settings}.").format(
        source=srv.source, version=srv.version or "?", settings=", ".join(x for x in said if x)
    )


def _latency_chart(sec: Section, run: BenchRun, pts: list, key: str) -> None:
    """E2E and TTFA percentiles vs load, with their intervals (mean and max when n is too small)."""
    series = _pct_series(pts, "latency_s", ("p50", "p90", "p99"), "E2E")
    series += _pct_series(pts, "ttfa_s", ("p50", "p99"), "TTFA")
    if not series:  # too few requests for any bounded percentile (P50 needs n >= 6): show what n gives
        series = _pct_series(pts, "latency_s", ("mean", "max"), "E2E")
        series += _pct_series(pts, "ttfa_s", ("mean", "max"), "TTFA")
        sec.say(
            _(
                "Too few requests per point for a percentile with its interval (P50 needs n >= 6): the chart "
                "shows mean and max."
            )
        )
    if any(s.intervals for s in series):
        sec.say(
            _(
                "The pale bars on the latency chart: each percentile's confidence interval as bench "
                "reports it."
            )
        )
    if series:
        sec.blocks.append(
            Chart(
                f"latency_{key}",
                _("Latency vs load"),
                LineChart(
                    "Latency vs load", _xlabel(run), "latency", series, _slo_lines(run), seconds=True
                ).svg(),
            )
        )


def _throughput_chart(run: BenchRun, pts: list, key: str) -> Chart:
    thr = [Series("requests/s (successes / window)", [(p.strategy.load, p.throughput_rps) for p in pts])]
    if any(p.goodput_rps is not None for p in pts):
        thr.append(
            Series(
                "goodput req/s (meeting SLO)",
                [(p.strategy.load, p.goodput_rps or 0.0) for p in pts],
                dashed=True,
            )
        )
    thr.append(Series("audio seconds / s", [(p.strategy.load, p.audio_seconds_per_s) for p in pts]))
    return Chart(
        f"throughput_{key}",
        _("Throughput vs load"),
        LineChart("Throughput vs load", _xlabel(run), "per second", thr).svg(),
    )


def _points_table(pts: list) -> Table:
    return Table(
        [
            _("load"),
            "n",
            _("ok"),
            "req/s",
            _("audio s/s"),
            "E2E P50",
            "E2E P90",
            "E2E P99",
            "TTFA P50",
            "TTFA P99",
            _("errors"),
        ],  # fmt: skip
        [
            [
                p.label,
                str(p.requests),
                str(p.successes),
                num(p.throughput_rps),
                num(p.audio_seconds_per_s),
                pct(p.latency_s, "p50"),
                pct(p.latency_s, "p90"),
                pct(p.latency_s, "p99"),
                pct(p.ttfa_s, "p50"),
                pct(p.ttfa_s, "p99"),
                ", ".join(f"{k} {v}" for k, v in p.errors.items() if v) or "0",
            ]
            for p in pts
        ],
        _(
            "[low, high]: the percentile's confidence interval as bench reports it "
            "(– : unbounded at this n); – alone: no audio reported"
        ),
    )


def telemetry_section(path: Path, run: BenchRun, key: str) -> Section:
    sec = Section(_("Resources over the run"), [path])
    gpu = [s for s in run.telemetry if "gpu_util" in s]
    proc = [s for s in run.telemetry if "proc_cpu_pct" in s]
    if gpu:
        util = [(s["t"], 100 * s["gpu_util"]) for s in gpu]
        sec.blocks.append(
            _over_run(f"gpu_{key}", N_("GPU utilisation over the run"), "utilisation %", "GPU util %", util)
        )
        if mem := [(s["t"], s["gpu_mem_bytes"] / 1e9) for s in gpu if "gpu_mem_bytes" in s]:
            sec.blocks.append(
                _over_run(f"gpu_mem_{key}", N_("GPU memory over the run"), "GB", "GPU memory GB", mem)
            )
    else:
        notes = "; ".join(run.telemetry_notes) or _(
            "no GPU samples were taken: no local GPU, no --metrics-url"
        )
        sec.say(
            _(
                "No GPU telemetry in this run ({notes}), so GPU utilisation and memory cannot be shown."
            ).format(notes=notes)
        )
    if proc:
        sec.say(_("The server process (bench --server-pid), sampled on the request clock:"))
        cpu = [(s["t"], s["proc_cpu_pct"]) for s in proc]
        rss = [(s["t"], s.get("proc_rss_bytes", 0) / 1e9) for s in proc]
        sec.blocks.append(
            _over_run(
                f"server_cpu_{key}",
                N_("Server process CPU over the run"),
                "CPU % (100 = one core)",
                "server CPU %",
                cpu,
            )
        )
        sec.blocks.append(
            _over_run(
                f"server_rss_{key}",
                N_("Server process memory over the run"),
                "resident memory (GB)",
                "server RSS GB",
                rss,
            )
        )
    elif not gpu:
        sec.say(_("No server process samples either (bench without --server-pid): nothing to chart."))
    rows = []
    for p in sorted(run.points, key=lambda p: p.strategy.load):
        t = p.telemetry
        rows.append(
            [
                p.label,
                num(t.get("gpu_util_mean"), ".0%"),
                mb(t.get("gpu_mem_max")),
                num(t.get("proc_cpu_pct_mean"), ".0f", " %"),
                mb(t.get("proc_rss_max")),
            ]
        )
    if rows:
        sec.blocks.append(
            Table(
                [
                    _("load"),
                    _("GPU util mean"),
                    _("GPU memory max"),
                    _("server CPU mean"),
                    _("server RSS max"),
                ],
                rows,
            )
        )
    return sec


def _over_run(name: str, title: str, ylabel: str, label: str, points: list[tuple[float, float]]) -> Chart:
    """One quantity sampled over the run: its chart (the heading in the reader's language)."""
    chart = LineChart(title, "run time (s)", ylabel, [Series(label, points)], markers=False)
    return Chart(name, _(title), chart.svg())
