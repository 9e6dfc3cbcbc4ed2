"""PNG charts of a BenchRun (matplotlib, Agg: no display needed).

latency.png: P50/P99 vs load with the SLO line; throughput.png: req/s and audio s/s vs load;
gpu.png: GPU utilisation and memory over time (only when sampled); ttfa_cdf.png: TTFA per point;
server.png: the --server-pid process's CPU and memory over time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ttsperf.bench.results import BenchRun


def write_charts(run: BenchRun, out: Path) -> list[Path]:
    if not run.points:
        return []
    from ttsperf.charts import pyplot  # headless, the same style as the report's charts

    plt = pyplot()
    out.mkdir(parents=True, exist_ok=True)
    pts = sorted(run.points, key=lambda p: p.strategy.load)
    xlabel = "concurrency (in flight)" if pts[0].strategy.kind == "concurrent" else "offered rate (req/s)"
    written = [
        _save(_latency(plt, run, pts, xlabel), out / "latency.png", plt),
        _save(_throughput(plt, pts, xlabel), out / "throughput.png", plt),
        _save(_ttfa_cdf(plt, run), out / "ttfa_cdf.png", plt),
    ]
    if gpu := [s for s in run.telemetry if "gpu_util" in s]:
        util = ("utilisation %", "GPU util %", lambda s: 100 * s["gpu_util"])
        mem = ("memory GB", "GPU memory GB", lambda s: s.get("gpu_mem_bytes", 0) / 1e9)
        written.append(_save(_over_run(plt, gpu, "GPU over the run", util, mem), out / "gpu.png", plt))
    if proc := [s for s in run.telemetry if "proc_cpu_pct" in s]:
        # --server-pid: the server process over the same clock (what a CPU-only machine has)
        cpu = ("CPU %", "server CPU % (100 = one core)", lambda s: s["proc_cpu_pct"])
        rss = ("resident memory GB", "server RSS GB", lambda s: s.get("proc_rss_bytes", 0) / 1e9)
        fig = _over_run(plt, proc, "Server process over the run", cpu, rss)
        written.append(_save(fig, out / "server.png", plt))
    return written


def _latency(plt, run: BenchRun, pts: list, xlabel: str):
    x = [p.strategy.load for p in pts]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for stat, style in (("p50", "o-"), ("p99", "s--")):
        ys = [getattr(p.latency_s, stat) for p in pts]
        xs = [xi for xi, y in zip(x, ys, strict=True) if y is not None]
        ax.plot(xs, [y for y in ys if y is not None], style, label=f"E2E {stat} (resolved points only)")
    for c in (run.slo.constraints if run.slo and run.slo.constraints else
              (pts[0].slo.constraints if pts[0].slo else [])):  # fmt: skip
        if c.name.startswith(("e2e_", "latency_")):
            ax.axhline(c.bound, color="red", linestyle=":", label=f"SLO {c.name} {c.op} {c.bound:g} s")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("latency (s)")
    ax.set_title("End-to-end latency vs load")
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def _throughput(plt, pts: list, xlabel: str):
    x = [p.strategy.load for p in pts]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(x, [p.throughput_rps for p in pts], "o-", label="requests/s (successes / window)")
    if any(p.goodput_rps is not None for p in pts):
        ax.plot(x, [p.goodput_rps or 0 for p in pts], "^--", color="tab:green", label="goodput req/s")
    ax.set_ylabel("requests / s")
    ax.set_ylim(bottom=0)  # from zero on both axes, so a 2% wobble does not look like a collapse
    # Audio seconds per second lives on its own axis: it is larger by the mean clip length.
    ax2 = ax.twinx()
    ax2.plot(x, [p.audio_seconds_per_s for p in pts], "s:", color="tab:purple", label="audio seconds / s")
    ax2.set_ylabel("audio seconds / s")
    ax2.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_title("Throughput vs load")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    ax2.legend(loc="lower right")
    return fig


def _ttfa_cdf(plt, run: BenchRun):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, p in enumerate(run.points):
        mine = [r for r in run.records if r.point == i and not r.warmup and r.ok]
        ttfa = np.sort([r.t_first_audio - r.t_send for r in mine if r.t_first_audio is not None])
        if ttfa.size:
            ax.step(ttfa, np.arange(1, ttfa.size + 1) / ttfa.size, where="post", label=p.label)
    ax.set_xlabel("time to first audio (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("TTFA distribution")
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def _over_run(plt, samples: list[dict], title: str, left: tuple, right: tuple):
    """Two quantities sampled over the run, one per axis: (axis label, legend label, value of a sample)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    t = [s["t"] for s in samples]
    ax.plot(t, [left[2](s) for s in samples], label=left[1])
    ax2 = ax.twinx()
    ax2.plot(t, [right[2](s) for s in samples], color="tab:orange", label=right[1])
    ax.set_xlabel("run time (s)")
    ax.set_ylabel(left[0])
    ax2.set_ylabel(right[0])
    ax.set_title(title)
    ax.legend(loc="upper left")
    ax2.legend(loc="upper right")
    return fig


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
