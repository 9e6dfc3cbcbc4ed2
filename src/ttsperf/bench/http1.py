"""A lean HTTP/1.1 client on asyncio protocols: keep-alive pooling, streamed bodies, one deadline.

Why not aiohttp or httpx: a load tester's own cost per request caps the load it can offer and adds
lag to every send. Profiling `bench`'s open loop against a no-op endpoint put most of its CPU in
the general-purpose client (request/response objects, connector bookkeeping, stream readers). This
client does only what a TTS load test needs: send one request on a pooled connection, hand each
piece of the body to a sink the moment it arrives (so chunk times are arrival times), and say
precisely how an exchange failed, in the error classes of `results.ERROR_CLASSES`.

Measured against an aiohttp client of the same interface (benchmarks/http_client.py;
docs/PERFORMANCE.md, "One HTTP client in bench: http1 kept over aiohttp"), aiohttp added 0.4-0.9 ms to E2E
and TTFA p50 at 1-1,000 req/s against the mock on an idle machine, outside the repeats' spread
(40 ms to E2E p50 at 1,000 req/s with the 2 cores contended; without its trace hook and cookie
jar too): a load tester's own overhead is a bias in every latency it reports.

    client = Client(timeout_s=60)
    await client.fetch("POST", "http://127.0.0.1:8080/invoke", b'{"text": "hi"}', sink)
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from urllib.parse import urlsplit

from ttsperf import __version__

MAX_HEAD_BYTES = 64 * 1024
_NO_BODY = (204, 304)


class HttpError(Exception):
    """An exchange that failed; `kind` is its error class: connect, disconnected, truncated, timeout,
    other."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class Sink:
    """What receives a response: the head once, then each piece of the (de-chunked) body."""

    def head(self, status: int, headers: dict[str, str]) -> None: ...

    def data(self, piece: bytes) -> None: ...


class _Target:
    """A parsed URL, kept per URL string so a request costs no URL parsing."""

    __slots__ = ("host", "port", "tls", "path", "key", "host_header")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.key = (self.host, self.port, self.tls)
        self.host_header = parts.netloc.rpartition("@")[2]


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one exchange at a time; parses the response as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._done: asyncio.Future | None = None
        self._sink: Sink | None = None
        self._buf = bytearray()
        self._got_bytes = False
        self._state = "idle"

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._done is None or self._done.done():
            return
        if self._state == "eof":  # the body is delimited by the close: this is its end
            self._finish(reusable=False)
        elif self._state == "head":
            why = f" ({exc})" if exc else ""
            self._fail("disconnected", f"server closed the connection before a response{why}")
        else:
            self._fail("truncated", f"connection closed mid-body ({self._body_progress()})")

    def data_received(self, data: bytes) -> None:
        if self._done is None or self._done.done():
            self.close()  # bytes nobody asked for: the connection is not reusable (the pool skips it)
            return
        self._got_bytes = True
        self._buf += data
        try:
            self._parse()
        except HttpError as exc:
            self._fail(exc.kind, str(exc))

    # -- one exchange ------------------------------------------------------------------------------

    def start(self, request: bytes, sink: Sink, done: asyncio.Future) -> None:
        self._sink, self._done = sink, done
        self._state, self._buf, self._got_bytes = "head", bytearray(), False
        self._remaining = 0
        self._keep_alive = True
        self._inflate: zlib._Decompress | None = None
        self.transport.write(request)  # type: ignore[union-attr]

    def _finish(self, reusable: bool) -> None:
        if self._inflate is not None:
            tail = self._inflate.flush()
            if tail:
                self._sink.data(tail)  # type: ignore[union-attr]
        self._state = "done"
        self._done.set_result(reusable and self._keep_alive and not self._buf)  # type: ignore[union-attr]

    def _fail(self, kind: str, detail: str) -> None:
        self._state = "done"
        if self._done is not None and not self._done.done():
            self._done.set_exception(HttpError(kind, detail))
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _body_progress(self) -> str:
        if self._state == "length":
            return f"{self._remaining} bytes of the declared length missing"
        return "chunked body without its last chunk"

    def _emit(self, piece: bytes) -> None:
        if piece:
            self._sink.data(self._inflate.decompress(piece) if self._inflate else piece)  # type: ignore[union-attr]

    def _parse(self) -> None:
        while True:
            if self._state == "head":
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self._buf) > MAX_HEAD_BYTES:
                        raise HttpError("other", f"response head over {MAX_HEAD_BYTES} bytes")
                    return
                head = bytes(self._buf[:end]).decode("latin-1")
                del self._buf[: end + 4]
                self._start_body(head)
            elif self._state == "length":
                piece = self._buf[: self._remaining]
                del self._buf[: len(piece)]
                self._remaining -= len(piece)
                self._emit(bytes(piece))
                if self._remaining == 0:
                    self._finish(reusable=True)
                return
            elif self._state == "eof":
                self._emit(bytes(self._buf))
                self._buf.clear()
                return
            elif self._state == "chunk-size":
                eol = self._buf.find(b"\r\n")
                if eol < 0:
                    return
                size_text = bytes(self._buf[:eol]).split(b";", 1)[0].strip()
                try:
                    self._remaining = int(size_text, 16)
                except ValueError:
                    raise HttpError("other", f"bad chunk size {size_text[:20]!r}") from None
                del self._buf[: eol + 2]
                self._state = "chunk" if self._remaining else "trailer"
            elif self._state == "chunk":
                piece = self._buf[: self._remaining]
                del self._buf[: len(piece)]
                self._remaining -= len(piece)
                self._emit(bytes(piece))
                if self._remaining:
                    return
                self._state = "chunk-end"
            elif self._state == "chunk-end":
                if len(self._buf) < 2:
                    return
                del self._buf[:2]
                self._state = "chunk-size"
            elif self._state == "trailer":  # trailer fields (rare) end with an empty line
                if self._buf[:2] == b"\r\n":
                    del self._buf[:2]
                    self._finish(reusable=True)
                    return
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                del self._buf[: end + 4]
                self._finish(reusable=True)
                return
            else:
                return

    def _start_body(self, head: str) -> None:
        lines = head.split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise HttpError("other", f"not an HTTP/1.x response: {lines[0][:80]!r}")
        status = int(code)
        if 100 <= status < 200:  # an interim response (103 Early Hints): the real one follows
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        conn = headers.get("connection", "").lower()
        self._keep_alive = "close" not in conn and (version == "HTTP/1.1" or "keep-alive" in conn)
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding in ("gzip", "deflate"):  # 47: zlib or gzip framing, detected from the header
            self._inflate = zlib.decompressobj(47)
        elif encoding != "identity":
            raise HttpError("other", f"content-encoding {encoding!r} not supported")
        self._sink.head(status, headers)  # type: ignore[union-attr]
        if status in _NO_BODY:
            self._finish(reusable=True)
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = "chunk-size"
        elif "content-length" in headers:
            try:
                self._remaining = int(headers["content-length"])
            except ValueError:
                raise HttpError("other", f"bad content-length {headers['content-length']!r}") from None
            self._state = "length"
            if self._remaining == 0:
                self._finish(reusable=True)
        else:
            self._state, self._keep_alive = "eof", False


