"""Both synthesis endpoints, in every format, against the real server: valid audio of the length
the speech-rate model gives, statistics headers that match it; and the service endpoints."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from ttsperf.audio import decode_wav, from_pcm16
from ttsperf.model.length import SpeechRate
from ttsperf.server.schemas import MODEL_IDS

from .helpers import SHORT, expected_samples, scrape

TEXT = "Streaming speech from a batched engine, chunk by chunk."  # 9 words -> 138 steps, 6 chunks


def check_stats_headers(response, text: str) -> None:
    steps = SpeechRate().steps(text)
    assert int(response.headers["x-decode-steps"]) == steps
    seconds = expected_samples(text) / 24000
    assert float(response.headers["x-audio-seconds"]) == pytest.approx(seconds, abs=1e-4)
    assert float(response.headers["x-queue-seconds"]) >= 0
    assert float(response.headers["x-inference-seconds"]) > 0
    assert response.headers["x-length-source"] == "speech-rate"


def audible(samples: np.ndarray) -> bool:
    return 1e-3 < float(np.sqrt(np.mean(samples**2))) and np.abs(samples).max() <= 1.0


def test_invoke_answers_a_wav_of_the_expected_length(live):
    with live.client() as c:
        r = c.post("/invoke", json={"text": SHORT})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    samples, rate = decode_wav(r.content)
    assert rate == 24000 and len(samples) == expected_samples(SHORT)
    assert audible(samples)
    check_stats_headers(r, SHORT)


@pytest.mark.parametrize("fmt", ["wav", "pcm"])
def test_speech_buffered_has_statistics_headers(live, fmt):
    with live.client() as c:
        body = {"input": TEXT, "response_format": fmt, "stream": False, "seed": 1}
        r = c.post("/v1/audio/speech", json=body)
    assert r.status_code == 200 and r.headers["content-type"] == f"audio/{fmt}"
    samples = decode_wav(r.content)[0] if fmt == "wav" else from_pcm16(r.content)
    assert len(samples) == expected_samples(TEXT) and audible(samples)
    check_stats_headers(r, TEXT)


@pytest.mark.parametrize("fmt", ["wav", "pcm"])
def test_speech_streams_audio_by_default(live, fmt):
    body = {"input": TEXT, "response_format": fmt}
    with live.client() as c, c.stream("POST", "/v1/audio/speech", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"] == f"audio/{fmt}"
        assert r.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.headers
        body = r.read()
    if fmt == "wav":  # unknown-length header: readers take the data to the end
        assert body[4:8] == b"\xff\xff\xff\xff" and body[40:44] == b"\xff\xff\xff\xff"
        samples, rate = decode_wav(body)
        assert rate == 24000
    else:
        samples = from_pcm16(body)
    assert len(samples) == expected_samples(TEXT) and audible(samples)


def sse_events(text: str) -> list[dict]:
    events = []
    for block in text.split("\n\n"):
        if block.strip():
            assert block.startswith("data: ")
            events.append(json.loads(block[len("data: ") :]))
    return events


def test_speech_sse_sends_base64_deltas_then_done_with_statistics(live):
    with live.client() as c:
        r = c.post("/v1/audio/speech", json={"input": TEXT, "stream_format": "sse"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    deltas, done = events[:-1], events[-1]
    assert len(deltas) >= 3 and all(e["type"] == "speech.audio.delta" for e in deltas)
    wav = b"".join(base64.b64decode(e["audio"]) for e in deltas)  # the deltas concatenate to a file
    samples, _ = decode_wav(wav)
    assert len(samples) == expected_samples(TEXT)
    assert done["type"] == "speech.audio.done"
    stats = done["ttsperf"]
    assert stats["decode_steps"] == SpeechRate().steps(TEXT) == done["usage"]["output_tokens"]
    assert stats["audio_seconds"] == pytest.approx(len(samples) / 24000, abs=1e-4)
    assert stats["chunks"] == len(deltas)
    assert done["usage"]["input_tokens"] > 0


def test_speed_maps_to_a_chatts_speed_token_and_still_synthesizes(live):
    with live.client() as c:
        r = c.post("/v1/audio/speech", json={"input": SHORT, "speed": 2.0, "stream": False})
    # synthetic weights take their length from the speech-rate model, which ignores the token
    assert r.status_code == 200 and int(r.headers["x-decode-steps"]) == SpeechRate().steps(SHORT)


def test_models_lists_the_accepted_ids(live):
    with live.client() as c:
        body = c.get("/v1/models").json()
    assert [m["id"] for m in body["data"]] == list(MODEL_IDS)
    assert {m["root"] for m in body["data"]} == {"tiny"}


def test_healthz_reports_switches_device_model_and_batch(live):
    with live.client() as c:
        body = c.get("/healthz").json()
    assert body["status"] == "ok" and body["device"] == "cpu" and body["model"] == "tiny"
    assert body["max_batch"] == 8 and body["weights"] == "synthetic"
    assert body["switches"]["dtype"] == {"value": "fp32", "applied": True, "note": ""}
    assert body["switches"]["cudnn_benchmark"]["applied"] is False  # says why, does not fail
    assert body["switches"]["compile"] == {"value": False, "applied": False, "note": "off"}
    assert body["decode_step"] == {
        "compiled_graphs": 0, "compile_seconds": 0.0, "cuda_graphs": [], "eager_fallback_steps": 0,
    }  # fmt: skip


def test_readyz_is_200_while_admitting(live):
    with live.client() as c:
        r = c.get("/readyz")
    assert r.status_code == 200 and r.json()["ready"] is True


def test_metrics_count_what_was_served(live):
    with live.client() as c:
        before = scrape(c)
        assert c.post("/invoke", json={"text": SHORT}).status_code == 200
        after = scrape(c)
    steps = SpeechRate().steps(SHORT)
    assert after["ttsperf_decode_steps_total"] - before["ttsperf_decode_steps_total"] == steps
    assert after["ttsperf_audio_seconds_total"] - before["ttsperf_audio_seconds_total"] == pytest.approx(
        expected_samples(SHORT) / 24000
    )
    key = 'ttsperf_engine_requests_total{status="ok"}'
    assert after[key] - before.get(key, 0) == 1
    key = 'ttsperf_http_requests_total{code="200",endpoint="/invoke"}'
    assert after[key] - before.get(key, 0) == 1
    assert after["ttsperf_step_seconds_count"] > before["ttsperf_step_seconds_count"]
    # a buffered answer decodes its audio in one call, at its last step
    name = "ttsperf_audio_call_seconds_"
    calls, seconds = (after[name + k] - before[name + k] for k in ("count", "sum"))
    assert calls == 1 and seconds > 0
    assert after['ttsperf_batch_size_bucket{le="+Inf"}'] == after["ttsperf_batch_size_count"]
    assert "ttsperf_queue_depth" in after and "ttsperf_running_requests" in after
    assert after['ttsperf_device_memory_bytes{kind="process_rss"}'] > 0
    # the engine froze its start-up heap once warm (torch, the model: far more than 10,000
    # objects), and each process counts its own collections
    assert after['ttsperf_gc_frozen_objects{process="engine"}'] > 10_000
    for process in ("front", "engine"):
        for generation in "012":
            assert f'ttsperf_gc_pause_seconds_count{{generation="{generation}",process="{process}"}}' in after


def test_api_key_opens_the_synthesis_endpoints(make_live):
    server = make_live(api_key="s3cret")
    with server.client() as c:
        r = c.post("/invoke", json={"text": SHORT}, headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 200
        assert c.get("/v1/models", headers={"X-API-Key": "s3cret"}).status_code == 200
        assert c.get("/healthz").status_code == 200  # probes and scrapers need no key
        assert c.get("/metrics").status_code == 200
