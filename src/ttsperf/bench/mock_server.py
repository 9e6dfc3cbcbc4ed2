"""A TTS server of known behaviour, for dry runs of `bench` and for its tests.

It is a real HTTP server (aiohttp) that answers the invoke, OpenAI and Forge APIs with real WAV or
PCM whose duration follows the text, after a service time you choose, with K slots (K=1 serves one
request at a time, as the official ChatTTS examples do). Theory then says what `bench` must find:
closed loop at concurrency C gives min(C, K) / S requests/s. Slots keep time on the server's clock
(a request starts when its slot is free by that clock), so a busy machine's late wake-ups do not
slow the server below K / S, as they would not slow a GPU.

    python -m ttsperf.bench.mock_server --port 8080 --slots 1 --service-time 0.2
    ttsperf bench http://127.0.0.1:8080 --concurrency 1,4

A text containing a fault marker gets that fault: [fault:silent] [fault:clipped] [fault:short]
[fault:empty] [fault:truncated] [fault:drop] [fault:html] [fault:400] [fault:500] [fault:stall=S].
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import io
import re
import sys
import time
import zipfile
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from aiohttp import web

from ttsperf.audio import to_pcm16, wav_header
from ttsperf.bench.texts import expected_seconds
from ttsperf.facts import STEPS_PER_AUDIO_SECOND

_FAULT = re.compile(r"\[fault:([a-z0-9]+)(?:=([0-9.]+))?\]")


def mp3_of(pcm: bytes, rate: int) -> bytes:
    """Real MP3 of the PCM through LAME (lameenc, a dev/test extra: real ChatTTS API answers in MP3)."""
    try:
        import lameenc
    except ImportError:
        raise web.HTTPNotImplemented(text="the mock's MP3 endpoint needs: pip install lameenc") from None
    enc = lameenc.Encoder()
    enc.set_bit_rate(64)
    enc.set_in_sample_rate(rate)
    enc.set_channels(1)
    enc.set_quality(7)
    return bytes(enc.encode(pcm) + enc.flush())


CONTENT_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "mp3": "audio/mpeg", "opus": "audio/ogg",
                 "flac": "audio/flac"}  # fmt: skip


def encode_as(pcm: bytes, rate: int, fmt: str, streamed: bool = False) -> bytes:
    """16-bit mono PCM -> a whole body in an OpenAI response_format; FLAC and Ogg Opus through
    libsndfile (soundfile), MP3 through LAME. A streamed WAV carries no data size (unknown length)."""
    if fmt == "wav":
        return wav_header(rate, None if streamed else len(pcm)) + pcm
    if fmt == "pcm":
        return pcm
    if fmt == "mp3":
        return mp3_of(pcm, rate)
    import soundfile

    buf = io.BytesIO()
    samples = np.frombuffer(pcm, dtype="<i2")
    if fmt == "flac":
        soundfile.write(buf, samples, rate, format="FLAC", subtype="PCM_16")
    else:
        soundfile.write(buf, samples, rate, format="OGG", subtype="OPUS")
    return buf.getvalue()


@dataclass
class Config:
    service_time: float = 0.05  # seconds a slot is held per request (fixed part)
    rtf: float = 0.0  # extra seconds per second of audio produced
    slots: int = 0  # 0: unlimited
    stream_chunks: int = 8  # a streamed response is sent in this many pieces over the service time
    sample_rate: int = 24_000
    min_audio_s: float = 0.3
    token: str | None = None  # when set, requests need "Authorization: Bearer <token>"


async def sleep_until(deadline: float) -> None:
    """Wait until perf_counter() >= deadline. asyncio.sleep alone overshoots by up to a millisecond
    or more (its timer rounds up), which would make the server slower than the service time it
    promises; the last 2 ms are spent yielding to the loop instead."""
    remaining = deadline - time.perf_counter()
    if remaining > 0.002:
        await asyncio.sleep(remaining - 0.002)
    while time.perf_counter() < deadline:
        await asyncio.sleep(0)


@lru_cache(maxsize=64)
def tone_pcm(n: int, rate: int, level: float = 0.3) -> bytes:
    """A gliding tone: audible, not silent, not clipped; cached since tests reuse a few lengths."""
    t = np.arange(n) / rate
    return to_pcm16(level * np.sin(2 * np.pi * (220 + 40 * np.sin(2 * np.pi * 0.5 * t)) * t))


class MockTTS:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.sem = asyncio.Semaphore(cfg.slots) if cfg.slots > 0 else None
        # When each slot becomes free, in the server's time. A request starts when its slot is free
        # by this clock, not when the event loop got round to waking it: like a GPU, whose work is
        # not delayed by a late Python wake-up, the server keeps K/S however busy the machine is.
        self.free_at = [0.0] * max(cfg.slots, 0)
        self.in_flight = self.max_in_flight = self.served = 0
        # first arrival and last completion (server clock): the server's own view of its throughput
        self.first_arrival: float | None = None
        self.last_done: float | None = None

    @web.middleware
    async def auth(self, request: web.Request, handler):
        if self.cfg.token and request.path not in ("/stats", "/reset", "/metrics"):
            if request.headers.get("Authorization") != f"Bearer {self.cfg.token}":
                return web.json_response({"error": "missing or wrong bearer token"}, status=401)
        return await handler(request)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.auth])
        app.router.add_post("/invoke", self.invoke)
        app.router.add_post("/v1/audio/speech", self.openai)
        app.router.add_get("/v1/tts", self.forge)
        app.router.add_post("/generate_voice", self.chattts_api)
        app.router.add_get("/stats", self.stats)
        app.router.add_post("/reset", self.reset)
        app.router.add_get("/metrics", self.metrics)
        return app

    async def stats(self, request: web.Request) -> web.Response:
        busy = (self.last_done - self.first_arrival) if self.last_done and self.first_arrival else None
        return web.json_response(
            {
                "max_in_flight": self.max_in_flight,
                "served": self.served,
                "in_flight": self.in_flight,
                "busy_s": busy,
            }
        )

    async def reset(self, request: web.Request) -> web.Response:
        self.max_in_flight = self.served = 0
        self.first_arrival = self.last_done = None
        self.free_at = [0.0] * max(self.cfg.slots, 0)
        return web.json_response({"ok": True})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            text=f"# TYPE mock_in_flight gauge\nmock_in_flight {self.in_flight}\n"
            f"# TYPE mock_served_total counter\nmock_served_total {self.served}\n",
            content_type="text/plain",
        )

    async def invoke(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return await self.speak(request, str(body.get("text", "")), "wav", stream=False)

    async def openai(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        fmt = body.get("response_format", "wav")
        if fmt not in CONTENT_TYPES:
            return web.json_response({"error": f"response_format {fmt!r} not supported"}, status=400)
        return await self.speak(request, str(body.get("input", "")), fmt, stream=bool(body.get("stream")))

    async def forge(self, request: web.Request) -> web.StreamResponse:
        return await self.speak(request, request.query.get("text", ""), "wav", stream=False)

    async def chattts_api(self, request: web.Request) -> web.StreamResponse:
        """ChatTTS examples/api: a zip with one MP3 per input text."""
        body = await request.json()
        texts = [str(t) for t in body.get("text", [])]
        if not texts or "audio_seed" not in body:
            return web.json_response({"detail": "text and audio_seed are required"}, status=422)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.cfg.service_time)
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as zf:
                for i, text in enumerate(texts):
                    n = int(max(self.cfg.min_audio_s, expected_seconds(text)) * self.cfg.sample_rate)
                    zf.writestr(f"{i}.mp3", mp3_of(tone_pcm(n, self.cfg.sample_rate), self.cfg.sample_rate))
            return web.Response(body=buf.getvalue(), content_type="application/zip")
        finally:
            self.in_flight -= 1
            self.served += 1

    async def speak(self, request: web.Request, text: str, fmt: str, stream: bool) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            t_arrive = time.perf_counter()
            if self.first_arrival is None:
                self.first_arrival = t_arrive
            if self.sem is None:
                return await self._serve(request, text, fmt, stream, t_arrive, {"start": t_arrive})
            async with self.sem:
                slot = {"start": max(t_arrive, heapq.heappop(self.free_at))}
                try:
                    return await self._serve(request, text, fmt, stream, t_arrive, slot)
                finally:
                    heapq.heappush(self.free_at, slot.get("done", slot["start"]))
        finally:
            self.in_flight -= 1
            self.served += 1
            self.last_done = time.perf_counter()

    async def _serve(
        self, request: web.Request, text: str, fmt: str, stream: bool, t_arrive: float, slot: dict[str, float]
    ) -> web.StreamResponse:
        cfg = self.cfg
        t_start = slot["start"]
        faults = {m.group(1): m.group(2) for m in _FAULT.finditer(text)}
        clean = _FAULT.sub("", text)
        seconds = max(cfg.min_audio_s, expected_seconds(clean))
        if "short" in faults:
            seconds = 0.06
        n = 0 if "empty" in faults else int(seconds * cfg.sample_rate)
        pcm = tone_pcm(n, cfg.sample_rate)
        if "silent" in faults:
            pcm = bytes(len(pcm))
        if "clipped" in faults:
            pcm = tone_pcm(n, cfg.sample_rate, level=4.0)
        service = cfg.service_time + cfg.rtf * n / cfg.sample_rate + float(faults.get("stall") or 0)
        if "400" in faults:
            return web.json_response({"error": "bad request (fault marker)"}, status=400)
        done_at = t_start + service
        slot["done"] = done_at  # when speak() hands the slot back, it is free from this moment
        if "500" in faults:
            await sleep_until(done_at)
            return web.json_response({"error": "internal error (fault marker)"}, status=500)
        headers = {
            "X-Audio-Seconds": f"{n / cfg.sample_rate:.6f}",
            "X-Decode-Steps": f"{n / cfg.sample_rate * STEPS_PER_AUDIO_SECOND:.1f}",
            "X-Queue-Seconds": f"{t_start - t_arrive:.6f}",
            "X-Inference-Seconds": f"{service:.6f}",
        }
        if "html" in faults:
            await sleep_until(done_at)
            return web.Response(text="<html>upstream error</html>", content_type="text/html", headers=headers)
        if "drop" in faults:
            await sleep_until(done_at)
            request.transport.close()
            return web.Response(status=200)
        ctype = CONTENT_TYPES[fmt]
        if not stream:
            await sleep_until(done_at)
            payload = encode_as(pcm, cfg.sample_rate, fmt)
            if "truncated" in faults:
                resp = web.StreamResponse(headers=headers)
                resp.content_type, resp.content_length = ctype, len(payload)
                await resp.prepare(request)
                await resp.write(payload[: len(payload) // 2])
                request.transport.close()
                return resp
            return web.Response(body=payload, content_type=ctype, headers=headers)
        # Streaming: the body goes out in pieces spread evenly over the service time (the WAV header
        # first; raw samples in whole samples; a compressed stream in equal byte pieces).
        resp = web.StreamResponse(headers=headers)
        resp.content_type = ctype
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if fmt == "wav":
            await resp.write(wav_header(cfg.sample_rate))
        body = pcm if fmt in ("wav", "pcm") else encode_as(pcm, cfg.sample_rate, fmt)
        k = max(1, cfg.stream_chunks)
        step = (len(body) // 2 // k) * 2
        for j in range(k):
            await sleep_until(t_start + service * (j + 1) / k)
            piece = body[j * step : (j + 1) * step if j < k - 1 else len(body)]
            if "truncated" in faults and j == k // 2:
                request.transport.close()
                return resp
            await resp.write(piece)
        await resp.write_eof()
        return resp


async def serve(cfg: Config, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(MockTTS(cfg).app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080, help="0 picks a free port (printed)")
    ap.add_argument("--service-time", type=float, default=Config.service_time)
    ap.add_argument("--rtf", type=float, default=0.0)
    ap.add_argument("--slots", type=int, default=0, help="requests served at once; 0 = unlimited")
    ap.add_argument("--stream-chunks", type=int, default=Config.stream_chunks)
    ap.add_argument("--sample-rate", type=int, default=Config.sample_rate)
    ap.add_argument("--token", default=None, help="require Authorization: Bearer TOKEN")
    a = ap.parse_args(argv)
    cfg = Config(a.service_time, a.rtf, a.slots, a.stream_chunks, a.sample_rate, token=a.token)

    async def run() -> None:
        runner, port = await serve(cfg, a.host, a.port)
        print(f"listening on http://{a.host}:{port}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
