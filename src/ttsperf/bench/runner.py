"""Sends the requests of one load point and records, per request, when everything happened.

Closed loop: C workers, each sends its next request the moment its previous one ends, so exactly
C are in flight (the guide's script meant to do this with CONCURRENCY and never did); or, with a
think time, each is a listener who plays the reply as it arrives and sends the next request that
long after it has played (at most C in flight). Open loop:
requests go out at precomputed absolute times whatever the server does, optionally capped at M in
flight; a request waiting for the cap keeps its intended time, so the wait shows up in
latency-from-intended-send instead of silently vanishing (coordinated omission).
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

from ttsperf.bench.adapters import Adapter
from ttsperf.bench.arrivals import parse_arrival, schedule
from ttsperf.bench.audio_checks import BadAudio, check_body, parse_wav_header
from ttsperf.bench.http1 import Client, HttpError, Sink
from ttsperf.bench.metrics import playback_end
from ttsperf.bench.results import RequestRecord, Strategy
from ttsperf.bench.texts import Workload, expected_seconds

# Content types that can carry audio; anything else (an HTML error page, JSON) is not audio.
AUDIO_TYPES = ("audio/", "application/octet-stream", "binary/octet-stream", "application/zip",
               "application/x-zip-compressed")  # fmt: skip
ERROR_BODY_BYTES = 300
HEADER_FLOATS = {
    "x-audio-seconds": "server_audio_s",
    "x-decode-steps": "decode_steps",
    "x-prompt-tokens": "prompt_tokens",
    "x-queue-seconds": "server_queue_s",
    "x-inference-seconds": "server_inference_s",
}


class _Exchange(Sink):
    """Receives one response as it arrives: status and server headers, then audio pieces, each timed
    on arrival (the first piece holding samples is the time to first audio)."""

    __slots__ = ("runner", "rec", "kind", "body", "ctype", "data_offset", "bytes_per_s", "t_last")

    def __init__(self, runner: Runner, rec: RequestRecord, kind: str) -> None:
        self.runner, self.rec, self.kind = runner, rec, kind
        self.body = bytearray()
        self.ctype = ""
        self.data_offset = 0 if kind == "pcm" else None
        self.bytes_per_s = 2.0 * runner.adapter.opts.pcm_rate
        self.t_last: float | None = None

    def head(self, status: int, headers: dict[str, str]) -> None:
        rec = self.rec
        rec.status = status
        self.t_last = self.runner.now()
        for h, attr in HEADER_FLOATS.items():
            if h in headers:
                try:
                    setattr(rec, attr, float(headers[h]))
                except ValueError:
                    pass
        self.ctype = headers.get("content-type", "").lower()

    def is_audio(self) -> bool:
        return self.rec.status < 400 and (not self.ctype or self.ctype.startswith(AUDIO_TYPES))

    def data(self, piece: bytes) -> None:
        t = self.t_last = self.runner.now()
        body = self.body
        if not self.is_audio():  # an error page: keep its start for the record, drop the rest
            if len(body) < ERROR_BODY_BYTES:
                body += piece[: ERROR_BODY_BYTES - len(body)]
            return
        body += piece
        rec = self.rec
        if self.data_offset is None:
            if self.kind != "wav":  # compressed: a player can start on the first bytes (not of a zip)
                if self.kind in ("mp3", "ogg", "flac") and rec.t_first_audio is None:
                    rec.t_first_audio = t
                return
            try:
                header = parse_wav_header(bytes(body[:4096]))
            except BadAudio:
                header = None  # the full check after the last byte will say why
            if header is None:
                return
            self.data_offset = header.data_offset
            self.bytes_per_s = float(header.sample_rate * header.channels * header.sample_width)
        audio_s = (len(body) - self.data_offset) / self.bytes_per_s
        if audio_s > 0 and (not rec.chunk_audio_s or audio_s > rec.chunk_audio_s[-1]):
            if rec.t_first_audio is None:
                rec.t_first_audio = t
            rec.chunk_t.append(t)
            rec.chunk_audio_s.append(audio_s)


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
        client: Callable[[float, dict[str, str] | None], Client] = Client,
    ) -> None:
        self.adapter, self.urls, self.workload = adapter, list(urls), workload
        self.timeout_s = timeout_s
        self.check_audio = check_audio
        self.on_done = on_done
        self.epoch = time.perf_counter() if epoch is None else epoch
        self.records: list[RequestRecord] = []
        self.in_flight = self.max_in_flight = 0
        self._client = client(timeout_s, headers)
        # Decoding compressed audio takes milliseconds: it runs in a thread (the decoders release
        # the GIL) so it never holds up a send. WAV and PCM checks take microseconds and run inline.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-audio")
        self._checks: set[asyncio.Task] = set()

    def now(self) -> float:
        return time.perf_counter() - self.epoch

    async def __aenter__(self) -> Runner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.close()
        # cancel_futures: after a Ctrl-C, checks still queued would be run anyway (the interpreter
        # joins the pool's thread at exit), and no record waits for them any more
        self._pool.shutdown(wait=False, cancel_futures=True)

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
        req = self.adapter.build(rec.url, self.workload.item(rec.i))
        body = None if req.json is None else json.dumps(req.json).encode()
        query = urlencode(req.params) if req.params else ""
        kind = self.adapter.kind
        ex = _Exchange(self, rec, kind)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        rec.t_send = self.now()
        try:
            await self._client.fetch(req.method, req.url, body, ex, query)
        except HttpError as exc:
            rec.error, rec.detail = exc.kind, str(exc)
        finally:
            self.in_flight -= 1
        rec.t_end = ex.t_last if ex.t_last is not None else self.now()
        rec.bytes = len(ex.body)
        rec.chunks = len(rec.chunk_t)
        if rec.t_first_audio is None and ex.body and kind == "zip-mp3":
            rec.t_first_audio = rec.t_end
        if rec.error is None and rec.status is not None and rec.status >= 400:
            text = bytes(ex.body).decode("utf-8", "replace").strip()
            rec.error = "http_4xx" if rec.status < 500 else "http_5xx"
            rec.detail = f"HTTP {rec.status}: {text}"
        elif rec.error is None and not ex.is_audio():
            text = bytes(ex.body).decode("utf-8", "replace").strip()
            rec.error, rec.detail = "bad_audio", f"content-type {ex.ctype!r} is not audio: {text}"
        if rec.error is not None or not self.check_audio or kind in ("wav", "pcm"):
            self._check_inline(rec, kind, ex.body)
        else:
            # Runs beside the load: in a closed loop the worker's next request goes out at once.
            task = asyncio.create_task(self._check_in_thread(rec, kind, bytes(ex.body)))
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)

    def _check_inline(self, rec: RequestRecord, kind: str, body: bytes | bytearray) -> None:
        if rec.error is None:
            if not self.check_audio:
                rec.audio_s = rec.server_audio_s
            else:
                self._judge(rec, kind, body)
        self._report(rec)

    async def _check_in_thread(self, rec: RequestRecord, kind: str, body: bytes) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, self._judge, rec, kind, body)
        self._report(rec)

    def _judge(self, rec: RequestRecord, kind: str, body: bytes | bytearray) -> None:
        try:
            rec.audio_s = check_body(kind, body, rec.expected_audio_s, self.adapter.opts.pcm_rate).seconds
        except BadAudio as exc:
            rec.error, rec.detail = "bad_audio", str(exc)
        except Exception as exc:  # a body that crashes a decoder is bad audio too, and must not vanish
            rec.error, rec.detail = "bad_audio", f"audio check failed: {exc.__class__.__name__}: {exc}"

    def _report(self, rec: RequestRecord) -> None:
        rec.done = True
        if self.on_done:
            self.on_done(rec)

    # -- load strategies -----------------------------------------------------------------------

    async def run_point(
        self,
        point: int,
        strategy: Strategy,
        requests: int | None,
        duration: float | None,
        warmup: int = 0,
        seed: int = 0,
        first: int = 0,
    ) -> list[RequestRecord]:
        """Run one load point; `first` numbers its requests on from an earlier run of the same point
        (bench's --until-decided), so each request keeps its own text and index."""
        start = len(self.records)
        # A full garbage collection over thousands of live records pauses the loop for tens of ms,
        # which would show up as send lag; collect once before the point, not during it.
        gc.collect()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            if strategy.kind == "concurrent":
                await self._closed(point, strategy, requests, duration, warmup, first)
            else:
                await self._open(point, strategy, requests, duration, warmup, seed, first)
            while self._checks:
                await asyncio.gather(*list(self._checks))
        finally:
            if gc_was_enabled:
                gc.enable()
        return self.records[start:]

    async def _closed(
        self, point: int, s: Strategy, requests: int | None, duration: float | None, warmup: int, first: int
    ) -> None:
        # Warm-up is its own phase that drains before measuring starts: otherwise warm-up requests
        # would be served inside the measured window and deflate its throughput.
        if warmup:
            await self._workers(point, s, first, first + warmup, None, warm=True)
        begin = first + warmup
        end = None if requests is None else begin + requests
        await self._workers(point, s, begin, end, duration, warm=False)

    async def _workers(
        self, point: int, s: Strategy, first: int, end: int | None, duration: float | None, warm: bool
    ) -> None:
        """A closed loop's phase: its senders, each sending its next request when its reply is
        done (a listener: when it has played, and the user has thought). Without a ramp every
        sender starts at once: one wave, which equal replies keep in step."""
        c, think_s = s.concurrency or 1, s.think_s
        state = {"next": first}
        deadline = None if duration is None else self.now() + duration
        gap = (s.ramp_s or 0.0) / c

        async def worker(k: int) -> None:
            if gap:
                await asyncio.sleep(k * gap)
            while True:
                i = state["next"]
                if (end is not None and i >= end) or (deadline is not None and self.now() >= deadline):
                    return
                state["next"] = i + 1
                rec = self._new_record(point, i, warm, self.now())
                await self._send(rec)
                if think_s is not None:  # a listener: the reply plays out, then the user thinks
                    await asyncio.sleep(max(0.0, playback_end(rec) + think_s - self.now()))

        await asyncio.gather(*(worker(k) for k in range(c)))

    async def _open(
        self,
        point: int,
        s: Strategy,
        requests: int | None,
        duration: float | None,
        warmup: int,
        seed: int,
        first: int,
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
                tasks.append(asyncio.create_task(one(self._new_record(point, first + i, i < warmup, target))))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
