"""`ttsperf demo`: the main job on embedded defaults, on this machine.

For now (foundation): synthesize the guide's sentence with synthetic full-size ChatTTS weights on
the local device and report where the WAV is and how long it took. Later stages (server, bench,
profile, plan, report) join here as they land.
"""

from __future__ import annotations

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
    """Run the whole job with embedded defaults: synthetic ChatTTS on this device.

    Example: ttsperf demo --quick -o runs/demo
    """
    import torch
    from rich.progress import Progress

    from ttsperf.audio import write_wav
    from ttsperf.model.config import get_config
    from ttsperf.model.pipeline import Pipeline

    cfg = get_config(config)
    t0 = time.perf_counter()
    with Progress(disable=as_json) as progress:
        load = progress.add_task(f"building synthetic {config} weights", total=1)
        pipe = Pipeline.synthetic_model(cfg, seed=0, device=device)
        progress.update(load, completed=1)
        load_seconds = time.perf_counter() - t0
        task = progress.add_task("synthesizing the guide's sentence", total=None)
        result = pipe.synthesize(
            GUIDE_SENTENCE, on_step=lambda done, total: progress.update(task, completed=done, total=total)
        )
    wav = write_wav(out_dir / "demo.wav", result.wav, result.sample_rate)
    summary = {
        "wav": str(wav),
        "text": GUIDE_SENTENCE,
        "config": config,
        "weights": "synthetic (random values, real shapes, seed 0)",
        "device": device,
        "threads": torch.get_num_threads(),
        "quick": quick,
        "load_seconds": round(load_seconds, 2),
        "audio_seconds": round(result.audio_seconds, 3),
        "steps": result.steps,
        "synth_seconds": round(result.wall_seconds, 2),
        "rtf": round(result.rtf, 3),
        "length_source": result.length_source,
    }
    if as_json:
        print_json(summary)
        return
    typer.echo(
        f"wrote {wav}: {summary['audio_seconds']:.2f} s of audio ({result.steps} steps, length from "
        f"{result.length_source}) in {summary['synth_seconds']:.1f} s, RTF {summary['rtf']:.2f} "
        f"(synthetic {config} on {device}, {summary['threads']} threads; weights built in "
        f"{summary['load_seconds']:.1f} s)"
    )


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
