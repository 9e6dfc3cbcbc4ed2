"""`ttsperf demo`: the main job on embedded defaults, on this machine.

Stages, each with its own progress line: synthesize the guide's sentence with synthetic
full-size ChatTTS, profile the model on this device, serve it (`ttsperf serve` on loopback) and
load-test it (`ttsperf bench`, streaming, a short concurrency sweep), plan GPUs and cost from the
profile. Every result lands in the output folder (WAV, profile.json, bench/, plan.json,
summary.json). The HTML report joins here when it lands.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from ttsperf.cli.common import print_json, user_errors

GUIDE_SENTENCE = "你好，这是一段用于压测的文本，长度八秒左右。"


@user_errors
def demo(
    out_dir: Path = typer.Option(Path("runs/demo"), "-o", "--out", help="Where results go."),
    quick: bool = typer.Option(False, "--quick", help="The short version (what `make demo` runs)."),
    config: str = typer.Option("chattts", "--config", help="chattts (real sizes) or tiny."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or cuda:N."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Run the whole job with embedded defaults: synthetic ChatTTS on this device, synthesized,
    profiled and planned.

    Example: ttsperf demo --quick -o runs/demo
    """
    import torch
    from rich.console import Console
    from rich.progress import Progress

    from ttsperf.audio import write_wav
    from ttsperf.bench.display import render as render_bench
    from ttsperf.cli.demo_serving import bench_server, start_server, stop_server
    from ttsperf.cli.plan import render
    from ttsperf.model.config import get_config
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.plan.api import make_plan
    from ttsperf.profile.measure import profile_model

    cfg = get_config(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    stages: dict[str, float] = {}
    t0 = time.perf_counter()
    with Progress(disable=as_json) as progress:
        task = progress.add_task(f"1/5 building synthetic {config} weights", total=1)
        pipe = Pipeline.synthetic_model(cfg, seed=0, device=device)
        progress.update(task, completed=1)
        stages["build_seconds"] = time.perf_counter() - t0

        task = progress.add_task("2/5 synthesizing the guide's sentence", total=None)
        result = pipe.synthesize(
            GUIDE_SENTENCE, on_step=lambda done, total: progress.update(task, completed=done, total=total)
        )
        wav = write_wav(out_dir / "demo.wav", result.wav, result.sample_rate)
        stages["synth_seconds"] = result.wall_seconds

        t1 = time.perf_counter()
        task = progress.add_task("3/5 profiling this device", total=None)
        grid = ([1, 4], [64, 512], [16, 64], 3) if quick else ([1, 4, 16], [64, 512, 2048], [16, 64, 256], 10)
        prof = profile_model(
            pipe, batches=grid[0], contexts=grid[1], prompts=grid[2], repeats=grid[3],
            warmup=1 if quick else 3,
            progress=lambda msg: progress.update(task, description=f"3/5 profiling: {msg}"),
        )  # fmt: skip
        profile_path = out_dir / "profile.json"
        profile_path.write_text(json.dumps(prof.dump(), indent=2))
        stages["profile_seconds"] = time.perf_counter() - t1

        t_bench = time.perf_counter()
        task = progress.add_task("4/5 serving and load-testing", total=None)
        sweep, per_point = ([1, 4], 4) if quick else ([1, 4, 16], 16)
        server, url = start_server(config, device, max(sweep), out_dir / "server.log")
        try:
            run = bench_server(
                url, server.pid, sweep, per_point, out_dir / "bench",
                progress=lambda label, total, rec: progress.update(task, description=f"4/5 bench: {label}"),
            )  # fmt: skip
        finally:
            stop_server(server)
        stages["bench_seconds"] = time.perf_counter() - t_bench

        t2 = time.perf_counter()
        task = progress.add_task("5/5 planning GPUs and cost", total=None)
        plan = make_plan(
            profile=[str(profile_path)],
            progress=lambda msg: progress.update(task, description=f"5/5 planning: {msg}"),
        )
        plan_path = out_dir / "plan.json"
        plan_path.write_text(json.dumps(plan.model_dump(mode="json", by_alias=True), indent=2))
        stages["plan_seconds"] = time.perf_counter() - t2
    summary = {
        "out_dir": str(out_dir),
        "wav": str(wav),
        "profile": str(profile_path),
        "plan": str(plan_path),
        "text": GUIDE_SENTENCE,
        "config": config,
        "weights": "synthetic (random values, real shapes, seed 0)",
        "device": device,
        "threads": torch.get_num_threads(),
        "quick": quick,
        "audio_seconds": round(result.audio_seconds, 3),
        "steps": result.steps,
        "rtf": round(result.rtf, 3),
        "length_source": result.length_source,
        "bench": str(out_dir / "bench"),
        "bench_points": [
            {
                "load": p.label,
                "throughput_rps": p.throughput_rps,
                "audio_seconds_per_s": p.audio_seconds_per_s,
            }
            for p in run.points
        ],
        "recommendations": {sc.scenario: sc.recommendation for sc in plan.scenarios},
        **{k: round(v, 2) for k, v in stages.items()},
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    if as_json:
        print_json(summary)
        return
    console = Console()
    render_bench(run, console)
    render(plan, console, None)
    console.print(
        f"\nwrote {wav}: {summary['audio_seconds']:.2f} s of audio ({result.steps} steps, length from "
        f"{result.length_source}) in {result.wall_seconds:.1f} s, RTF {summary['rtf']:.2f} "
        f"(synthetic {config} on {device}, {summary['threads']} threads)"
    )
    console.print(
        f"profile: {profile_path}   bench: {out_dir / 'bench'}   plan: {plan_path}   "
        f"summary: {out_dir / 'summary.json'}"
    )


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
