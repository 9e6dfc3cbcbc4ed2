"""What every command shares: turning a UserError into one clear line and exit code 2."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from ttsperf.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(func: F) -> F:
    """Print a UserError as `error: ...` on stderr and exit 2 (bad input never shows a traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def write_json(path: Path, obj: Any) -> None:
    """A result file, its directory made if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False))


def out_path(path: Path, flag: str = "-o") -> Path:
    """An output file's folder made now, before any work: a path through a file, or one that
    cannot be made, is one line naming the flag."""
    for parent in (path.parent, *path.parent.parents):
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{flag} {path}: {parent} is a file, not a folder")
            break
    if path.is_dir():
        raise UserError(f"{flag} {path}: is a folder; expected a file name, e.g. {path / 'out'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"{flag} {path}: cannot make its folder {path.parent} ({exc.strerror or exc})"
        ) from None
    return path


def print_json(obj: Any) -> None:
    """Machine-readable output on stdout, nothing else on that stream."""
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


# The model flags of the commands that are not settings commands (synth, export, doctor) are made
# from ModelSettings' fields in ttsperf.cli.synth; export and doctor default to chattts outright.
CONFIG = typer.Option("chattts", "--config", help="chattts (real sizes) or tiny.")
