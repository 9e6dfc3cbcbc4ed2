"""bench's HTTP/1.1 client against real loopback sockets that answer with exact bytes.

A raw asyncio server (not a framework) so each test controls the wire: chunked bodies split at
awkward places, gzip, a body delimited by the close, keep-alive and a server that closes idle
connections, malformed heads.
"""

from __future__ import annotations

import asyncio
import gzip
import re

import pytest

from ttsperf.bench.http1 import Client, HttpError


class Collect:
    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.pieces: list[bytes] = []

    def head(self, status: int, headers: dict[str, str]) -> None:
        self.status, self.headers = status, headers

    def data(self, piece: bytes) -> None:
        self.pieces.append(piece)

    @property
    def body(self) -> bytes:
        return b"".join(self.pieces)


async def raw_server(answer):
    """answer(request_head: bytes, writer) is awaited once per request; returns (server, url, stats)."""
    stats = {"connections": 0, "requests": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                stats["requests"] += 1
                if await answer(head, writer) == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/x", stats


def run(coro):
    return asyncio.run(coro)


def exchanges(answer, n: int, pause: float = 0.0) -> tuple[list[Collect], dict]:
    """n POSTs one after another on one client, `pause` s apart; the responses and the server's stats."""

    async def main():
        server, url, stats = await raw_server(answer)
        client = Client(timeout_s=5)
        sinks = []
        try:
            for _ in range(n):
                sinks.append(Collect())
                await client.fetch("POST", url, b"{}", sinks[-1])
                await asyncio.sleep(pause)
        finally:
            await client.close()
            server.close()
        return sinks, stats

    return run(main())


def fetch_once(answer, method="POST", body=b"{}", client_headers=None, **kw) -> Collect:
    """One exchange with a raw server that answers with `answer`; the collected response."""

    async def main():
        server, url, _ = await raw_server(answer)
        client = Client(timeout_s=5, headers=client_headers)
        s = Collect()
        try:
            await client.fetch(method, url, body, s, **kw)
        finally:
            await client.close()
            server.close()
        return s

    return run(main())


def test_content_length_bodies_reuse_one_connection():
    async def answer(head, w):
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: audio/wav\r\nContent-Length: 5\r\n\r\nhello")
        await w.drain()

    sinks, stats = exchanges(answer, 5)
    assert [s.body for s in sinks] == [b"hello"] * 5
    assert sinks[0].status == 200 and sinks[0].headers["content-type"] == "audio/wav"
    assert stats == {"connections": 1, "requests": 5}


def test_chunked_body_split_anywhere_is_reassembled_and_streamed_piece_by_piece():
    payload = bytes(range(256)) * 40

    async def answer(head, w):
        wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        for k in range(0, len(payload), 3000):
            part = payload[k : k + 3000]
            wire += f"{len(part):x};ext=1\r\n".encode() + part + b"\r\n"
        wire += b"0\r\nX-Trailer: t\r\n\r\n"
        for k in range(0, len(wire), 7):  # split inside sizes, CRLFs and data alike
            w.write(wire[k : k + 7])
            await w.drain()
            if k % 700 == 0:
                await asyncio.sleep(0.001)

    async def main():
        server, url, stats = await raw_server(answer)
        client = Client(timeout_s=5)
        first, second = Collect(), Collect()
        await client.fetch("GET", url, None, first)
        await client.fetch("GET", url, None, second)  # the trailer was consumed: the connection is reusable
        await client.close()
        server.close()
        return first, second, stats

    first, second, stats = run(main())
    assert first.body == payload and second.body == payload
    assert len(first.pieces) > 1
    assert stats["connections"] == 1


def test_an_interim_response_is_skipped():
    async def answer(head, w):
        w.write(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()

    s = fetch_once(answer)
    assert s.status == 200 and s.body == b"ok"


def test_gzip_body_is_inflated():
    payload = b"RIFF" + bytes(5000)

    async def answer(head, w):
        z = gzip.compress(payload)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(z) + z)
        await w.drain()

    assert fetch_once(answer).body == payload


def test_body_delimited_by_close_and_connection_close_are_honoured():
    async def answer(head, w):
        w.write(b"HTTP/1.0 200 OK\r\nContent-Type: audio/wav\r\n\r\nuntil-eof")
        await w.drain()
        return "close"

    sinks, stats = exchanges(answer, 2)
    assert [s.body for s in sinks] == [b"until-eof"] * 2
    assert stats["connections"] == 2


@pytest.mark.parametrize("pause", [0.05, 0.0])  # the close seen while pooled, or only once reused
def test_a_pooled_connection_the_server_closed_is_replaced_not_counted_as_an_error(pause):
    async def answer(head, w):
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()
        return "close"  # closes without saying Connection: close, as idle timeouts do

    sinks, stats = exchanges(answer, 10, pause)
    out = [s.body for s in sinks]
    assert out == [b"ok"] * 10 and stats["requests"] >= 10


def test_a_reused_connection_closed_before_any_byte_is_resent_once_on_a_new_one():
    # The race the test above may or may not hit: the close arrives only after the next request
    # went out on the pooled connection. The server reads that request and hangs up unanswered.
    served = {"n": 0}

    async def answer(head, w):
        served["n"] += 1
        if served["n"] == 2:
            return "close"
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()

    sinks, stats = exchanges(answer, 2)
    out = [s.body for s in sinks]
    assert out == [b"ok", b"ok"]
    assert stats == {"connections": 2, "requests": 3}


@pytest.mark.parametrize(
    ("wire", "kind", "words"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
            "truncated",
            "95 bytes of the declared",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            "truncated",
            "without its last chunk",
        ),
        (b"", "disconnected", "before a response"),
        (b"HTTP/1.1 200 OK\r\nContent-", "disconnected", "before a response"),
        (b"SMTP ready\r\n\r\n", "other", "not an HTTP/1.x response"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "other", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx", "other", "'br'"),
    ],
)
def test_broken_responses_fail_with_their_class(wire, kind, words):
    async def answer(head, w):
        w.write(wire)
        await w.drain()
        return "close"

    async def main():
        server, url, _ = await raw_server(answer)
        client = Client(timeout_s=5)
        try:
            with pytest.raises(HttpError) as err:
                await client.fetch("POST", url, b"{}", Collect())
        finally:
            await client.close()
            server.close()
        return err.value

    err = run(main())
    assert err.kind == kind and re.search(words, str(err)), str(err)


def test_a_silent_server_times_out_and_a_closed_port_is_a_connect_error(free_port_url):
    async def answer(head, w):
        await asyncio.sleep(5)

    async def main():
        server, url, _ = await raw_server(answer)
        client = Client(timeout_s=0.3)
        with pytest.raises(HttpError) as slow:
            await client.fetch("POST", url, b"{}", Collect())
        with pytest.raises(HttpError) as refused:
            await client.fetch("POST", free_port_url, b"{}", Collect())
        await client.close()
        server.close()
        return slow.value, refused.value

    slow, refused = run(main())
    assert slow.kind == "timeout" and "0.3 s" in str(slow)
    assert refused.kind == "connect"


def test_query_and_headers_go_on_the_wire():
    seen = []

    async def answer(head, w):
        seen.append(head.decode())
        w.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await w.drain()

    query = "text=%E4%BD%A0&format=wav"
    s = fetch_once(answer, "GET", None, {"Authorization": "Bearer t0k"}, query=query)
    assert s.status == 204 and s.body == b""
    assert seen[0].startswith("GET /x?text=%E4%BD%A0&format=wav HTTP/1.1\r\n")
    assert "Authorization: Bearer t0k\r\n" in seen[0] and "Host: 127.0.0.1:" in seen[0]


def test_https_with_a_trusted_certificate_and_a_clear_error_for_an_untrusted_one(tmp_path, monkeypatch):
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    make = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
            "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]  # fmt: skip
    subprocess.run(make, check=True, capture_output=True)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nsec")
        await writer.drain()
        writer.close()

    async def main(trusted: bool):
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_tls)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
        if trusted:
            monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # read by ssl.create_default_context
        client = Client(timeout_s=5)
        s = Collect()
        try:
            await client.fetch("GET", url, None, s)
            return s.body
        except HttpError as exc:
            return exc
        finally:
            await client.close()
            server.close()

    untrusted = run(main(trusted=False))
    assert isinstance(untrusted, HttpError) and untrusted.kind == "connect"
    assert "certificate" in str(untrusted).lower()
    assert run(main(trusted=True)) == b"sec"
