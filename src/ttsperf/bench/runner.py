"""Sends the requests of one load point and records, per request, when everything happened.

Closed loop: C workers, each sends its next request the moment its previous one ends, so exactly
C are in flight (the guide's script meant to do this with CONCURRENCY and never did). Open loop:
requests go out at precomputed absolute times whatever the server does, optionally capped at M in
flight; a request waiting for the cap keeps its intended time, so the wait shows up in
latency-from-intended-send instead of silently vanishing (coordinated omission).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import aiohttp

from ttsperf.bench.adapters import Adapter
from ttsperf.bench.arrivals import parse_arrival, schedule
from ttsperf.bench.audio_checks import BadAudio, check_body, parse_wav_header
from ttsperf.bench.results import RequestRecord, Strategy
from ttsperf.bench.texts import Workload, expected_seconds

# Content types that can carry audio; anything else (an HTML error page, JSON) is not audio.
AUDIO_TYPES = ("audio/", "application/octet-stream", "binary/octet-stream", "application/zip",
               "application/x-zip-compressed")  # fmt: skip
ERROR_BODY_BYTES = 300
HEADER_FLOATS = {
    "x-audio-seconds": "server_audio_s",
    "x-decode-steps": "decode_steps",
    "x-queue-seconds": "server_queue_s",
    "x-inference-seconds": "server_inference_s",
}


class Runner:
    def __init__(
        self,
        adapter: Adapter,
        urls: Sequence[str],
        workload: Workload,
        timeout_s: float = 60.0,
        check_audio: bool = True,
        on_done: Callable[[RequestRecord], None] | None = None,
        epoch: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.headers = headers or {}
        self.adapter, self.urls, self.workload = adapter, list(urls), workload
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.check_audio = check_audio
        self.on_done = on_done
        self.epoch = time.perf_counter() if epoch is None else epoch
        self.records: list[RequestRecord] = []
        self.in_flight = self.max_in_flight = 0
        # Audio checks run off the event loop so decoding one response never delays another's send.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-audio")
        self._session: aiohttp.ClientSession | None = None
        self._checks: set[asyncio.Task] = set()

    def now(self) -> float:
        return time.perf_counter() - self.epoch

    async def __aenter__(self) -> Runner:
        # limit=0: the client pool must never be the hidden bottleneck that caps concurrency.
        conn = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        # Bodies are decompressed (a server behind a gzip middleware still answers with audio).
        self._session = aiohttp.ClientSession(connector=conn, timeout=self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
        self._pool.shutdown(wait=False)

    # -- one request ---------------------------------------------------------------------------

    def _new_record(self, point: int, i: int, warmup: bool, t_sched: float) -> RequestRecord:
        item = self.workload.item(i)
        rec = RequestRecord(
            i=i, point=point, warmup=warmup, url=self.urls[i % len(self.urls)], chars=len(item.text),
            expected_audio_s=expected_seconds(item.text), t_sched=t_sched,
        )  # fmt: skip
        self.records.append(rec)
        return rec

    async def _send(self, rec: RequestRecord) -> None:
        assert self._session is not None
        item = self.workload.item(rec.i)
        req = self.adapter.build(rec.url, item)
        kind = self.adapter.kind
        body = bytearray()
        got_headers = False
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        rec.t_send = self.now()
        try:
            async with self._session.request(
                req.method, req.url, json=req.json, params=req.params, headers=self.headers
            ) as resp:
                got_headers = True
                await self._receive(resp, rec, kind, body)
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            rec.error, rec.detail = "timeout", f"no complete response within {self.timeout.total} s {exc}"
        except aiohttp.ClientConnectorError as exc:
            rec.error, rec.detail = "connect", str(exc)
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            # After the headers the body was cut short; before them the server hung up on a request
            # it had accepted (a crash or a proxy limit), which is not a failure to connect.
            rec.error = "truncated" if got_headers else "disconnected"
            rec.detail = f"{exc.__class__.__name__}: {exc}"
        except aiohttp.ClientError as exc:
            rec.error, rec.detail = "other", f"{exc.__class__.__name__}: {exc}"
        finally:
            self.in_flight -= 1
        rec.bytes = len(body)
        # The check runs beside the load, not in front of it: in a closed loop the worker's next
        # request must go out the moment this one ended, not after its audio was decoded.
        task = asyncio.create_task(self._check_and_report(rec, kind, bytes(body)))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _receive(
        self, resp: aiohttp.ClientResponse, rec: RequestRecord, kind: str, body: bytearray
    ) -> None:
        rec.status = resp.status
        for h, attr in HEADER_FLOATS.items():
            if h in resp.headers:
                try:
                    setattr(rec, attr, float(resp.headers[h]))
                except ValueError:
                    pass
        if resp.status >= 400:
            text = (await resp.content.read(ERROR_BODY_BYTES)).decode("utf-8", "replace")
            rec.t_end = self.now()
            rec.error = "http_4xx" if resp.status < 500 else "http_5xx"
            rec.detail = f"HTTP {resp.status}: {text.strip()}"
            return
        ctype = resp.headers.get("Content-Type", "").lower()
        if ctype and not ctype.startswith(AUDIO_TYPES):
            text = (await resp.content.read(ERROR_BODY_BYTES)).decode("utf-8", "replace")
            rec.t_end = self.now()
            rec.error, rec.detail = "bad_audio", f"content-type {ctype!r} is not audio: {text.strip()}"
            return
        await self._read_chunks(resp, rec, kind, body)
        rec.t_end = self.now()

    async def _check_and_report(self, rec: RequestRecord, kind: str, body: bytes) -> None:
        if rec.error is None:
            await self._check(rec, kind, body)
        rec.done = True
        if self.on_done:
            self.on_done(rec)

    async def _read_chunks(
        self, resp: aiohttp.ClientResponse, rec: RequestRecord, kind: str, body: bytearray
    ) -> None:
        """Time every chunk as it arrives; only chunks that carry audio samples count for TTFA/gaps."""
        data_offset = 0 if kind == "pcm" else None
        bytes_per_s = 2.0 * self.adapter.opts.pcm_rate
        audio_bytes = 0
        async for chunk in resp.content.iter_any():
            t = self.now()
            body += chunk
            if kind == "wav" and data_offset is None:
                try:
                    header = parse_wav_header(bytes(body[:4096]))
                except BadAudio:
                    header = None  # the full check after the last byte will say why
                if header is None:
                    continue
                data_offset = header.data_offset
                bytes_per_s = float(header.sample_rate * header.channels * header.sample_width)
            if data_offset is None:  # compressed: a player can start on the first bytes (not of a zip)
                if kind in ("mp3", "ogg", "flac") and rec.t_first_audio is None:
                    rec.t_first_audio = t
                continue
            now_audio = max(0, len(body) - data_offset)
            if now_audio > audio_bytes:
                audio_bytes = now_audio
                if rec.t_first_audio is None:
                    rec.t_first_audio = t
                rec.chunk_t.append(t)
                rec.chunk_audio_s.append(audio_bytes / bytes_per_s)
        rec.chunks = len(rec.chunk_t)
        if rec.t_first_audio is None and body and kind == "zip-mp3":
            rec.t_first_audio = self.now()

    async def _check(self, rec: RequestRecord, kind: str, body: bytes) -> None:
        if not self.check_audio:
            rec.audio_s = rec.server_audio_s
            return
        loop = asyncio.get_running_loop()
        try:
            verdict = await loop.run_in_executor(
                self._pool, check_body, kind, body, rec.expected_audio_s, self.adapter.opts.pcm_rate
            )
            rec.audio_s = verdict.seconds
        except BadAudio as exc:
            rec.error, rec.detail = "bad_audio", str(exc)
        except Exception as exc:  # a body that crashes a decoder is bad audio too, and must not vanish
            rec.error, rec.detail = "bad_audio", f"audio check failed: {exc.__class__.__name__}: {exc}"

    # -- load strategies -----------------------------------------------------------------------

    async def run_point(
        self,
        point: int,
        strategy: Strategy,
        requests: int | None,
        duration: float | None,
        warmup: int = 0,
        seed: int = 0,
    ) -> list[RequestRecord]:
        first = len(self.records)
        # A full garbage collection over thousands of live records pauses the loop for tens of ms,
        # which would show up as send lag; collect once before the point, not during it.
        gc.collect()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            if strategy.kind == "concurrent":
                await self._closed(point, strategy.concurrency or 1, requests, duration, warmup)
            else:
                await self._open(point, strategy, requests, duration, warmup, seed)
            while self._checks:
                await asyncio.gather(*list(self._checks))
        finally:
            if gc_was_enabled:
                gc.enable()
        return self.records[first:]

    async def _closed(
        self, point: int, c: int, requests: int | None, duration: float | None, warmup: int
    ) -> None:
        # Warm-up is its own phase that drains before measuring starts: otherwise warm-up requests
        # would be served inside the measured window and deflate its throughput.
        if warmup:
            await self._workers(point, c, 0, warmup, None, warm=True)
        await self._workers(
            point, c, warmup, None if requests is None else warmup + requests, duration, warm=False
        )

    async def _workers(
        self, point: int, c: int, first: int, end: int | None, duration: float | None, warm: bool
    ) -> None:
        state = {"next": first}
        deadline = None if duration is None else self.now() + duration

        async def worker() -> None:
            while True:
                i = state["next"]
                if (end is not None and i >= end) or (deadline is not None and self.now() >= deadline):
                    return
                state["next"] = i + 1
                await self._send(self._new_record(point, i, warm, self.now()))

        await asyncio.gather(*(worker() for _ in range(c)))

    async def _open(
        self, point: int, s: Strategy, requests: int | None, duration: float | None, warmup: int, seed: int
    ) -> None:
        kind, shape = parse_arrival(s.arrival or "poisson")
        rate = float(s.rate or 1.0)
        if requests is not None:
            offsets = schedule(kind, rate, seed, n=warmup + requests, shape=shape)
        else:
            offsets = schedule(kind, rate, seed, duration=(duration or 0.0) + warmup / rate, shape=shape)
        sem = asyncio.Semaphore(s.max_concurrency) if s.max_concurrency else None

        async def one(rec: RequestRecord) -> None:
            if sem is None:
                await self._send(rec)
                return
            async with sem:
                await self._send(rec)

        start = self.now() + 0.02  # a short lead so the first send is not late by set-up work
        tasks = []
        try:
            for i, off in enumerate(offsets):
                target = start + float(off)
                delay = target - self.now()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(self._new_record(point, i, i < warmup, target))))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
