"""The `ttsperf` command: a thin shell over the library; one module per command."""

from __future__ import annotations

import typer

from ttsperf import __version__

app = typer.Typer(
    name="ttsperf",
    help=(
        "Which GPU, how many, with which settings and at what cost to serve ChatTTS - measured.\n\n"
        "Examples:\n\n"
        "  ttsperf info --config chattts\n\n"
        "  ttsperf synth '你好，世界。' -o out.wav --synthetic\n\n"
        "  ttsperf serve --synthetic --config tiny --port 8080\n\n"
        "  ttsperf assets make-random ./asset --config tiny --seed 0\n\n"
        "  ttsperf demo --quick"
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ttsperf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """ttsperf: measure ChatTTS on a device, load-test a TTS server, plan GPUs and cost."""


# Each command module registers itself; import order is the order of `--help`.
from ttsperf.cli import (  # noqa: E402
    assets,
    bench,
    demo,
    doctor,
    export,
    info,
    plan,
    profile,
    report,
    serve,
    synth,
)

for _module in (info, synth, serve, assets, profile, bench, plan, doctor, export, report, demo):
    _module.register(app)
