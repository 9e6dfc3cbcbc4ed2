"""A front's side of the engine: it starts the core process (engine/core.py) and talks to it over
one pipe (engine/wire.py). Torch-free: an HTTP front that imports this never loads torch, and its
event loop never shares a GIL with the loop that drives the device.

    client = EngineClient(CoreSpec(ModelSpec(synthetic=True, config="tiny"))).start()
    handle = client.submit(SynthRequest("你好。"), asyncio.get_running_loop())
    event = await handle.next_event()     # Accepted | Rejected, then PcmChunk*, then the end

One reader thread waits on the pipe and on the process itself. Each message from the core (one
per engine turn) wakes the event loop once, whatever the number of chunks in it. If the core
process dies (a crash, kill -9, the OOM killer), every request in flight is answered at once with
an 'engine_died' SynthError that says so (503), `ready` turns false and `on_death` is called: serve exits
non-zero rather than hang.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import itertools
import logging
import multiprocessing
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, wait

from ttsperf.engine.types import (
    Accepted,
    FrontEvent,
    NotAccepting,
    PcmChunk,
    Rejected,
    SynthError,
    SynthRequest,
)
from ttsperf.engine.wire import CoreSpec, dumps, loads
from ttsperf.errors import UserError

log = logging.getLogger("ttsperf.engine")


class EngineDied(Exception):
    """The core process is gone: nothing it held can be answered by it any more."""


def _core_main(conn: Connection, spec: CoreSpec) -> None:
    # Runs in the child only: imported by name there, so that this module (the front's) never
    # imports torch, not even indirectly.
    importlib.import_module("ttsperf.engine.core").main(conn, spec)


class FrontHandle:
    """One request as a front sees it: its events in order (Accepted or Rejected first)."""

    def __init__(self, client: EngineClient, front_id: int, request: SynthRequest, loop):
        self.id, self.request = front_id, request
        self._client, self._loop = client, loop
        self._events: asyncio.Queue[FrontEvent] = asyncio.Queue()
        self.cancelled = False

    async def next_event(self) -> FrontEvent:
        return await self._events.get()

    def cancel(self) -> None:
        """Free its row at the engine's next step (a client that went away); a no-op once answered."""
        if not self.cancelled and self._client.holds(self.id):
            self.cancelled = True
            self._client.send(("cancel", self.id))


