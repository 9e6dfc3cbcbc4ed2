"""What happens around a request: the client leaves (its slot is freed), the queue is full (503 +
Retry-After), the deadline passes (504), memory runs out (503), the server is told to stop
(SIGTERM: refuse new work, answer every accepted request, exit 0)."""

from __future__ import annotations

import json
import signal
import socket
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ttsperf.audio import decode_wav

from .helpers import LONG, SHORT, ServeProcess, expected_samples, open_request, scrape, wait_for

LONG_STEPS = 2048  # LONG is capped at the engine's max_new_tokens


def test_a_client_leaving_a_stream_frees_its_slot(live):
    engine = live.engine
    cancelled, steps = engine.stats.requests["cancelled"], engine.stats.decode_steps
    with live.client() as c:
        with c.stream("POST", "/v1/audio/speech", json={"input": LONG, "response_format": "pcm"}) as r:
            next(r.iter_raw())  # audio is flowing; now hang up
    # the outcome is counted a moment before the row leaves the batch: wait for both
    wait_for(
        lambda: engine.stats.requests["cancelled"] == cancelled + 1 and engine.running() == 0,
        what="the engine to cancel and free the slot",
    )
    assert engine.stats.decode_steps - steps < LONG_STEPS  # stopped early, not run to the end


def test_a_client_leaving_a_buffered_request_frees_its_slot(live):
    engine = live.engine
    cancelled, steps = engine.stats.requests["cancelled"], engine.stats.decode_steps
    sock = open_request(live.url, "/invoke", json.dumps({"text": LONG}).encode())
    wait_for(lambda: engine.running() == 1, what="the request to run")
    sock.close()
    # the outcome is counted a moment before the row leaves the batch: wait for both
    wait_for(
        lambda: engine.stats.requests["cancelled"] == cancelled + 1 and engine.running() == 0,
        what="the engine to cancel and free the slot",
    )
    assert engine.stats.decode_steps - steps < LONG_STEPS
    with live.client() as c:  # the server noted a request nobody was left to answer
        assert scrape(c).get('ttsperf_http_requests_total{code="499",endpoint="/invoke"}', 0) >= 1


def test_a_client_leaving_mid_body_is_no_server_error(make_live):
    server = make_live()
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b'POST /invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"text": ')
        wait_for(lambda: server.server.state.http.in_flight == 1, what="the request to start")
    key = 'ttsperf_http_requests_total{code="499",endpoint="/invoke"}'
    with server.client() as c:
        wait_for(lambda: scrape(c).get(key) == 1, what="the request to be counted as abandoned")
        assert not any('code="500"' in name for name in scrape(c))
    assert server.engine.stats.requests.total() == 0


def test_a_full_queue_answers_503_with_retry_after(make_live):
    server = make_live(max_batch=1, max_queue=1)
    body = json.dumps({"text": LONG}).encode()
    running = open_request(server.url, "/invoke", body)
    wait_for(lambda: server.engine.running() == 1, what="the first request to run")
    queued = open_request(server.url, "/invoke", body)
    wait_for(lambda: server.engine.queue_depth() == 1, what="the second request to queue")
    with server.client() as c:
        r = c.post("/invoke", json={"text": SHORT})
        metrics = scrape(c)
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json()["error"]["type"] == "overloaded_error" and "queue is full" in r.json()["error"]["message"]
    assert metrics["ttsperf_rejected_total"] == 1 and metrics["ttsperf_queue_depth"] == 1
    running.close()
    queued.close()
    wait_for(lambda: server.engine.pending() == 0, what="the abandoned requests to be cancelled")


def test_a_passed_deadline_answers_504(make_live):
    # LONG's first audio comes after ~40 ms and its end after ~2.5 s here: a 1 s deadline falls well
    # between them even on a machine several times slower (0.3 s was too close to the first audio).
    server = make_live(request_timeout=1.0)
    with server.client() as c:
        r = c.post("/invoke", json={"text": LONG})
    assert r.status_code == 504
    assert r.json()["error"]["type"] == "timeout_error" and "deadline" in r.json()["error"]["message"]


