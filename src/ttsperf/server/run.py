"""Running the app under uvicorn, with a drain on SIGTERM.

uvicorn's own graceful shutdown closes the listening socket at once: a balancer still sending
traffic gets refused connections, and requests waiting in the engine's queue would be cut off.
Here the first SIGTERM (or Ctrl-C) instead drains: new requests get 503 and /readyz 503 while the
engine answers every request it accepted (engine.stop(drain=True)); only then does uvicorn shut
down, and the process exits 0. A second signal falls back to uvicorn's immediate exit.

Slow clients: uvicorn waits for a request's headers without any limit (its keep-alive timer stops at
the first byte), so a client trickling a byte every few seconds (slow-loris) holds a connection for
ever. `HeaderDeadline` closes a connection whose request headers are not complete `read_timeout`
seconds after it opened or after the request's first byte; the app (read_body) gives the body the
same bound and answers 408. Headers larger than h11's 16 KiB limit get a 400 and the connection
closes. Idle keep-alive connections close after 75 s. uvicorn has no setting for a header
deadline and its h11 protocol class is private, so pyproject.toml bounds uvicorn to the versions the
slow-loris tests passed on.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from types import FrameType

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ttsperf.server.app import DEFAULT_READ_TIMEOUT, ServerState

log = logging.getLogger("ttsperf.server")


MAX_HEADER_BYTES = 16 * 1024  # h11's default, set explicitly: larger headers are refused with 400
KEEP_ALIVE_SECONDS = 75


class _Config(uvicorn.Config):
    def __init__(self, app, *, read_timeout: float, **kw):
        super().__init__(app, **kw)
        self.read_timeout = read_timeout


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline on slow requests: a new connection must complete its
    first request's headers within `read_timeout`, and so must each later request from its first
    byte; a request answered before its body arrived (413 on the declared length, 401) gets the same
    time for the rest, then the connection closes. An idle keep-alive connection (no byte of a next
    request) is left to uvicorn's keep-alive timeout: closing it sooner races clients that reuse it."""

    _deadline: asyncio.TimerHandle | None = None
    _waiting_since: object = None  # the request cycle that was current when the deadline was set

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.cycle is not None and self.cycle.response_complete:
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)

    def on_response_complete(self) -> None:
        if self.conn.their_state is h11.SEND_BODY:  # answered before the body came: bound the rest
            self._arm()
        super().on_response_complete()

    def handle_events(self) -> None:
        super().handle_events()
        if self._deadline is not None and self.cycle is not self._waiting_since:  # a new request
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._waiting_since = self.cycle
        self._deadline = self.loop.call_later(self.config.read_timeout, self._expire)  # type: ignore[attr-defined]

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.cycle is self._waiting_since and not self.transport.is_closing():
            timeout = self.config.read_timeout  # type: ignore[attr-defined]
            log.info("%s: no complete request within %.0f s; closing", self.client, timeout)
            self.transport.close()


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state: ServerState, drain_timeout: float):
        super().__init__(config)
        self.state, self.drain_timeout = state, drain_timeout
        self.url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining = False
        self.failed: str | None = None  # why the engine died under it: serve exits non-zero
        state.engine.on_death.append(self._engine_died)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.servers and self.servers[0].sockets:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            host = f"[{host}]" if ":" in host else host
            self.url = f"http://{host}:{port}"  # the real port, also when --port 0 picked one
            log.info(
                "ttsperf serving on %s (SIGTERM drains: 503 for new requests, the accepted ones answered)",
                self.url,
            )

    def _engine_died(self, why: str) -> None:
        """On the engine client's reader thread: every request in flight has its error already;
        stop serving (an orchestrator restarts the process, /readyz is 503 meanwhile)."""
        self.failed = why
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._exit_failed)

    def _exit_failed(self) -> None:
        log.error("the engine is gone (%s): shutting down", self.failed)
        self.should_exit = True

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining or self._loop is None:
            super().handle_exit(sig, frame)  # second signal: uvicorn's immediate shutdown
            return
        # A signal handler interrupts the loop's own thread: schedule, do not run, the drain.
        self._loop.call_soon_threadsafe(self.begin_drain, signal.Signals(sig).name)

    def begin_drain(self, reason: str = "request") -> None:
        """Stop admitting and drain; call on the server's loop (signals do it via handle_exit)."""
        if self._draining:
            return
        self._draining = True
        assert self._loop is not None
        self._loop.create_task(self._drain(reason))

    async def _drain(self, reason: str) -> None:
        loop = asyncio.get_running_loop()
        state, engine = self.state, self.state.engine
        state.draining = True  # from here on no handler submits (see create_app's start)
        log.info(
            "%s: draining %d accepted requests (up to %.0f s), refusing new ones",
            reason, state.unanswered, self.drain_timeout,
        )  # fmt: skip
        # Wait for the server's own count of unanswered requests rather than only for
        # engine.stop(drain=True): the engine's pending() does not count a request in the middle of
        # its prefill, so it can read 0 while one is still on its way to the batch.
        deadline = loop.time() + self.drain_timeout
        while state.unanswered and loop.time() < deadline:
            await asyncio.sleep(0.02)
        # stop() blocks (joins the worker), so off the loop; past the deadline it answers what is
        # left 'shutdown' (-> 503), and uvicorn then waits for the handlers to send the answers.
        await asyncio.to_thread(engine.stop, True, max(0.1, deadline - loop.time()))
        log.info("drained; shutting down")
        self.should_exit = True


def check_port(host: str, port: int) -> None:
    """Fail fast, before a model is loaded, when host:port cannot be bound (taken, or not an
    address of this machine). Binds as uvicorn will (SO_REUSEADDR: a socket in TIME_WAIT does
    not count) and lets go; port 0 is always free."""
    import socket

    from ttsperf.errors import UserError

    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise UserError(f"--host {host!r}: not an address this machine can bind ({exc.strerror})") from None
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as exc:
            raise UserError(
                f"--port {port}: {host}:{port} cannot be bound ({exc.strerror}); "
                "stop what holds it, or pick another port (0: any free one)"
            ) from None


def make_server(
    app,
    host: str,
    port: int,
    *,
    drain_timeout: float,
    log_level: str = "info",
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> DrainingServer:
    config = _Config(
        app,
        read_timeout=read_timeout,
        host=host,
        port=port,
        log_level=log_level,
        http=HeaderDeadline,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        # Idle keep-alive connections live 75 s (nginx's default), longer than the idle timeout of
        # the clients and balancers that reuse them (aiohttp 15 s, AWS ALB 60 s): with uvicorn's 5 s,
        # a request sent on a connection the server is closing at that moment fails unanswered.
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=drain_timeout + 10,  # after the engine has drained: responses
        server_header=False,
    )
    return DrainingServer(config, app.state.ttsperf, drain_timeout)
