"""Ctrl-C (SIGINT) while bench runs: the first stops the load and keeps what was measured; a second
ends at once.

bench takes SIGINT itself instead of leaving it to `asyncio.run`, because `asyncio.run` only takes
it where it finds Python's default handler. A process started in the background by a shell without
job control (`ttsperf bench ... &` in a script, or a test runner started that way) inherits SIGINT
*ignored*; Python keeps it ignored, `asyncio.run` then leaves it alone, and `kill -INT` did
nothing: the run went on to its last request (issue 35: a test waited more than 30 s for a run of
1,000 requests to notice). bench's contract is that SIGINT stops it with its results, so its
handler replaces an inherited "ignore" as well.

    ctrl_c = CtrlC()
    with ctrl_c:                       # before the load: a Ctrl-C raises KeyboardInterrupt
        ctrl_c.stop_with(callback)     # while the load runs: the callback stops it instead
        ctrl_c.hold()                  # writing results: a first Ctrl-C is counted, writing goes on
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

SECOND_CTRL_C = b"bench: second Ctrl-C: stopped at once\n"


class CtrlC:
    """SIGINT for the length of a `with` block (nested blocks share it). Main thread only: elsewhere
    a handler cannot be set and Python's own handling stays.

    exit_on_second: a second Ctrl-C ends the process (the `ttsperf bench` command, which owns
    nothing that must be cleaned up); otherwise it raises KeyboardInterrupt, so that a caller's own
    clean-up (the demo stops the server it started) still runs."""

    def __init__(self, exit_on_second: bool = False) -> None:
        self.exit_on_second = exit_on_second
        self.pressed = 0
        self._stop: Callable[[], None] | None = None
        self._hold = False
        self._depth = 0
        self._previous: object = None

    def __enter__(self) -> CtrlC:
        if self._depth == 0 and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
            self._previous = None

    def stop_with(self, stop: Callable[[], None] | None) -> None:
        """While the load runs, a first Ctrl-C calls `stop` (it runs inside the signal handler, so it
        must only schedule the stop) instead of raising KeyboardInterrupt at whatever line runs."""
        self._stop = stop

    def hold(self) -> None:
        """The load is over: a first Ctrl-C from here is counted and raises nothing, since writing
        the results (about a second) is what the user stopped the run for."""
        self._stop, self._hold = None, True

    def _on_sigint(self, signum: int, frame: object) -> None:
        self.pressed += 1
        if self.pressed > 1:
            if self.exit_on_second:
                # The user asked twice: nothing left is worth waiting for (a telemetry join, a chart,
                # a slow disk). os._exit: no clean-up that could itself block.
                os.write(2, SECOND_CTRL_C)
                os._exit(130)
            raise KeyboardInterrupt
        if self._stop is not None:
            self._stop()
        elif not self._hold:
            raise KeyboardInterrupt
