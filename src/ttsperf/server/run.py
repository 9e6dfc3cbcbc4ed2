"""Running the app under uvicorn, with a drain on SIGTERM.

uvicorn's own graceful shutdown closes the listening socket at once: a balancer still sending
traffic gets refused connections, and requests waiting in the engine's queue would be cut off.
Here the first SIGTERM (or Ctrl-C) instead drains: new requests get 503 and /readyz 503 while the
engine answers every request it accepted (engine.stop(drain=True)); only then does uvicorn shut
down, and the process exits 0. A second signal falls back to uvicorn's immediate exit.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from types import FrameType

import uvicorn

from ttsperf.server.app import ServerState

log = logging.getLogger("ttsperf.server")


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state: ServerState, drain_timeout: float):
        super().__init__(config)
        self.state, self.drain_timeout = state, drain_timeout
        self.url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining = False

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


def make_server(
    app, host: str, port: int, *, drain_timeout: float, log_level: str = "info"
) -> DrainingServer:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=drain_timeout + 10,  # after the engine has drained: responses
        server_header=False,
    )
    return DrainingServer(config, app.state.ttsperf, drain_timeout)
