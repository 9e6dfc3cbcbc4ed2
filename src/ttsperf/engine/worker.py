"""The one thread that owns the model and the device: it waits for work, runs the scheduler's
turns (admit, then one step), and on stop either drains — answers everything accepted first — or
answers what is left 'shutdown'. A bug in a turn answers the running rows 'internal' and goes on:
no request is left unanswered."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ttsperf.engine.engine import Engine


class Worker:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.thread = threading.Thread(target=self._run, name="ttsperf-engine", daemon=True)

    def _run(self) -> None:
        e, queue = self.engine, self.engine.queue
        with e._contexts():
            while queue.wait_for_work(e.running()):
                try:
                    e._turn()
                except Exception as exc:  # noqa: BLE001 - a bug must not leave requests unanswered
                    for handle in e.table.handles():
                        e.replies.fail(handle, "internal", f"{type(exc).__name__}: {exc}")
                    e._keep(0)
                e.after_turn()
        with queue.lock:  # stopped without drain: everything left is answered, not dropped
            left = queue.clear() + e.table.handles()
            e.table.truncate(0)
        for handle in left:
            e.replies.fail(handle, "shutdown", "the server is shutting down")
        e.after_turn()

    def stop(self, drain: bool, timeout: float | None) -> None:
        """Stop admitting; with drain, answer everything accepted first, else fail it (shutdown)."""
        queue = self.engine.queue
        queue.close(stop=not drain)
        if drain:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.engine.pending() and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.01)
            queue.close(stop=True)
        if self.thread.is_alive():
            self.thread.join(timeout)
