"""The CLI shell: version, an example in every command's --help, and every help screen within 80
columns."""

from __future__ import annotations

import re

import pytest
import typer
from rich.cells import cell_len
from typer.testing import CliRunner

from ttsperf import __version__
from ttsperf.cli.main import app

runner = CliRunner()


def test_version():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"ttsperf {__version__}"


def _commands() -> list[list[str]]:
    top = runner.invoke(app, ["--help"]).output
    names = re.findall(r"^\s{2}(\w[\w-]*)\s", top.split("Commands:")[1], flags=re.M)
    return [["assets", "make-random"] if n == "assets" else [n] for n in names]


def test_every_command_is_listed():
    assert {c[0] for c in _commands()} >= {"info", "synth", "assets", "demo"}


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c))
def test_help_shows_an_example(command):
    res = runner.invoke(app, [*command, "--help"])
    assert res.exit_code == 0
    assert "Example" in res.output and f"ttsperf {' '.join(command)}" in res.output


def _every_screen() -> list[list[str]]:
    """Every command and group, sub-commands included, walked from the app (a new one is found
    without a list to keep)."""
    out: list[list[str]] = []

    def walk(cmd, path: list[str]) -> None:
        out.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


@pytest.mark.parametrize("command", _every_screen(), ids=lambda c: " ".join(c) or "ttsperf")
def test_help_fits_80_columns(command):
    """Measured in display columns (a CJK character takes two), and no word broken at a hyphen:
    "--max-" / "batch 8" is a flag nobody can copy whole."""
    res = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert [ln for ln in lines if cell_len(ln) > 80] == []
    assert [ln for ln in lines if re.search(r"\S-$", ln)] == []
