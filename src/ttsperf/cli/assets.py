"""`ttsperf assets make-random`: an official-layout asset dir with random weights."""

from __future__ import annotations

from pathlib import Path

import typer

from ttsperf.cli.common import user_errors

assets_app = typer.Typer(help="Asset directories in the official ChatTTS layout.", no_args_is_help=True)


@assets_app.command("make-random")
@user_errors
def make_random(
    directory: Path = typer.Argument(..., help="Where to write the asset dir."),
    config: str = typer.Option("tiny", "--config", help="tiny or chattts (1.1 GB of fp32 weights)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
    force: bool = typer.Option(False, "--force", help="Write over a directory that is not empty."),
) -> None:
    """Write random weights of the config's shapes in the official layout (safetensors only).

    Example: ttsperf assets make-random ./asset --config tiny --seed 0
    """
    from ttsperf.model.assets import make_random_assets

    root = make_random_assets(directory, config, seed, force=force)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    typer.echo(f"wrote {root} ({size / 1e6:.1f} MB, config {config}, seed {seed})")


def register(app: typer.Typer) -> None:
    app.add_typer(assets_app, name="assets")
