"""The terminal view of a BenchRun: one row per load point, then the SLO verdict.

A percentile that n cannot resolve is shown as `n<NEED`, never as a number.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ttsperf.bench.metrics import PERCENTILES, min_n
from ttsperf.bench.results import BenchRun, Dist
from ttsperf.console import console as default_console


def ms(d: Dist, stat: str) -> str:
    if d.n == 0:
        return "-"
    v = getattr(d, stat)
    if v is None:
        return f"n<{min_n(PERCENTILES[stat])}"
    return f"{1000 * v:.0f}" if v >= 0.01 else f"{1000 * v:.2f}"


def plain(d: Dist, stat: str) -> str:
    if d.n == 0:
        return "-"
    v = getattr(d, stat)
    return f"n<{min_n(PERCENTILES[stat])}" if v is None else f"{v:.3f}"


def _constraint(c) -> str:
    from ttsperf.bench.slo import fmt_value

    if c.value is None:
        return f"{c.name} ?"
    mark = "ok" if c.passed else "FAIL"
    return f"{c.name} {fmt_value(c.name, c.value)} {mark}"


def render(run: BenchRun, console: Console | None = None) -> None:
    # A pipe or CI log gets the whole table rather than columns cut to 80 characters.
    console = console or default_console()
    t = Table(title=f"ttsperf bench  {', '.join(run.targets)}  adapter={run.adapter}", title_justify="left")
    for col in ("load", "ok/n", "req/s", "audio s/s", "e2e p50 ms", "e2e p90 ms", "e2e p99 ms", "ttfa p50 ms",
                "ttfa p99 ms", "rtf p50", "rtf p95", "queue p99 ms", "errors", "SLO"):  # fmt: skip
        t.add_column(col, justify="right" if col not in ("load", "errors") else "left")
    for p in run.points:
        errs = ", ".join(f"{k}={v}" for k, v in sorted(p.errors.items())) or "0"
        slo = "-" if p.slo is None else ("pass" if p.slo.passed else "FAIL")
        t.add_row(
            p.label, f"{p.successes}/{p.requests}", f"{p.throughput_rps:.2f}", f"{p.audio_seconds_per_s:.2f}",
            ms(p.latency_s, "p50"), ms(p.latency_s, "p90"), ms(p.latency_s, "p99"), ms(p.ttfa_s, "p50"),
            ms(p.ttfa_s, "p99"), plain(p.rtf, "p50"), plain(p.rtf, "p95"), ms(p.queue_s, "p99"), errs, slo,
        )  # fmt: skip
    console.print(t)
    w = run.workload
    if w:
        console.print(
            f"workload {w['name']}: {w['texts']} texts, {w['chars']['min']}-{w['chars']['max']} chars "
            f"(median {w['chars']['median']:g}), expected speech {w['expected_audio_s']['min']}-"
            f"{w['expected_audio_s']['max']} s"
        )
    console.print(
        "percentiles: exact, numpy linear; n<K = not resolved by this many requests (needs >= K). "
        "req/s = successes / window, not n / sum(latency)."
    )
    for p in run.points:
        extra = []
        if p.decode_steps_per_s is not None:
            extra.append(f"decode steps/s {p.decode_steps_per_s:.1f}")
        if p.goodput_rps is not None:
            extra.append(f"goodput {p.goodput_rps:.2f} req/s")
        if p.underrun.get("worst_s") is not None and p.ttfa_s.n and p.gap_s.n:
            extra.append(f"worst playback underrun {1000 * p.underrun['worst_s']:.0f} ms")
        if p.achieved_send_rate is not None and p.strategy.kind == "rate":
            extra.append(f"sent at {p.achieved_send_rate:.2f}/s (asked {p.strategy.rate:g})")
        for k, v in p.telemetry.items():
            if k == "gpu_util_mean":
                extra.append(f"GPU util {100 * v:.0f}%")
            elif k == "gpu_mem_max":
                extra.append(f"GPU mem max {v / 1e9:.2f} GB")
            elif k == "gpu_power_mean":
                extra.append(f"GPU power {v:.0f} W")
            elif k == "gpu_joules_per_audio_s":
                extra.append(f"{v:.1f} J per audio second")
        if p.slo is not None:
            extra.append("SLO " + ", ".join(_constraint(c) for c in p.slo.constraints))
        for cls, why in p.error_examples.items():
            extra.append(f"{cls}: {why[:100]}")
        if extra:
            console.print(f"  {p.label}: " + "; ".join(extra))
    for note in run.telemetry_notes:
        console.print(f"[yellow]note:[/] {note}")
    if run.find_max is not None:
        fm = run.find_max
        console.print(
            f"find-max ({fm['dimension']}): highest load meeting the SLO = {fm['max_passing']}, "
            f"lowest failing = {fm['first_failing']}"
        )
    if run.slo is not None:
        if run.slo.passed:
            console.print("[green]SLO: PASS[/]")
        else:
            console.print("[red]SLO: FAIL[/]")
            for f in run.slo.failures:
                console.print(f"  - {f}")
    if run.interrupted:
        console.print("[yellow]interrupted: results cover the requests finished so far[/]")
