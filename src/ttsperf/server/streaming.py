"""Streamed answers: each PcmChunk from the engine goes to the client the moment it arrives (so time to
first audio is the engine's, not the whole synthesis'), as raw chunks (`stream_format: audio`) or
as server-sent events (`stream_format: sse`).

Raw WAV streams start with a header whose sizes are 0xFFFFFFFF (length unknown), the usual
convention for streamed WAV; Python's `wave` reads such a file to the end of the data (tested).

The statistics a buffered answer sends as X-* headers do not exist when a stream's headers leave,
and HTTP trailers are dropped by most clients and proxies, so SSE streams carry them in the final
`speech.audio.done` event (under `ttsperf`); raw audio streams cannot carry them: ask with
`"stream": false` for a buffered body with headers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

from ttsperf.audio import wav_header
from ttsperf.engine.types import FrontEvent, PcmChunk, SynthError, SynthResult
from ttsperf.server.synthesis import outcome_error, stats_json


class StreamAborted(Exception):
    """The synthesis failed after audio was sent: the only honest signal left is to cut the
    response short (no final empty chunk), which every HTTP client reports as an error."""


def sse(payload: dict) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


async def audio_body(
    first: FrontEvent, rest: AsyncGenerator[FrontEvent, None], fmt: str, sample_rate: int
) -> AsyncIterator[bytes]:
    """Raw bytes: [WAV header] then PCM16 of each chunk as it comes."""
    async with aclosing(rest):  # on every exit: the request is cancelled if still running
        if fmt == "wav":
            yield wav_header(sample_rate)
        event = first
        while True:
            if isinstance(event, PcmChunk):
                yield event.pcm
            elif isinstance(event, SynthResult):
                return
            elif isinstance(event, SynthError):
                if event.kind == "cancelled":  # the client is gone: nobody to tell
                    return
                raise StreamAborted(f"{event.kind}: {event.message}")
            event = await anext(rest)


async def sse_body(
    first: FrontEvent,
    rest: AsyncGenerator[FrontEvent, None],
    fmt: str,
    sample_rate: int,
    input_tokens: int,
    field: str,
) -> AsyncIterator[bytes]:
    """OpenAI's speech events: `speech.audio.delta` with base64 audio (the bytes a raw stream of
    the same format would carry, so concatenated deltas are a playable file), then
    `speech.audio.done` with usage and our statistics, or `error` in the one JSON error shape."""
    async with aclosing(rest):
        prefix = wav_header(sample_rate) if fmt == "wav" else b""
        event = first
        while True:
            if isinstance(event, PcmChunk):
                data, prefix = prefix + event.pcm, b""
                yield sse({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
            elif isinstance(event, SynthResult):
                if prefix:  # no audio at all: still a valid (empty) file
                    yield sse({"type": "speech.audio.delta", "audio": base64.b64encode(prefix).decode()})
                usage = {"input_tokens": input_tokens, "output_tokens": event.steps}
                usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
                yield sse({"type": "speech.audio.done", "usage": usage, "ttsperf": stats_json(event)})
                return
            elif isinstance(event, SynthError):
                err = outcome_error(event, field, retry_after=1.0)
                if err is None:
                    return
                yield sse({"type": "error", "error": err.body()})
                return
            event = await anext(rest)
