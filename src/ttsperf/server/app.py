"""The FastAPI app over the engine's core process: the guide's `/invoke`, OpenAI's
`/v1/audio/speech`, `/v1/models`, health, readiness and Prometheus metrics.

    from ttsperf.server.app import create_app
    engine = EngineClient(CoreSpec(ModelSpec(synthetic=True, config="tiny"), EngineConfig(max_batch=8)))
    app = create_app(engine.start(), api_key="secret")

This process never imports torch: the model runs in the core process (engine/core.py), and
handlers send it requests and await its events (engine/client.py). The caller owns the engine
(start and stop); `ttsperf serve` (server/run.py) drains it on SIGTERM. Bodies are read by hand
rather than by FastAPI's parameter binding, so that the size limit applies before parsing and every
fault gets the one JSON error shape.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ttsperf import __version__
from ttsperf.audio import wav_header
from ttsperf.engine.client import EngineDied
from ttsperf.engine.pool import Engines
from ttsperf.engine.types import FrontEvent, PcmChunk, SynthError, SynthRequest
from ttsperf.server import errors, metrics
from ttsperf.server.errors import ApiError
from ttsperf.server.openapi import AUTH_ERRORS, SYNTH_ERRORS, ErrorBody, ModelList, audio_ok, request_body
from ttsperf.server.schemas import MODEL_IDS, InvokeRequest, SpeechRequest
from ttsperf.server.streaming import StreamAborted, audio_body, sse_body
from ttsperf.server.synthesis import accepted, draining, events, outcome_error, stats_headers, submit

log = logging.getLogger("ttsperf.server")
DEFAULT_MAX_BODY_BYTES = 64 * 1024  # ~20x the longest prompt the engine admits (512 tokens)
DEFAULT_READ_TIMEOUT = 10.0  # seconds for a request's headers, and again for its body (slow clients)
CLIENT_GONE = 499  # nginx's "client closed request": recorded in metrics, never seen by anyone
MEDIA = {"wav": "audio/wav", "pcm": "audio/pcm"}
ENDPOINTS = ("/invoke", "/v1/audio/speech", "/v1/models", "/healthz", "/readyz", "/metrics")


@dataclass
class ServerState:
    engine: Engines
    http: metrics.HttpStats = field(default_factory=metrics.HttpStats)
    draining: bool = False  # set by server/run.py on SIGTERM: no new request reaches the engine
    unanswered: int = 0  # submitted to the engine, final answer not yet taken (event loop only)


class _CountRequests:
    """Pure ASGI middleware (BaseHTTPMiddleware would hide client disconnects from handlers):
    counts requests in flight and answered, by endpoint and status code ("aborted": a stream cut
    short after its 200), and ends aborted streams without a traceback in the log."""

    def __init__(self, app: ASGIApp, stats: metrics.HttpStats):
        self.app, self.stats = app, stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: int | str = 500

        async def record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"  # bounded label values
        self.stats.start()
        try:
            await self.app(scope, receive, record)
        except StreamAborted as exc:
            # returning without the final empty chunk makes uvicorn close the connection: the
            # client sees an incomplete body, the one signal left once the 200 has gone out
            log.warning("%s %s: stream cut short (%s)", scope["method"], scope["path"], exc)
            status = "aborted"
        finally:
            self.stats.finish(endpoint, status)


def _key_digest(key: str) -> bytes:
    # Comparing digests keeps the comparison constant-time in the key's length as well.
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()


def _auth(api_key: str | None):
    expected = _key_digest(api_key) if api_key else None

    async def check(request: Request) -> None:
        if expected is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        given = token.strip() if scheme.lower() == "bearer" else request.headers.get("x-api-key", "")
        challenge = {"WWW-Authenticate": "Bearer"}
        if not given:
            raise ApiError(
                401,
                "missing API key: expected 'Authorization: Bearer <key>'",
                "authorization",
                headers=challenge,
            )
        if not hmac.compare_digest(_key_digest(given), expected):
            raise ApiError(401, "wrong API key", "authorization", headers=challenge)

    return check


async def read_body(
    request: Request, model: type[BaseModel], limit: int, timeout: float = DEFAULT_READ_TIMEOUT
) -> BaseModel:
    """The JSON body as `model`: size- and time-limited before parsing, every fault a 4xx naming what."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"body: {int(declared)} bytes; expected at most {limit}", extra={"limit": limit})
    raw: list[bytes] = []

    async def receive() -> None:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                message = f"body: more than {limit} bytes; expected at most {limit}"
                raise ApiError(413, message, extra={"limit": limit})
            raw.append(chunk)

    try:
        await asyncio.wait_for(receive(), timeout)
    except ClientDisconnect:  # gone before the body was complete: nobody to answer
        raise ApiError(CLIENT_GONE, "the client left before sending the whole body") from None
    except asyncio.TimeoutError:  # a slow (or slow-loris) client: answer, and close the connection
        message = f"body: not complete within {timeout:g} s; send it at once"
        raise ApiError(408, message, headers={"Connection": "close"}) from None
    try:
        data = json.loads(b"".join(raw))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, absurd nesting
        reason = str(exc) if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        raise ApiError(400, f"body: expected a JSON object, found invalid JSON ({reason})") from None
    if not isinstance(data, dict):
        raise ApiError(400, f"body: expected a JSON object, found {errors.describe_value(data)}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise errors.from_validation(exc) from None


def create_app(
    engine: Engines,
    api_key: str | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> FastAPI:
    """The HTTP app over `engine` (already started); `api_key` protects /invoke and /v1/*."""
    state = ServerState(engine)
    app = FastAPI(title="ttsperf", version=__version__, summary="ChatTTS with continuous batching")
    app.state.ttsperf = state
    app.add_middleware(_CountRequests, stats=state.http)
    errors.install(app)
    auth = [Depends(_auth(api_key))]

    _add_synthesis_routes(app, engine, state, auth, max_body_bytes, read_timeout)
    _add_status_routes(app, engine, state, auth)
    return app


class _Synthesis:
    """What both synthesis routes do with the engine: submit and await its verdict, and collect a
    buffered answer."""

    def __init__(self, engine: Engines, state: ServerState):
        self.engine, self.state = engine, state
        self.sample_rate = engine.info["sample_rate"]
        self.retry_after = engine.spec.engine.retry_after

    async def start(
        self, request: Request, synth: SynthRequest, text_field: str
    ) -> tuple[int, AsyncGenerator[FrontEvent, None]]:
        """Submit, wait for the engine to accept -> (prompt tokens, the request's events). No await
        between the draining check and the submission, so once the drain has set the flag nothing
        new reaches the engine."""
        state = self.state
        if state.draining:
            raise draining(self.retry_after)
        handle = submit(self.engine, synth)
        state.unanswered += 1

        def answered() -> None:
            state.unanswered -= 1

        try:
            tokens = await accepted(handle, text_field, self.retry_after)
        except BaseException:
            handle.cancel()
            answered()
            raise
        return tokens, events(handle, request.receive, answered)

    async def buffered(
        self, stream: AsyncGenerator[FrontEvent, None], tokens: int, text_field: str, fmt: str
    ) -> Response:
        parts: list[bytes] = []
        async with aclosing(stream):
            async for event in stream:
                if isinstance(event, PcmChunk):
                    parts.append(event.pcm)
                elif isinstance(event, SynthError):
                    err = outcome_error(event, text_field, self.retry_after)
                    if err is None:
                        return Response(status_code=CLIENT_GONE)
                    raise err
                else:
                    pcm = b"".join(parts)
                    body = wav_header(self.sample_rate, len(pcm)) + pcm if fmt == "wav" else pcm
                    headers = {
                        **stats_headers(event),
                        "X-Sample-Rate": str(self.sample_rate),
                        "X-Prompt-Tokens": str(tokens),  # for a load tester
                    }
                    return Response(body, media_type=MEDIA[fmt], headers=headers)
        raise AssertionError("the engine ended a request without a final event")


def _add_synthesis_routes(
    app: FastAPI,
    engine: Engines,
    state: ServerState,
    auth: list,
    max_body_bytes: int,
    read_timeout: float,
) -> None:
    """/invoke (the guide's contract) and /v1/audio/speech (OpenAI's), buffered or streamed."""
    synthesis = _Synthesis(engine, state)
    sample_rate, retry_after = synthesis.sample_rate, synthesis.retry_after

    @app.post(
        "/invoke", dependencies=auth, response_class=Response, openapi_extra=request_body(InvokeRequest),
        responses={**audio_ok(("audio/wav",)), **SYNTH_ERRORS},
    )  # fmt: skip
    async def invoke(request: Request) -> Response:
        """The guide's contract: `{"text": ...}` -> audio/wav (optional: seed, temperature, top_p, top_k)."""
        body = await read_body(request, InvokeRequest, max_body_bytes, read_timeout)
        synth = SynthRequest(text=body.text, sampling=body.sampling())
        tokens, rest = await synthesis.start(request, synth, "text")
        return await synthesis.buffered(rest, tokens, "text", "wav")

    @app.post(
        "/v1/audio/speech", dependencies=auth, response_class=Response,
        openapi_extra=request_body(SpeechRequest),
        responses={**audio_ok(("audio/wav", "audio/pcm", "text/event-stream")), **SYNTH_ERRORS},
    )  # fmt: skip
    async def speech(request: Request) -> Response:
        """OpenAI's speech endpoint; streams by default (`"stream": false` buffers, with X-* headers)."""
        body = await read_body(request, SpeechRequest, max_body_bytes, read_timeout)
        if body.stream_format == "sse" and not body.stream:
            raise ApiError(
                400, "stream: false cannot be combined with stream_format sse (events are a stream)", "stream"
            )
        synth = SynthRequest(
            text=body.input, sampling=body.sampling(), stream=body.stream, prompt=body.speed_prompt()
        )
        tokens, rest = await synthesis.start(request, synth, "input")
        if not body.stream:
            return await synthesis.buffered(rest, tokens, "input", body.response_format)
        first = await anext(rest)  # wait for audio before the status line: early failures keep their codes
        if isinstance(first, SynthError):
            await rest.aclose()
            if (err := outcome_error(first, "input", retry_after)) is None:
                return Response(status_code=CLIENT_GONE)
            raise err
        headers = {
            "X-Sample-Rate": str(sample_rate),
            "Cache-Control": "no-cache",
            "X-Prompt-Tokens": str(tokens),
        }
        if body.stream_format == "sse":
            content = sse_body(first, rest, body.response_format, sample_rate, tokens, "input")
            return StreamingResponse(content, media_type="text/event-stream", headers=headers)
        content = audio_body(first, rest, body.response_format, sample_rate)
        return StreamingResponse(content, media_type=MEDIA[body.response_format], headers=headers)


def _add_status_routes(app: FastAPI, engine: Engines, state: ServerState, auth: list) -> None:
    """What a client or an orchestrator reads: models, liveness, readiness, Prometheus metrics.
    Each asks the engine's core, which answers between its turns' work, not after them."""

    @app.get("/v1/models", dependencies=auth, responses={200: {"model": ModelList}, **AUTH_ERRORS})
    async def models() -> dict:
        """Model ids a client may name; all are served by the one loaded model."""
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "ttsperf", "root": engine.info["model"]}
            for m in MODEL_IDS
        ]
        return {"object": "list", "data": data}

    @app.get("/healthz", responses={503: {"description": "the engine has stopped"}})
    async def healthz() -> JSONResponse:
        """Liveness, with what is running: switches, device, model, batch and queue."""
        try:
            info = await engine.call("describe")
        except EngineDied as exc:
            info = {**engine.info, "queue_depth": 0, "running": 0, "engine_error": str(exc)}
        alive = engine.ready or state.draining
        info.pop("ready", None)
        body = {
            "status": "draining" if state.draining else ("ok" if alive else "engine stopped"),
            "version": __version__,
            **info,
        }
        return JSONResponse(body, status_code=200 if alive else 503)

    @app.get("/readyz", responses={503: {"description": "draining or stopped", "model": ErrorBody}})
    async def readyz() -> JSONResponse:
        """200 while admitting requests; 503 while draining or stopped (take me out of rotation)."""
        if not state.draining and engine.ready:
            try:
                info = await engine.call("status")
                return JSONResponse(
                    {"ready": True, "queue_depth": info["queue_depth"], "running": info["running"]}
                )
            except EngineDied:
                pass
        return errors.error_response(503, "not ready: the server is draining or its engine has stopped")

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> Response:
        try:
            snapshot = await engine.call("metrics")
        except EngineDied:
            snapshot = None
        return Response(metrics.render(snapshot, state.http), media_type=metrics.CONTENT_TYPE)
