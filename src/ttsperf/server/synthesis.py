"""One synthesis from an asyncio handler: submit (engine refusals -> HTTP errors), events (a client
that goes away cancels the request, so the engine frees its slot within a step), outcomes
(SynthError kinds -> status codes), and the statistics headers every buffered answer carries.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable

from starlette.types import Receive

from ttsperf.engine.engine import Engine
from ttsperf.engine.types import (
    AudioChunk,
    Event,
    NotAccepting,
    QueueFull,
    RequestHandle,
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


def submit(engine: Engine, request: SynthRequest, field: str) -> RequestHandle:
    """Queue `request`; `field` is the body field holding the text, named in errors about it."""
    try:
        return engine.submit(request, loop=asyncio.get_running_loop())
    except QueueFull as exc:
        raise ApiError(
            503,
            f"the queue is full ({exc.depth} requests waiting); retry after {exc.retry_after:g} s",
            type="overloaded_error",
            headers=_retry_after(exc.retry_after),
        ) from None
    except NotAccepting:
        raise draining(engine.config.retry_after) from None
    except TextTooLong as exc:
        raise ApiError(
            413,
            f"{field}: {exc.tokens} tokens after prompt decoration; expected at most {exc.limit}",
            field,
            extra={"limit": exc.limit, "tokens": exc.tokens},
        ) from None
    except UserError as exc:  # the tokenizer's verdict on the text, e.g. nothing but prompt markers
        raise ApiError(400, f"{field}: {exc}", field) from None


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
    if error.kind == "too_long":
        return ApiError(413, f"{field}: {error.message}", field)
    return ApiError(500, f"internal error in the engine: {error.message}")


async def _cancel_on_disconnect(receive: Receive, handle: RequestHandle) -> None:
    # The body has been read, so the next message the server sends us is the disconnect.
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            handle.cancel()
            return


async def events(
    handle: RequestHandle, receive: Receive, on_close: Callable[[], None] | None = None
) -> AsyncIterator[Event]:
    """The handle's events as they arrive: AudioChunk*, then one SynthResult or SynthError.

    If the client disconnects, or the consumer stops early (a streaming response cancelled by the
    server on disconnect), the request is cancelled so the engine frees its batch slot. `on_close`
    runs once, when the consumer is done with the request either way.
    """
    watcher = asyncio.create_task(_cancel_on_disconnect(receive, handle))
    try:
        while True:
            event = await handle.next_event()
            yield event
            if not isinstance(event, AudioChunk):
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
