"""`ttsperf synth`: one text -> one WAV, with audio seconds, steps, wall seconds and RTF."""

from __future__ import annotations

from pathlib import Path

import typer

from ttsperf.cli.common import print_json, user_errors
from ttsperf.cli.options import option
from ttsperf.model.settings import ModelSettings

# the model flags of synth, export and doctor: ModelSettings' fields, as serve and profile take them
ASSETS, SYNTHETIC, MODEL_CONFIG, DEVICE, DTYPE = (
    option(ModelSettings, n) for n in ("assets", "synthetic", "config", "device", "dtype")
)


def _check_sampling(temperature: float, top_p: float, top_k: int, max_new_tokens: int) -> None:
    """Each sampling flag in its range, named, before a model is loaded (issue 35)."""
    from ttsperf.errors import UserError
    from ttsperf.settings import at_most

    if not 1 <= max_new_tokens:
        raise UserError(f"--max-new-tokens {max_new_tokens}: expected at least 1 step")
    # 32,768 steps is 11.7 minutes of audio, 8x ChatTTS's 4,096 positions
    at_most("--max-new-tokens", max_new_tokens, 32_768, "steps")
    if top_k < 1:
        raise UserError(f"--top-k {top_k}: expected at least 1 (1 = greedy)")
    if not 0 < top_p <= 1:
        raise UserError(f"--top-p {top_p:g}: expected a probability in (0, 1], e.g. 0.7")
    if not 0 <= temperature <= 100:
        raise UserError(f"--temperature {temperature:g}: expected 0 (greedy) to 100, e.g. 0.3")


@user_errors
def synth(
    text: str = typer.Argument(..., help="The text to speak."),
    out: Path = typer.Option(Path("out.wav"), "-o", "--out", help="Where to write the WAV."),
    assets: Path | None = ASSETS,
    synthetic: bool = SYNTHETIC,
    config: str | None = MODEL_CONFIG,
    device: str = DEVICE,
    dtype: str = DTYPE,
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic weights and of sampling."),
    temperature: float = typer.Option(0.3, "--temperature"),
    top_p: float = typer.Option(0.7, "--top-p"),
    top_k: int = typer.Option(20, "--top-k", help="1 = greedy."),
    max_new_tokens: int = typer.Option(2048, "--max-new-tokens", help="2048 steps = 43.7 s of audio."),
    fixed_length: bool = typer.Option(
        False,
        "--fixed-length",
        help="Length from the speech-rate model, not EOS (always on for --synthetic).",
    ),
    decoder: str = typer.Option("decoder", "--mel", help="decoder (hidden states, default) or dvae (codes)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Synthesize TEXT into a WAV and report audio seconds, steps, wall seconds and RTF.

    \b
    Example:
      ttsperf synth '你好，这是一段用于压测的文本。' -o out.wav \\
          --synthetic --config chattts
    """
    import torch

    from ttsperf.audio import write_wav
    from ttsperf.console import progress as progress_lines
    from ttsperf.errors import UserError
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.sampling import SamplingParams
    from ttsperf.model.spec import ModelSpec

    if not text.strip():
        raise UserError("TEXT is empty: expected something to say")
    if decoder not in ("decoder", "dvae"):
        raise UserError(f"--mel {decoder!r}: expected decoder or dvae")
    _check_sampling(temperature, top_p, top_k, max_new_tokens)
    pipe = Pipeline.from_spec(ModelSpec(assets, synthetic, config, device, dtype, seed))
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    with progress_lines(transient=True, disable=as_json) as progress:
        task = progress.add_task("decoding", total=None)
        result = pipe.synthesize(
            text,
            params,
            max_new_tokens=max_new_tokens,
            fixed_length=fixed_length,
            use_decoder=decoder == "decoder",
            on_step=lambda done, total: progress.update(task, completed=done, total=total),
        )
    path = write_wav(out, result.wav, result.sample_rate)
    report = {
        "wav": str(path),
        "audio_seconds": round(result.audio_seconds, 4),
        "steps": result.steps,
        "wall_seconds": round(result.wall_seconds, 4),
        "rtf": round(result.rtf, 4),
        "length_source": result.length_source,
        "config": pipe.cfg.name,
        "weights": "synthetic" if synthetic else str(assets),
        "device": device,
        "dtype": dtype,
        "threads": torch.get_num_threads(),
        **{k: round(v, 4) for k, v in result.timings.items()},
    }
    if as_json:
        print_json(report)
        return
    typer.echo(
        f"wrote {path}: {report['audio_seconds']:.2f} s of audio in {report['wall_seconds']:.2f} s "
        f"(RTF {report['rtf']:.2f}, {result.steps} steps, length from {result.length_source}, "
        f"{dtype} on {device}, {report['threads']} threads)"
    )


def register(app: typer.Typer) -> None:
    app.command("synth")(synth)
