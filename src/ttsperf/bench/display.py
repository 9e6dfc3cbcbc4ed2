"""The terminal view of a BenchRun: one block of `metric: value` lines per load point (as vLLM's
benchmark prints), then the SLO verdict. Every line fits 80 columns, so nothing is cut to "…".

Each percentile shows its distribution-free interval: `p99 1620 [1580, -]` is a p99 of 1620 ms
whose 95% interval starts at 1580 ms and has no high end yet (too few requests for one).
"""

from __future__ import annotations

import textwrap

from rich.console import Console

from ttsperf.bench.adapters import streamed
from ttsperf.bench.metrics import PERCENTILES
from ttsperf.bench.results import BenchRun, Dist, PointResult
from ttsperf.bench.slo import fmt_value
from ttsperf.console import console as default_console

LABEL = 14  # "  underrun ms " and the like
# (label, PointResult field, scale to the unit shown, open-loop only)
DISTS = (
    ("e2e ms", "latency_s", 1000.0, False),
    ("ttfa ms", "ttfa_s", 1000.0, False),
    ("rtf", "rtf", 1.0, False),
    ("queue ms", "queue_s", 1000.0, False),
    ("intended ms", "latency_from_intended_s", 1000.0, True),
    ("gap ms", "gap_s", 1000.0, False),
    ("underrun ms", "underrun_s", 1000.0, False),
)
_CHUNKED = ("ttfa_s", "gap_s", "underrun_s")  # a streamed reply's only


def num(v: float | None, scale: float = 1000.0) -> str:
    """A value in the unit shown: three or more significant digits, at most 6 characters wide
    below 1,000 s, so two percentiles with their intervals fit one 80-column line."""
    if v is None:
        return "-"
    x = v * scale
    if scale == 1.0:
        return f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def pct(d: Dist, stat: str, scale: float) -> str:
    lo, hi = getattr(d, f"{stat}_ci") or (None, None)
    return f"{stat} {num(getattr(d, stat), scale)} [{num(lo, scale)}, {num(hi, scale)}]"


def dist_lines(label: str, d: Dist, scale: float) -> list[str]:
    """Two lines: n, p50 and p90; then p95 and p99 under them."""
    cells = [pct(d, s, scale) for s in PERCENTILES]
    width = max(len(c) for c in cells)
    head = f"  {label:<{LABEL - 2}}n={d.n:<7}"
    first = f"{head}{cells[0]:<{width}}  {cells[1]}"
    second = f"{'':<{len(head)}}{cells[2]:<{width}}  {cells[3]}"
    return [first, second]


def _line(label: str, value: str) -> str:
    return f"  {label:<{LABEL - 2}}{value}"


def _verdict_word(status: str) -> str:
    return {"pass": "pass", "fail": "FAIL", "inconclusive": "inconclusive"}[status]


