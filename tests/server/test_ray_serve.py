"""`ttsperf serve --ray`: the tiny model on a 2-replica Ray Serve deployment on this CPU, started by
the real command. Both endpoints (buffered and streamed), errors, auth and /metrics behave as in
one process; requests spread over both replicas (X-Replica on every answer, and each replica's
own /metrics); Ray's queue limit answers 503 + Retry-After; SIGTERM stops the command cleanly."""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ttsperf.audio import decode_wav, from_pcm16

from .helpers import SHORT, expected_samples, parse_metrics
from .ray_live import RayServe, needs_ray, start_ray_serve

pytestmark = [needs_ray, pytest.mark.slow]  # slow: a Ray cluster per module
MEDIUM = "今天天气很好我们去公园散步吧" * 2  # 28 characters: ~250 steps, a second or two of work here
MAX_BATCH, MAX_QUEUED = 2, 4
# As many as the two replicas run at once (2 x 2), so none waits in Ray's queue: Ray counts requests
# still being routed as queued, and a burst of 6 against 4 queue places was refused one in some runs.
# Each replica takes at most MAX_BATCH at once, so SPREAD together cannot all go to one.
SPREAD = 2 * MAX_BATCH


@pytest.fixture(scope="module")
def ray_live():
    live = start_ray_serve("--max-batch", str(MAX_BATCH), "--max-queued", str(MAX_QUEUED), replicas=2)
    yield live
    live.stop()


def concurrently(n: int, call) -> list:
    """Run call(i) for i < n on n threads released together."""
    gate = threading.Barrier(n)

    def run(i: int):
        gate.wait()
        return call(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def test_invoke_spreads_over_both_replicas(ray_live: RayServe):
    with ray_live.client() as c:
        answers = concurrently(SPREAD, lambda i: c.post("/invoke", json={"text": SHORT, "seed": i}))
    assert [r.status_code for r in answers] == [200] * SPREAD
    for r in answers:
        samples, rate = decode_wav(r.content)
        assert rate == 24000 and len(samples) == expected_samples(SHORT)
    replicas = Counter(r.headers["x-replica"] for r in answers)
    print(f"\n/invoke answers per replica: {dict(replicas)}")
    assert len(replicas) == 2


def test_speech_streams_and_buffers_on_both_replicas(ray_live: RayServe):
    def speech(i: int) -> tuple[str, int, int]:
        body = {"input": SHORT, "seed": i, "response_format": "pcm", "stream": i % 2 == 0}
        with ray_live.client() as c, c.stream("POST", "/v1/audio/speech", json=body) as r:
            pieces = list(r.iter_bytes())
            return r.headers["x-replica"], r.status_code, len(from_pcm16(b"".join(pieces)))

    answers = concurrently(SPREAD, speech)
    assert {(code, n) for _, code, n in answers} == {(200, expected_samples(SHORT))}
    assert len({replica for replica, _, _ in answers}) == 2


def test_sse_stream_ends_with_done(ray_live: RayServe):
    with ray_live.client() as c:
        text = c.post("/v1/audio/speech", json={"input": SHORT, "stream_format": "sse"}).text
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert events[0]["type"] == "speech.audio.delta" and events[-1]["type"] == "speech.audio.done"


def test_errors_and_auth_are_the_same_as_in_one_process(ray_live: RayServe):
    with ray_live.client() as c:
        bad = c.post("/invoke", json={"txt": "hi"})
        assert bad.status_code == 400
        assert bad.json()["error"]["field"] == "text"
        assert "x-replica" in bad.headers
        assert c.get("/v1/models").status_code == 200
    with httpx.Client(base_url=ray_live.url, timeout=60) as anonymous:
        denied = anonymous.post("/invoke", json={"text": SHORT})
        assert denied.status_code == 401 and denied.headers["www-authenticate"] == "Bearer"
        assert anonymous.get("/healthz").json()["status"] == "ok"


def metrics_by_replica(live: RayServe, tries: int = 40) -> dict[str, dict[str, float]]:
    """Each replica's own /metrics (a scrape reaches one replica; X-Replica says which)."""
    seen: dict[str, dict[str, float]] = {}
    with live.client() as c:
        for _ in range(tries):
            r = c.get("/metrics")
            assert r.status_code == 200
            seen[r.headers["x-replica"]] = parse_metrics(r.text)
            if len(seen) == 2:
                break
    return seen


def test_each_replicas_metrics_count_its_own_synthesis(ray_live: RayServe):
    seen = metrics_by_replica(ray_live)
    assert len(seen) == 2
    for replica, samples in seen.items():
        served = samples.get('ttsperf_http_requests_total{code="200",endpoint="/invoke"}', 0)
        audio = samples["ttsperf_audio_seconds_total"]
        print(f"replica {replica}: /invoke 200 = {served:g}, audio {audio:.1f} s")
        assert served >= 1  # test_invoke_spreads_over_both_replicas reached both


def test_past_the_queue_limit_ray_answers_503_with_retry_after(ray_live: RayServe):
    """2 replicas x 2 at once + 4 queued = 8 held; 16 together: the rest refused at once."""
    n = 16
    with ray_live.client() as c:
        answers = concurrently(n, lambda i: c.post("/invoke", json={"text": MEDIUM, "seed": i}))
    codes = Counter(r.status_code for r in answers)
    print(f"16 at once against 8 places: {dict(codes)}")
    # The 16 are not sent in the same instant: a request that ends meanwhile frees a place, so more
    # than 8 may be accepted; what matters is that past the limit Ray refuses, and nothing else fails.
    assert set(codes) <= {200, 503} and codes[503] >= 1
    assert codes[200] >= 2 * MAX_BATCH  # what was accepted was answered
    for r in answers:
        if r.status_code == 503:
            assert int(r.headers["retry-after"]) >= 1
        else:
            assert len(decode_wav(r.content)[0]) == expected_samples(MEDIUM)


def test_sigterm_stops_ray_and_the_command_exits_0(ray_live: RayServe):
    assert ray_live.stop() == 0, ray_live.output()[-3000:]
    with pytest.raises(httpx.HTTPError):
        httpx.get(ray_live.url + "/healthz", timeout=5)