def test_a_deadline_passing_mid_stream_cuts_the_stream_short(make_live):
    """Audio already went out with status 200: the only honest signal left is an incomplete
    body (raw audio) or a final error event (SSE)."""
    # LONG's first audio comes after ~40 ms and its end after ~2.5 s here: a 1 s deadline falls well
    # between them even on a machine several times slower (0.3 s was too close to the first audio).
    server = make_live(request_timeout=1.0)
    with server.client() as c:
        with pytest.raises(httpx.RemoteProtocolError):
            with c.stream("POST", "/v1/audio/speech", json={"input": LONG, "response_format": "pcm"}) as r:
                assert r.status_code == 200
                r.read()
        r = c.post("/v1/audio/speech", json={"input": LONG, "stream_format": "sse"})
        assert scrape(c)['ttsperf_http_requests_total{code="aborted",endpoint="/v1/audio/speech"}'] == 1
    last = json.loads(r.text.strip().split("\n\n")[-1][len("data: ") :])
    assert last == {
        "type": "error",
        "error": {"type": "timeout_error", "message": last["error"]["message"], "field": None},
    }


def test_out_of_memory_answers_503_and_the_server_carries_on(make_live):
    server = make_live(max_batch=1, inject_oom_at_steps=frozenset({0}))
    with server.client() as c:
        failed = c.post("/invoke", json={"text": SHORT})
        ok = c.post("/invoke", json={"text": SHORT})
    assert failed.status_code == 503 and failed.headers["retry-after"] == "1"
    assert failed.json()["error"]["message"].startswith("out of memory")
    assert ok.status_code == 200 and len(decode_wav(ok.content)[0]) == expected_samples(SHORT)


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_a_stream_failing_before_any_audio_keeps_its_status_code(make_live, stream_format):
    """The status line waits for the first audio, so an early failure is a real 503, not a 200."""
    server = make_live(max_batch=1, inject_oom_at_steps=frozenset({0}))
    with server.client() as c:
        r = c.post("/v1/audio/speech", json={"input": SHORT, "stream_format": stream_format})
    assert r.status_code == 503 and r.json()["error"]["message"].startswith("out of memory")


@pytest.mark.slow
def test_sigterm_refuses_new_work_and_answers_every_accepted_request():
    with ServeProcess(
        "--synthetic", "--config", "tiny", "--max-batch", "2", "--max-queue", "8",
        "--cuda-graphs",  # on this CPU: logged as not applicable, and nothing fails
    ) as server:  # fmt: skip
        proc, log, reader = server.proc, server.log, server.reader
        client = server.client()
        accepted = ThreadPoolExecutor(4)
        futures = [accepted.submit(client.post, "/invoke", json={"text": LONG, "seed": i}) for i in range(4)]
        # all four accepted (two decoding, two queued, or one of them in its prefill) before the signal
        wait_for(
            lambda: (m := scrape(client))["ttsperf_running_requests"] + m["ttsperf_queue_depth"] == 4,
            what="four requests in the engine",
        )
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: client.get("/readyz").status_code == 503, 10, "/readyz to turn 503")
        refused = client.post("/invoke", json={"text": SHORT})
        assert refused.status_code == 503 and "draining" in refused.json()["error"]["message"]
        for future in futures:
            r = future.result(timeout=120)
            assert r.status_code == 200 and len(decode_wav(r.content)[0]) == expected_samples(LONG)
        assert proc.wait(60) == 0
        reader.join(10)  # the last lines may still be in the pipe
        assert any("draining 4 accepted requests" in line for line in log), "".join(log)
        assert sum("switches: dtype=fp32 [on]" in line for line in log) == 1  # logged once, at start
        assert any("cuda_graphs=True [off: not applicable on cpu" in line for line in log), "".join(log)