def point_lines(p: PointResult, in_chunks: bool = True) -> list[str]:
    """A load point's block; a buffered run (replies not streamed) shows no TTFA, gap or underrun,
    which would only time the whole response again."""
    head = f"{p.label}: {p.successes}/{p.requests} ok, window {p.window_s:.1f} s"
    if p.added_requests:
        head += f", {p.added_requests} added to decide the SLO"
    if p.warmup:
        head += f", {p.warmup} warm-up excluded"
    if p.slo is not None:
        head += f", SLO {_verdict_word(p.slo.status)}"
    out = [head]
    rate = f"{p.throughput_rps:.2f} req/s, {p.audio_seconds_per_s:.2f} audio s/s"
    if p.goodput_rps is not None:
        rate += f", goodput {p.goodput_rps:.2f} req/s"
    out.append(_line("throughput", rate))
    if p.decode_steps_per_s is not None:
        out.append(_line("decode", f"{p.decode_steps_per_s:.1f} steps/s"))
    if p.achieved_send_rate is not None and p.strategy.kind == "rate":
        out.append(_line("sent at", f"{p.achieved_send_rate:.2f}/s (asked {p.strategy.rate:g})"))
    errs = ", ".join(f"{k}={v}" for k, v in sorted(p.errors.items())) or "0"
    out.append(_line("errors", f"{errs} ({100 * p.error_rate:.1f}%)"))
    for label, field, scale, open_loop in DISTS:
        d: Dist = getattr(p, field)
        if field in _CHUNKED and not in_chunks:
            continue
        if d.n and (p.strategy.kind == "rate" or not open_loop):
            out += dist_lines(label, d, scale)
    if not in_chunks:
        out.append(_line("streamed", "no: whole replies (no TTFA, gaps or underruns)"))
    gpu = []
    for k, v in p.telemetry.items():
        if k == "gpu_util_mean":
            gpu.append(f"util {100 * v:.0f}%")
        elif k == "gpu_mem_max":
            gpu.append(f"mem max {v / 1e9:.2f} GB")
        elif k == "gpu_power_mean":
            gpu.append(f"power {v:.0f} W")
        elif k == "gpu_joules_per_audio_s":
            gpu.append(f"{v:.1f} J/audio s")
    if gpu:
        out.append(_line("GPU", ", ".join(gpu)))
    if "proc_cpu_pct_mean" in p.telemetry:  # --server-pid: 100% = one core
        cpu = f"{p.telemetry['proc_cpu_pct_mean']:.0f}% of a core"
        if "children_cpu_pct_mean" in p.telemetry:  # ttsperf serve's engine process
            cpu += f", its child processes {p.telemetry['children_cpu_pct_mean']:.0f}%"
        out.append(_line("server CPU", cpu))
    if p.slo is not None:
        for c in p.slo.constraints:
            shown = "not measured" if c.value is None else fmt_value(c.name, c.value)
            out.append(_line("SLO", f"{c.name} {shown} ({c.op} {fmt_value(c.name, c.bound)}): {c.status}"))
    for cls, why in p.error_examples.items():  # whole, wrapped under its label: never cut
        lines = textwrap.wrap(why, 78 - LABEL, break_on_hyphens=False) or [""]
        out += [_line(cls if i == 0 else "", text) for i, text in enumerate(lines)]
    return out


def render(run: BenchRun, console: Console | None = None) -> None:
    # A pipe or CI log gets whole lines rather than lines cut to 80 characters.
    console = console or default_console()

    def say(text: str, style: str | None = None, indent: str = "") -> None:
        # markup off: "[1580, -]" is an interval, not a rich tag. A long line is wrapped here, at
        # the console's width, under a hanging indent, rather than by rich at column 0.
        if indent:
            text = textwrap.fill(text, console.width, subsequent_indent=indent, break_on_hyphens=False)
        console.print(text, style=style, markup=False, highlight=False)

    say(f"ttsperf bench {', '.join(run.targets)} (adapter {run.adapter})", "bold", indent="  ")
    w = run.workload
    if w:
        say(
            f"workload {w['name']}: {w['texts']} texts, {w['chars']['min']}-{w['chars']['max']} chars "
            f"(median {w['chars']['median']:g}), expected speech {w['expected_audio_s']['min']}-"
            f"{w['expected_audio_s']['max']} s",
            indent="  ",
        )
    if (srv := run.server) is not None:  # ttsperf serve said what it runs (another server says nothing)
        on = " on ".join(x for x in (srv.model, srv.device) if x)
        say(f"server {srv.summary()}" + (f"; {on}" if on else "") + f" ({srv.source})", indent="  ")
    is_streamed = streamed(run.adapter, bool(run.config.get("stream")))
    level = run.config.get("confidence", 0.95)
    say(f"pXX value [low, high]: each percentile with its {level:.0%} interval (order statistics,")
    say("any distribution); - = too few requests for that end; req/s = successes/window.")
    for p in run.points:
        say("")
        for i, line in enumerate(point_lines(p, is_streamed)):
            say(line, "bold" if i == 0 else None)
    for note in run.telemetry_notes:
        say(f"note: {note}", "yellow", indent="  ")
    if run.find_max is not None:
        fm = run.find_max
        best = "none" if fm["max_passing"] is None else f"{fm['max_passing']:g}"
        say(f"find-max ({fm['dimension']}): highest load meeting the SLO = {best}", indent="  ")
        if above := fm.get("above"):
            word = {"fail": "failed", "inconclusive": "was undecided"}.get(above["status"], above["status"])
            say(f"  at {above['load']:g} the SLO {word}: {above['why']}", indent="    ")
    if run.slo is not None:
        say("")
        style = {"pass": "green", "fail": "red", "inconclusive": "yellow"}[run.slo.status]
        say(f"SLO: {run.slo.status.upper()}", style)
        for line in run.slo.failures:
            say(f"  - {line}", indent="    ")
        for line in run.slo.undecided:
            say(f"  ? {line}", indent="    ")
    if run.interrupted:
        say("interrupted: results cover the requests finished so far", "yellow")
