"""Where tables are printed: a terminal gets its own width; a pipe or a CI log gets one wide
enough that no table is cut to 80 columns with "…" (rich's default when it cannot ask a terminal).
`COLUMNS` set by the user wins either way. Progress: live bars on a terminal, whole lines in a pipe.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console

PIPE_WIDTH = 1000  # wider than any table prints: rich does not pad a table to the console width


def console(stderr: bool = False) -> Console:
    probe = Console(stderr=stderr)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(stderr=stderr, width=PIPE_WIDTH)


def progress(*columns: Any, disable: bool = False, transient: bool = False) -> Any:
    """rich's Progress on a terminal. Through a pipe (`make demo | tee log`, CI) rich draws each
    bar once, at the end, cut to the width ("0:0…"), so a pipe gets `Lines` instead: a task's
    description as a whole line when it starts or changes, no bar; a transient task (gone when
    done on a terminal) prints nothing."""
    from rich.progress import Progress

    if disable or Console().is_terminal:
        return Progress(*columns, disable=disable, transient=transient)
    return Lines(quiet=transient)


class Lines:
    """The part of rich's Progress the commands use (add_task, update), as whole lines."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.said: dict[int, str] = {}

    def __enter__(self) -> Lines:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, **_: Any) -> int:
        task = len(self.said)
        self.said[task] = ""
        self.update(task, description=description)
        return task

    def update(self, task: int, description: str | None = None, **_: Any) -> None:
        if description is None or description == self.said[task]:
            return
        self.said[task] = description
        if not self.quiet:
            print(description, file=sys.stdout, flush=True)
