"""bench's HTTP client on aiohttp: keep-alive pooling, bodies streamed to a sink, one deadline.

It replaced a hand-written HTTP/1.1 client (`bench/http1.py`) that cost 0.1-1.1 ms less CPU per
request but changed no figure bench reports beyond run-to-run spread at 1-1,000 req/s against the
mock or `ttsperf serve` (benchmarks/http_client.py; docs/PERFORMANCE.md, "bench: the load-test
client itself").

A TTS load test needs little from its client: send one request on a pooled connection, hand each
piece of the body to a sink the moment it arrives (so chunk and first-audio times are arrival
times), and say how an exchange failed, in the error classes of `results.ERROR_CLASSES`. aiohttp
does the HTTP; this module maps its exceptions onto those classes and resends once on a pooled
connection the server had already closed (aiohttp itself retries only idempotent methods, and
bench mostly POSTs).

    client = Client(timeout_s=60)
    await client.fetch("POST", "http://127.0.0.1:8080/invoke", b'{"text": "hi"}', sink)
    await client.close()
"""

from __future__ import annotations

import asyncio
import re
import ssl
from types import SimpleNamespace

import aiohttp
from yarl import URL

from ttsperf import __version__


class HttpError(Exception):
    """An exchange that failed; `kind` is its error class: connect, disconnected, truncated, timeout,
    other."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class Sink:
    """What receives a response: the head once, then each piece of the (decoded) body."""

    def head(self, status: int, headers: dict[str, str]) -> None: ...

    def data(self, piece: bytes) -> None: ...


# The server closed or reset the connection (not a connect failure: those are caught before these).
_DROPPED = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, ConnectionResetError)


async def _mark_reused(session: object, ctx: SimpleNamespace, params: object) -> None:
    ctx.trace_request_ctx["reused"] = True


class Client:
    """Pooled keep-alive connections per (host, port, tls); any number of exchanges at once."""

    def __init__(self, timeout_s: float = 60.0, headers: dict[str, str] | None = None) -> None:
        self.timeout_s = timeout_s
        self._headers = {"User-Agent": f"ttsperf-bench/{__version__}", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None
        self._tls: ssl.SSLContext | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _open(self) -> aiohttp.ClientSession:
        reuse = aiohttp.TraceConfig()
        reuse.on_connection_reuseconn.append(_mark_reused)
        # No pool limit (an open loop must not queue behind one), no timeouts of aiohttp's own (the
        # one deadline per exchange is ours), no Accept-Encoding (audio is not worth compressing,
        # and a server that compresses anyway is still inflated).
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), headers=self._headers, trace_configs=[reuse],
            timeout=aiohttp.ClientTimeout(total=None), skip_auto_headers=("Accept-Encoding",),
        )  # fmt: skip

    async def fetch(
        self,
        method: str,
        url: str,
        body: bytes | None,
        sink: Sink,
        query: str = "",
        content_type: str = "application/json",
    ) -> None:
        """One exchange: the response goes to `sink` as it arrives; HttpError says how it failed."""
        if self._session is None:
            self._session = self._open()
        if query:  # already encoded by the caller: sent as given, not re-quoted
            url += ("&" if "?" in url else "?") + query
        target = URL(url, encoded=True)
        tls = True
        if target.scheme == "https":
            if self._tls is None:  # the system trust store (SSL_CERT_FILE honoured), read when needed
                self._tls = ssl.create_default_context()
            tls = self._tls
        headers = {"Content-Type": content_type} if body is not None else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s  # one deadline for the exchange, a resend included
        try:
            for attempt in (0, 1):
                ctx = {"reused": False, "head": False}
                # aiohttp's total covers connecting, sending and reading the whole body.
                timeout = aiohttp.ClientTimeout(total=max(deadline - loop.time(), 0.001))
                try:
                    await self._exchange(method, target, body, headers, tls, timeout, sink, ctx)
                    return
                except _DROPPED:
                    # A pooled connection the server had already closed fails before a single
                    # byte: the client's stale socket, not the server's fault; resend once.
                    if attempt == 0 and ctx["reused"] and not ctx["head"]:
                        continue
                    raise
        except asyncio.TimeoutError:  # aiohttp's timeout errors are asyncio's too
            raise HttpError("timeout", f"no complete response within {self.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError as exc:  # refused, unresolvable, or a certificate refused
            raise HttpError("connect", f"cannot connect to {target.host}:{target.port}: {exc}") from None
        except _DROPPED as exc:
            if ctx["head"]:
                raise HttpError("truncated", f"connection closed mid-body ({exc})") from None
            why = f"server closed the connection before a response ({exc})"
            raise HttpError("disconnected", why) from None
        except aiohttp.ClientPayloadError as exc:
            raise _payload_error(exc) from None
        except aiohttp.ClientResponseError as exc:  # a head or chunk framing aiohttp could not parse
            raise HttpError("other", f"bad response: {_one_line(exc.message)}") from None
        except aiohttp.ClientError as exc:
            raise HttpError("other", f"{exc.__class__.__name__}: {exc}") from None

    async def _exchange(
        self,
        method: str,
        target: URL,
        body: bytes | None,
        headers: dict[str, str] | None,
        tls: ssl.SSLContext | bool,
        timeout: aiohttp.ClientTimeout,
        sink: Sink,
        ctx: dict,
    ) -> None:
        async with self._session.request(  # type: ignore[union-attr]
            method, target, data=body, headers=headers, ssl=tls, timeout=timeout, trace_request_ctx=ctx
        ) as resp:
            ctx["head"] = True
            sink.head(resp.status, {k.lower(): v for k, v in resp.headers.items()})
            async for piece in resp.content.iter_any():
                sink.data(piece)


def _payload_error(exc: aiohttp.ClientPayloadError) -> HttpError:
    """aiohttp raises one class for a body cut short and a body it cannot parse; its cause says which."""
    cause = exc.__cause__ or exc
    why = _one_line(getattr(cause, "message", None) or str(cause))
    if "not completed" not in str(exc) and "Not enough data" not in why:
        return HttpError("other", f"bad body: {why}")
    # Said as bench has always said it, so error details (and reports) read the same.
    got = re.search(r"received (\d+) of (\d+) bytes", why)
    if got:
        why = f"{int(got[2]) - int(got[1])} bytes of the declared length missing"
    elif "transfer length" in why:
        why = "chunked body without its last chunk"
    return HttpError("truncated", f"connection closed mid-body ({why})")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
