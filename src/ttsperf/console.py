"""Where tables are printed: a terminal gets its own width; a pipe or a CI log gets one wide
enough that no table is cut to 80 columns with "…" (rich's default when it cannot ask a terminal).
`COLUMNS` set by the user wins either way."""

from __future__ import annotations

import os

from rich.console import Console

PIPE_WIDTH = 1000  # wider than any table prints: rich does not pad a table to the console width


def console(stderr: bool = False) -> Console:
    probe = Console(stderr=stderr)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(stderr=stderr, width=PIPE_WIDTH)
