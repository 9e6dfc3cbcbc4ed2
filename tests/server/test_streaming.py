"""Streaming forwards each engine chunk as it is made: the client holds audio while the engine is
still decoding the same request (time to first audio is real, not the whole synthesis)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from ttsperf.audio import decode_wav, from_pcm16

from .helpers import LONG, expected_samples


@pytest.mark.slow
def test_first_audio_arrives_while_the_request_is_still_decoding(live):
    engine = live.engine
    ok_before = engine.stats.requests["ok"]
    pieces = []
    with live.client() as c:
        body = {"input": LONG, "response_format": "pcm", "seed": 3}
        with c.stream("POST", "/v1/audio/speech", json=body) as r:
            assert r.status_code == 200
            for piece in r.iter_raw():
                if not pieces:
                    # the first bytes are here: the same request must still be in the batch
                    running_at_first, ok_at_first = engine.running(), engine.stats.requests["ok"]
                pieces.append(piece)
    assert running_at_first == 1 and ok_at_first == ok_before
    assert engine.stats.requests["ok"] == ok_before + 1
    assert len(pieces) >= 3  # several chunks, not one body at the end
    assert len(from_pcm16(b"".join(pieces))) == expected_samples(LONG)


@pytest.mark.slow
def test_sse_first_delta_arrives_while_the_request_is_still_decoding(live):
    engine = live.engine
    ok_before = engine.stats.requests["ok"]
    with live.client() as c:
        body = {"input": LONG, "stream_format": "sse", "seed": 3}
        with c.stream("POST", "/v1/audio/speech", json=body) as r:
            lines = r.iter_lines()
            first = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
            running_at_first, ok_at_first = engine.running(), engine.stats.requests["ok"]
            rest = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert first["type"] == "speech.audio.delta"
    assert running_at_first == 1 and ok_at_first == ok_before
    assert rest[-1]["type"] == "speech.audio.done" and len(rest) >= 3


@pytest.mark.slow
def test_streamed_and_buffered_audio_of_a_greedy_request_agree(live):
    """Same request, same greedy codes: the streamed chunks (incremental decoding) give the audio
    of the buffered whole-utterance decode, up to the engine's seam approximation."""
    text = "A greedy request, streamed and buffered, must sound the same."
    greedy = {"input": text, "top_k": 1, "seed": 0, "response_format": "wav"}
    with live.client() as c:
        streamed = c.post("/v1/audio/speech", json=greedy).content
        buffered = c.post("/v1/audio/speech", json={**greedy, "stream": False}).content
        sse = c.post("/v1/audio/speech", json={**greedy, "stream_format": "sse"}).text
    a, b = decode_wav(streamed)[0], decode_wav(buffered)[0]
    assert len(a) == len(b) == expected_samples(text)
    assert np.abs(a - b).max() < 0.05 * np.abs(b).max()  # seams: no clicks
    deltas = [json.loads(x[6:]) for x in sse.split("\n\n") if x.startswith("data: ")][:-1]
    assert decode_wav(b"".join(base64.b64decode(d["audio"]) for d in deltas))[0].tobytes() == a.tobytes()
