"""The CLI shell: version, and an example in every command's --help."""

from __future__ import annotations

import re

import pytest
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
