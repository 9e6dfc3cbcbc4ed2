"""`ttsperf demo`: the main job on embedded defaults, on this machine.

Stages, each with its own progress line: synthesize the guide's sentence with synthetic
full-size ChatTTS, profile the model on this device, plan GPUs and cost from the profile while
`ttsperf serve` starts on loopback beside it, then load-test that server alone (`ttsperf bench`,
streaming, a short concurrency sweep). Every result lands in the output folder (WAV,
profile.json, bench/, plan.json, summary.json) and the report built from them (report.html,
report.md); the output ends with each stage's wall time. Ctrl-C in any stage still writes
summary.json and the report of the stages that finished, then exits 130.
"""

from __future__ import annotations

import json
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from ttsperf.cli.common import print_json, user_errors
from ttsperf.textsets import GUIDE_SENTENCE, TEXT_SETS


@user_errors
def demo(
    out_dir: Path = typer.Option(Path("runs/demo"), "-o", "--out", help="Where results go."),
    quick: bool = typer.Option(False, "--quick", help="The short version (what `make demo` runs)."),
    config: str = typer.Option("chattts", "--config", help="chattts (real sizes) or tiny."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or cuda:N."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Run the whole job with embedded defaults: synthetic ChatTTS on this device, synthesized,
    profiled, planned, served and load-tested, and written up as report.html.

    Example: ttsperf demo --quick -o runs/demo
    """
    import torch

    from ttsperf.console import progress as live_progress
    from ttsperf.model.config import get_config
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.report import write_report

    cfg = get_config(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clear_previous(out_dir)
    summary: dict = {
        "out_dir": str(out_dir),
        "text": GUIDE_SENTENCE,
        "config": config,
        "weights": "synthetic (random values, real shapes, seed 0)",
        "device": device,
        "threads": torch.get_num_threads(),
        "quick": quick,
    }
    d = _Demo(out_dir, quick, config, device, summary)
    result = run = plan = None
    t0 = time.perf_counter()
    try:
        with live_progress(disable=as_json) as progress:
            d.progress, d.stage = progress, "building the model"
            task = progress.add_task(f"1/5 building synthetic {config} weights", total=1)
            pipe = Pipeline.synthetic_model(cfg, seed=0, device=device)
            progress.update(task, completed=1)
            summary["build_seconds"] = time.perf_counter() - t0
            result = _synthesize(d, pipe)
            profile_path = _profile(d, pipe)
            server = _Server(d)  # loads its model while plan runs
            try:
                plan = _plan(d, profile_path)
                run = _bench(d, server)
            finally:
                server.stop()
            d.stage = ""
    except KeyboardInterrupt:
        summary["interrupted"] = f"Ctrl-C during {d.stage}"
    t_report = time.perf_counter()
    summary.setdefault("recommendations", {})
    summary["report"] = str(out_dir / "report.html")  # written next, from the files listed above
    summary = {
        k: round(v, 2) if k.endswith("_seconds") and k != "audio_seconds" else v for k, v in summary.items()
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    d.written.append(out_dir / "summary.json")
    report = write_report(d.written, out_dir / "report.html")
    stages = _stage_times(summary, time.perf_counter() - t_report, time.perf_counter() - t0)
    if as_json:
        print_json(summary)
    else:
        _print_results(summary, result, run, plan, config, device)
    print_fn = (lambda m: typer.echo(m, err=True)) if as_json else typer.echo
    if as_json or plan is None:  # else the plan's answers were printed first in its output
        print_fn(f"\nrecommendation: {report.report.recommendation}")
    print_fn(f"report: {report.html} (and {report.markdown})")
    print_fn(stages)
    if "interrupted" in summary:
        print_fn(f"interrupted ({summary['interrupted']}): the report covers the stages that finished")
        raise typer.Exit(130)


@dataclass
class _Demo:
    """One demo run: where it writes, what it has written (the report is built from it), its
    summary, and the stage it is in (named if Ctrl-C stops it)."""

    out_dir: Path
    quick: bool
    config: str
    device: str
    summary: dict
    written: list[Path] = field(default_factory=list)
    progress: Any = None
    stage: str = "starting"


def _synthesize(d: _Demo, pipe):
    from ttsperf.audio import write_wav

    d.stage = "synthesis"
    task = d.progress.add_task("2/5 synthesizing the guide's sentence", total=None)
    result = pipe.synthesize(
        GUIDE_SENTENCE, on_step=lambda done, total: d.progress.update(task, completed=done, total=total)
    )
    wav = write_wav(d.out_dir / "demo.wav", result.wav, result.sample_rate)
    d.summary.update(
        wav=str(wav),
        audio_seconds=round(result.audio_seconds, 3),
        steps=result.steps,
        rtf=round(result.rtf, 3),
        length_source=result.length_source,
        synth_seconds=result.wall_seconds,
    )
    return result


def _profile(d: _Demo, pipe) -> Path:
    from ttsperf.profile.measure import profile_model

    d.stage = "profile"
    t1 = time.perf_counter()
    task = d.progress.add_task("3/5 profiling this device", total=None)
    grid = ([1, 4], [64, 512], [16, 64], 3) if d.quick else ([1, 4, 16], [64, 512, 2048], [16, 64, 256], 10)
    prof = profile_model(
        pipe, batches=grid[0], contexts=grid[1], prompts=grid[2], repeats=grid[3],
        warmup=1 if d.quick else 3,
        progress=lambda msg: d.progress.update(task, description=f"3/5 profiling: {msg}"),
    )  # fmt: skip
    profile_path = d.out_dir / "profile.json"
    profile_path.write_text(json.dumps(prof.dump(), indent=2))
    d.written.append(profile_path)
    d.summary.update(profile=str(profile_path), profile_seconds=time.perf_counter() - t1)
    return profile_path


def _sweep(d: _Demo) -> tuple[list[int], int]:
    """Concurrency points and measured requests per point. Six is the fewest for which bench puts a
    95% interval on P50 (order statistics: n >= 6), the quick demo's one percentile with one; the
    full demo's 30 bound P90 too (n >= 29). At concurrency 1 the requests run one after another, so
    each one more costs a request's time (see _bench_text_set)."""
    return ([1, 4], 6) if d.quick else ([1, 4, 16], 30)


def _bench_text_set(d: _Demo) -> str:
    """What bench sends: the guide's sentence in the full demo. The quick demo shows that the server
    batches across requests (concurrency 4 against 1) and a P50 with its interval, which any text
    shows: it sends zh-short's one-line turns (1.0-2.5 s of speech, where the guide's sentence has
    3.7 s; at the chattts size on 2 CPU threads a request took ~12 s, most of make demo's time)."""
    return "zh-short" if d.quick else "guide"


class _Server:
    """`ttsperf serve` for the bench stage, started before plan: it loads its model and answers one
    warm-up request in a thread while plan runs. Neither times anything (plan computes; a server's
    start is not measured), so they can share the CPU; bench then runs alone. The warm-up is the
    one bench would send before each point: the server stays warm between points, so once is enough."""

    def __init__(self, d: _Demo) -> None:
        from ttsperf.cli.demo_serving import launch_server

        d.stage = "serving and load-testing"
        self.log = d.out_dir / "server.log"
        self.text_set = _bench_text_set(d)
        self.proc, self.url = launch_server(d.config, d.device, max(_sweep(d)[0]), self.log)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._ready, daemon=True)
        self.thread.start()

    def _ready(self) -> None:
        from ttsperf.cli.demo_serving import wait_ready, warm_up

        try:
            wait_ready(self.proc, self.url, self.log)
            warm_up(self.url, TEXT_SETS[self.text_set][0])
        except Exception as exc:  # noqa: BLE001 - raised again in the main thread by wait()
            self.error = exc

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        from ttsperf.cli.demo_serving import stop_server

        stop_server(self.proc)


def _bench(d: _Demo, server: _Server):
    from ttsperf.cli.demo_serving import bench_server

    d.stage = "serving and load-testing"
    task = d.progress.add_task("5/5 load-testing the server", total=None)
    t_wait = time.perf_counter()
    server.wait()
    t_bench = time.perf_counter()
    sweep, per_point = _sweep(d)
    run = bench_server(
        server.url, server.proc.pid, sweep, per_point, d.out_dir / "bench", server.text_set, warmup=0,
        progress=lambda label, *_: d.progress.update(task, description=f"5/5 bench: {label}"),
    )  # fmt: skip
    d.written.append(d.out_dir / "bench" / "run.json")
    d.summary.update(
        bench=str(d.out_dir / "bench"),
        server_wait_seconds=t_bench - t_wait,  # what the server's start and warm-up added after plan
        bench_seconds=time.perf_counter() - t_bench,
        bench_points=[
            {
                "load": p.label,
                "throughput_rps": p.throughput_rps,
                "audio_seconds_per_s": p.audio_seconds_per_s,
            }
            for p in run.points
        ],
    )
    if run.interrupted:  # bench keeps what finished when Ctrl-C arrives; the demo stops here
        raise KeyboardInterrupt
    return run


def _plan(d: _Demo, profile_path: Path):
    from ttsperf.plan.api import make_plan

    d.stage = "plan"
    t2 = time.perf_counter()
    task = d.progress.add_task("4/5 planning GPUs and cost (the server starts)", total=None)
    plan = make_plan(
        profile=[str(profile_path)],
        progress=lambda msg: d.progress.update(task, description=f"4/5 planning: {msg}"),
    )
    plan_path = d.out_dir / "plan.json"
    plan_path.write_text(json.dumps(plan.model_dump(mode="json", by_alias=True), indent=2))
    d.written.append(plan_path)
    d.summary.update(
        plan=str(plan_path),
        plan_seconds=time.perf_counter() - t2,
        recommendations={sc.scenario: sc.recommendation for sc in plan.scenarios},
    )
    return plan


# What a previous demo left in the folder: removed first, so the report never mixes two runs.
PREVIOUS = (
    "profile.json",
    "plan.json",
    "summary.json",
    "report.html",
    "report.md",
    "demo.wav",
    "bench/run.json",
    "bench/requests.csv",
)


def _clear_previous(out_dir: Path) -> None:
    for name in PREVIOUS:
        (out_dir / name).unlink(missing_ok=True)


def _print_results(summary: dict, result, run, plan, config: str, device: str) -> None:
    from ttsperf.bench.display import render as render_bench
    from ttsperf.cli.plan import render
    from ttsperf.console import console as wide_console

    console = wide_console()
    if plan is not None:  # the answer first (the plan prints it above its tables)
        render(plan, console, None)
    if run is not None:
        render_bench(run, console)
    if result is not None:
        console.print(
            f"\nwrote {summary['wav']}: {summary['audio_seconds']:.2f} s of audio ({result.steps} steps, "
            "length "
            f"from {result.length_source}) in {result.wall_seconds:.1f} s, RTF {summary['rtf']:.2f} "
            f"(synthetic {config} on {device}, {summary['threads']} threads)"
        )
    files = ("profile", "bench", "plan")
    console.print(
        "   ".join(f"{k}: {summary[k]}" for k in files if k in summary)
        + f"   summary: {Path(summary['out_dir']) / 'summary.json'}"
    )


# summary.json's stage times, in the order they ran, with the names the output gives them
STAGES = (
    ("build", "build_seconds"),
    ("synthesis", "synth_seconds"),
    ("profile", "profile_seconds"),
    ("plan (the server starting beside it)", "plan_seconds"),
    ("server start after plan", "server_wait_seconds"),
    ("bench", "bench_seconds"),
)


def _stage_times(summary: dict, report_s: float, total_s: float) -> str:
    """Where the demo's wall time went, stage by stage, within 80 columns. summary.json holds the
    stages' times; the report is written after it (from it), so its time and the total are printed
    only. The total runs from the model's build to the report written (not Python's start-up)."""
    parts = [f"{name} {summary[key]:.1f} s" for name, key in STAGES if key in summary]
    parts.append(f"report {report_s:.1f} s")
    line = "wall time: " + ", ".join(parts) + f"; total {total_s:.1f} s"
    return "\n".join(textwrap.wrap(line, 80, subsequent_indent="  "))


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