class EngineClient:
    def __init__(self, spec: CoreSpec, start_method: str = "spawn"):
        self.spec = spec
        self._ctx = multiprocessing.get_context(start_method)
        self._conn: Connection | None = None
        self._proc = None
        self._ids = itertools.count(1)
        self._handles: dict[int, FrontHandle] = {}
        self._calls: dict[int, concurrent.futures.Future] = {}
        self._send_lock = threading.Lock()
        self._stopping = False
        self._stopped = threading.Event()
        self.dead: str | None = None  # why the core died, once it has
        self.built: dict = {}  # what the core said once its slots were allocated (max_batch)
        self.info: dict = {}  # what the core said when it was ready (describe)
        self.on_death: list[Callable[[str], None]] = []

    # ------------------------------------------------------------------ life

    def start(self, timeout: float | None = None) -> EngineClient:
        """Start the core and wait until it is loaded and warm; raise UserError if it cannot start."""
        return self.launch().wait_built(timeout).wait_ready(timeout)

    def launch(self) -> EngineClient:
        """Start the core process; it loads the model, allocates its KV slots, then warms up."""
        ours, theirs = self._ctx.Pipe(duplex=True)
        self._proc = self._ctx.Process(
            target=_core_main, args=(theirs, self.spec), name="ttsperf-engine-core"
        )
        self._proc.start()
        theirs.close()
        self._conn = ours
        return self

    def wait_built(self, timeout: float | None = None) -> EngineClient:
        """Wait until the core has allocated its KV slots (`built`: its max batch), before its
        warm-up: engines sharing a device start one after another up to here, so each sizes and
        checks its slots against the memory the ones before it left (engine/pool.py)."""
        self.built = self._expect("built", timeout)
        return self

    def wait_ready(self, timeout: float | None = None) -> EngineClient:
        """Wait until the core is warm and admitting; then read its messages on a thread."""
        self.info = self._expect("ready", timeout)
        threading.Thread(target=self._read, name="ttsperf-engine-reader", daemon=True).start()
        return self

    def _expect(self, kind: str, timeout: float | None) -> dict:
        """The core's next message, which must be `kind`; else UserError saying why it could not start."""
        assert self._conn is not None and self._proc is not None
        ours = self._conn
        ready = wait([ours, self._proc.sentinel], timeout)
        message = loads(ours.recv_bytes()) if ours in ready and ours.poll() else None
        if message is None or message[0] != kind:
            why = message[1] if message else f"exited with code {self._proc.exitcode}"
            if message is None and self._proc.exitcode is None:
                why = f"not {kind} within {timeout:g} s"
                self._proc.kill()
            self._proc.join(5)
            if message is not None and message[0] == "refused":  # a setting, named by its flag
                raise UserError(why)
            raise UserError(f"the engine could not start: {why}")
        return message[1]

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def outstanding(self) -> int:
        """Requests sent and not yet answered to the end (engine/pool.py sends to the fewest)."""
        return len(self._handles)

    @property
    def ready(self) -> bool:
        """Admitting: the core is alive and was not told to stop."""
        return self.dead is None and not self._stopping and self._proc is not None and self._proc.is_alive()

    def stop(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop admitting; with drain, the core answers everything accepted first, else it answers
        the rest 'shutdown'. Returns once the core process has exited (or `timeout` + 5 s)."""
        if self._proc is None or self._stopped.is_set():
            return
        self._stopping = True
        if self.dead is None:
            try:
                self.send(("stop", drain, timeout))
            except (OSError, EOFError):
                pass
        self._stopped.wait(None if timeout is None else timeout + 5)
        self._proc.join(5)
        self.kill()

    def kill(self) -> None:
        """End the core at once if it still runs (it would not stop, or another engine could not start)."""
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)

    # ------------------------------------------------------------------ requests

    def submit(self, request: SynthRequest, loop: asyncio.AbstractEventLoop) -> FrontHandle:
        """Send a request; its events arrive on `loop`. Raises NotAccepting once stopping or dead."""
        if not self.ready:
            raise NotAccepting("the engine is draining or stopped")
        handle = FrontHandle(self, next(self._ids), request, loop)
        self._handles[handle.id] = handle
        self.send(("submit", handle.id, request))
        return handle

    def holds(self, front_id: int) -> bool:
        return front_id in self._handles

    async def call(self, name: str) -> dict:
        """Ask the core: "status" (/readyz), "describe" (/healthz) or "metrics". Raises EngineDied."""
        return await asyncio.wrap_future(self._call(name))

    def call_blocking(self, name: str, timeout: float = 30.0) -> dict:
        return self._call(name).result(timeout)

    def _call(self, name: str) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self.dead is not None or self._stopped.is_set():
            future.set_exception(EngineDied(self.dead or "the engine was stopped"))
            return future
        token = next(self._ids)
        self._calls[token] = future
        self.send(("call", token, name))
        return future

    def send(self, message: tuple) -> None:
        data = dumps(message)
        with self._send_lock:
            assert self._conn is not None
            self._conn.send_bytes(data)

    # ------------------------------------------------------------------ the reader thread

    def _read(self) -> None:
        conn, proc = self._conn, self._proc
        assert conn is not None and proc is not None
        while True:
            try:
                wait([conn, proc.sentinel])
                if not conn.poll():  # the process ended and said nothing more
                    break
                message = loads(conn.recv_bytes())
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "events":
                self._deliver(message[1])
            elif kind == "rejected":
                self._deliver([(message[1], Rejected(message[2]))])
            elif kind == "reply":
                future = self._calls.pop(message[1], None)
                if future is not None:
                    future.set_result(message[2])
            elif kind == "stopped":
                self._stopped.set()
        proc.join(5)
        if not self._stopped.is_set():
            self._died(f"the engine process exited (code {proc.exitcode})")
        self._stopped.set()

    def _deliver(self, batch: list[tuple[int, object]]) -> None:
        """Hand each event to its request: a request's last event forgets it."""
        items = []
        for front_id, event in batch:
            handle = self._handles.get(front_id)
            if handle is None:
                continue
            if not isinstance(event, PcmChunk | Accepted):  # its last event
                self._handles.pop(front_id, None)
            items.append((handle, event))
        _wake(items)

    def _died(self, why: str) -> None:
        self.dead = why
        log.error("%s: answering %d requests in flight with an error", why, len(self._handles))
        handles, self._handles = self._handles, {}
        _wake([(handle, SynthError("engine_died", why)) for handle in handles.values()])
        calls, self._calls = self._calls, {}
        for future in calls.values():
            future.set_exception(EngineDied(why))
        for callback in self.on_death:
            callback(why)


def _wake(items: list[tuple[FrontHandle, object]]) -> None:
    """Put events on their requests' loops: one wake-up per loop for the whole batch."""
    by_loop: dict[asyncio.AbstractEventLoop, list] = {}
    for handle, event in items:
        by_loop.setdefault(handle._loop, []).append((handle, event))
    for loop, mine in by_loop.items():
        try:
            loop.call_soon_threadsafe(_put_all, mine)
        except RuntimeError:  # that loop is closed: nobody listens there any more
            pass


def _put_all(items: list[tuple[FrontHandle, object]]) -> None:
    for handle, event in items:
        handle._events.put_nowait(event)
