"""One synthesis from an asyncio handler: submit to the engine's core process and wait for its
verdict (refusals -> HTTP errors), events (a client that goes away cancels the request, so the
engine frees its slot within a step), outcomes (SynthError kinds -> status codes), and the
statistics headers every buffered answer carries.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable

from starlette.types import Receive

from ttsperf.engine.client import FrontHandle
from ttsperf.engine.pool import Engines
from ttsperf.engine.types import (
    Accepted,
    FrontEvent,
    NotAccepting,
    PcmChunk,
    QueueFull,
    Rejected,
    SynthError,
    SynthRequest,
    SynthResult,
    TextTooLong,
)
from ttsperf.errors import UserError
from ttsperf.server.errors import ApiError


def _retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}  # HTTP wants whole seconds


def draining(retry_after: float) -> ApiError:
    # Connection: close so that keep-alive clients reconnect, through the balancer, elsewhere;
    # Retry-After like every 503 here, so that retrying clients (OpenAI's SDK, bench) do retry.
    message = "the server is draining for shutdown and admits no new requests"
    return ApiError(503, message, headers={"Connection": "close", **_retry_after(retry_after)})


def submit(engine: Engines, request: SynthRequest) -> FrontHandle:
    """Send `request` to the engine (no await: once a drain has begun, nothing new is sent)."""
    try:
        return engine.submit(request, asyncio.get_running_loop())
    except NotAccepting:
        raise draining(engine.spec.engine.retry_after) from None


async def accepted(handle: FrontHandle, field: str, retry_after: float) -> int:
    """Wait for the engine's verdict on `handle` -> the prompt's tokens; a refusal raises the HTTP
    error for it. `field` is the body field holding the text, named in errors about it."""
    first = await handle.next_event()
    if isinstance(first, Accepted):
        return first.prompt_tokens
    if isinstance(first, SynthError):  # the engine died before it could answer
        raise outcome_error(first, field, retry_after) or ApiError(503, first.message)
    assert isinstance(first, Rejected), first
    raise refusal(first.error, field, retry_after)


def refusal(exc: Exception, field: str, retry_after: float) -> ApiError:
    """The HTTP answer to a request the engine refused at submission."""
    if isinstance(exc, QueueFull):
        return ApiError(
            503,
            f"the queue is full ({exc.depth} requests waiting); retry after {exc.retry_after:g} s",
            type="overloaded_error",
            headers=_retry_after(exc.retry_after),
        )
    if isinstance(exc, NotAccepting):
        return draining(retry_after)
    if isinstance(exc, TextTooLong):
        return ApiError(
            413,
            f"{field}: {exc.tokens} tokens after prompt decoration; expected at most {exc.limit}",
            field,
            extra={"limit": exc.limit, "tokens": exc.tokens},
        )
    if isinstance(exc, UserError):  # the tokenizer's verdict on the text, e.g. nothing but prompt markers
        return ApiError(400, f"{field}: {exc}", field)
    return ApiError(500, f"internal error in the engine: {type(exc).__name__}: {exc}")


def outcome_error(error: SynthError, field: str, retry_after: float) -> ApiError | None:
    """The HTTP answer to a failed synthesis; None when the client is gone and nobody listens."""
    if error.kind == "cancelled":
        return None
    if error.kind == "timeout":
        return ApiError(504, f"the request did not finish before its deadline ({error.message})")
    if error.kind == "oom":
        return ApiError(503, f"out of memory: {error.message}", headers=_retry_after(retry_after))
    if error.kind == "shutdown":
        message = "the server shut down before this request could run"
        return ApiError(503, message, headers=_retry_after(retry_after))
    if error.kind == "engine_died":  # not this request's fault: another replica can serve it
        return ApiError(503, f"the engine stopped: {error.message}", headers=_retry_after(retry_after))
    if error.kind == "too_long":
        return ApiError(413, f"{field}: {error.message}", field)
    return ApiError(500, f"internal error in the engine: {error.message}")


async def _cancel_on_disconnect(receive: Receive, handle: FrontHandle) -> None:
    # The body has been read, so the next message the server sends us is the disconnect.
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            handle.cancel()
            return


async def events(
    handle: FrontHandle, receive: Receive, on_close: Callable[[], None] | None = None
) -> AsyncIterator[FrontEvent]:
    """The handle's events after Accepted, as they arrive: PcmChunk*, then one SynthResult or
    SynthError.

    If the client disconnects, or the consumer stops early (a streaming response cancelled by the
    server on disconnect), the request is cancelled so the engine frees its batch slot. `on_close`
    runs once, when the consumer is done with the request either way.
    """
    watcher = asyncio.create_task(_cancel_on_disconnect(receive, handle))
    try:
        while True:
            event = await handle.next_event()
            yield event
            if not isinstance(event, PcmChunk):
                return
    finally:
        watcher.cancel()
        handle.cancel()  # a no-op once the engine has answered
        if on_close is not None:
            on_close()


def stats_headers(result: SynthResult) -> dict[str, str]:
    """What happened, for any load tester: audio made, steps taken, time queued and computing."""
    return {
        "X-Audio-Seconds": f"{result.audio_seconds:.4f}",
        "X-Decode-Steps": str(result.steps),
        "X-Queue-Seconds": f"{result.queue_seconds:.4f}",
        "X-Inference-Seconds": f"{result.inference_seconds:.4f}",
        "X-Length-Source": result.length_source,
    }


def stats_json(result: SynthResult) -> dict[str, float | int | str]:
    """The same statistics for streams, where headers leave before the numbers exist."""
    return {
        "audio_seconds": round(result.audio_seconds, 4),
        "decode_steps": result.steps,
        "queue_seconds": round(result.queue_seconds, 4),
        "inference_seconds": round(result.inference_seconds, 4),
        "length_source": result.length_source,
        "chunks": result.chunks,
    }