class Client:
    """Pooled keep-alive connections per (host, port, tls); any number of exchanges at once."""

    def __init__(self, timeout_s: float = 60.0, headers: dict[str, str] | None = None) -> None:
        self.timeout_s = timeout_s
        extra = {"User-Agent": f"ttsperf-bench/{__version__}", **(headers or {})}
        self._extra = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
        self._targets: dict[str, _Target] = {}
        self._idle: dict[tuple, list[_Connection]] = {}
        self._all: set[_Connection] = set()
        self._tls: ssl.SSLContext | None = None

    async def close(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
        self._idle.clear()

    def _target(self, url: str) -> _Target:
        t = self._targets.get(url)
        if t is None:
            t = self._targets[url] = _Target(url)
        return t

    async def _connect(self, t: _Target, timeout: float) -> _Connection:
        loop = asyncio.get_running_loop()
        if t.tls and self._tls is None:
            self._tls = ssl.create_default_context()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(_Connection, t.host, t.port, ssl=self._tls if t.tls else None),
                timeout,
            )
        except asyncio.TimeoutError:
            raise HttpError("timeout", f"no connection to {t.host}:{t.port} within {timeout:.3g} s") from None
        except OSError as exc:
            raise HttpError("connect", f"cannot connect to {t.host}:{t.port}: {exc}") from None
        self._all.add(conn)
        return conn

    def _request_bytes(self, method: str, t: _Target, path: str, body: bytes | None, ctype: str) -> bytes:
        head = f"{method} {path} HTTP/1.1\r\nHost: {t.host_header}\r\n{self._extra}"
        if body is not None:
            head += f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        return (head + "\r\n").encode("latin-1") + (body or b"")

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
        t = self._target(url)
        path = t.path if not query else t.path + ("&" if "?" in t.path else "?") + query
        request = self._request_bytes(method, t, path, body, content_type)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        idle = self._idle.setdefault(t.key, [])
        for attempt in (0, 1):
            conn = None
            while attempt == 0 and idle and conn is None:  # a retry always takes a new connection
                conn = idle.pop()
                if conn.closed:
                    self._all.discard(conn)
                    conn = None
            reused = conn is not None
            if conn is None:
                conn = await self._connect(t, max(deadline - loop.time(), 0.001))
            done = loop.create_future()
            timer = loop.call_at(deadline, _expire, conn, done, self.timeout_s)
            conn.start(request, sink, done)
            try:
                reusable = await done
            except HttpError as exc:
                self._all.discard(conn)
                # A pooled connection the server had already closed fails before a single byte:
                # that is the client's stale socket, not the server's fault; resend once, afresh.
                if reused and attempt == 0 and exc.kind == "disconnected" and not conn._got_bytes:
                    continue
                raise
            finally:
                timer.cancel()
            if reusable and not conn.closed:
                idle.append(conn)
            else:
                conn.close()
                self._all.discard(conn)
            return


def _expire(conn: _Connection, done: asyncio.Future, timeout_s: float) -> None:
    if not done.done():
        conn._fail("timeout", f"no complete response within {timeout_s:g} s")
