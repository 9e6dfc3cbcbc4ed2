"""The `ttsperf` command: a thin shell over the library; one module per command."""

from __future__ import annotations

import typer

from ttsperf import __version__


def _wrap_help_at_spaces() -> None:
    """click wraps help with textwrap, which also breaks after a hyphen: "--max-" / "batch 8",
    "[default: no-" / "cudnn-benchmark]", a flag nobody can copy whole. Every help screen is built
    here, so its wrapper breaks at spaces only (tests/test_cli.py holds each screen to 80 columns)."""
    import importlib

    for name in ("typer._click._textwrap", "click._textwrap"):  # typer 0.2x carries its own click
        try:
            _textwrap = importlib.import_module(name)  # wrap_text looks the class up at each call
            break
        except ImportError:
            continue
    else:
        return  # another layout: the help still prints, and the 80-column test says what broke
    base = _textwrap.TextWrapper
    if getattr(base, "whole_words", False):
        return

    class WholeWords(base):  # type: ignore[misc, valid-type]
        whole_words = True

        def __init__(self, *args, **kwargs) -> None:
            kwargs.setdefault("break_on_hyphens", False)
            super().__init__(*args, **kwargs)

    _textwrap.TextWrapper = WholeWords


_wrap_help_at_spaces()

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
