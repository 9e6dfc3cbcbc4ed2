"""Faults under load: clients hanging up mid-stream, SIGTERM while requests arrive, an out-of-memory
in a decode step. Each time the server must carry on, and every request it accepted must be answered.
(tests/server/test_lifecycle.py covers the same faults one request at a time.)"""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from server.helpers import SHORT, RunningPeak, ServeProcess, expected_samples, scrape, start_live, wait_for
from ttsperf.audio import decode_wav

from .load import Outcome, Tally, offer, wav_samples

TINY = ("--synthetic", "--config", "tiny")
MEDIUM = "今天天气很好我们去公园散步吧" * 3  # 42 characters -> 380 steps: a stream of 16 chunks
TWELVE = "今天天气很好我们去公园散步"  # 13 characters -> 118 steps


@pytest.mark.slow
def test_clients_hanging_up_mid_stream_free_their_slots_and_the_rest_is_served():
    with ServeProcess(*TINY, "--max-batch", "8") as server, server.client() as c:
        body = {"input": MEDIUM, "response_format": "pcm"}
        expected_bytes = 2 * expected_samples(MEDIUM)

        def stream(i: int) -> Outcome:
            out = Outcome(sent_at=0.0)
            try:
                with c.stream("POST", "/v1/audio/speech", json={**body, "seed": i}) as r:
                    out.status = r.status_code
                    received = 0
                    for chunk in r.iter_raw():
                        received += len(chunk)
                        if i % 2:  # odd clients hang up at their first audio
                            out.abandoned = True
                            return out
                    if received != expected_bytes:
                        out.error = f"{received} bytes of PCM, expected {expected_bytes}"
            except httpx.HTTPError as exc:
                out.error = f"{type(exc).__name__}: {exc}"
            return out

        with ThreadPoolExecutor(8) as pool:
            tally = Tally(list(pool.map(stream, range(8))))
        wait_for(lambda: scrape(c)["ttsperf_running_requests"] == 0, 60, "every slot to be freed")
        after = c.post("/invoke", json={"text": SHORT})
        metrics = scrape(c)
    hung_up = sum(o.abandoned for o in tally.outcomes)
    tally.figure("client hangs up mid-stream")
    assert hung_up == 4 and tally.codes() == {200: 4}
    assert metrics['ttsperf_engine_requests_total{status="cancelled"}'] == 4  # stopped, not run to the end
    assert after.status_code == 200 and len(decode_wav(after.content)[0]) == expected_samples(SHORT)


@pytest.mark.slow
def test_sigterm_during_load_drains_and_loses_nothing():
    """Requests arrive before, during and after the drain: those accepted are answered 200 in
    full, those after the signal get 503 (draining) or a refused connection (exited); exit code 0."""
    server = ServeProcess(*TINY, "--max-batch", "4", "--max-queue", "64")
    try:
        check = wav_samples(expected_samples(SHORT))
        signalled: list[float] = []

        def sigterm() -> None:
            signalled.append(time.monotonic())
            server.proc.send_signal(signal.SIGTERM)

        timer = threading.Timer(2.0, sigterm)
        timer.start()
        # a connection per request: one reused as serve closes it would be lost unread (CI saw one)
        tally = offer(
            server.url, "/invoke", {"text": SHORT}, rate=20, seconds=6, check=check, keepalive=False
        )
        code = server.proc.wait(60)
        server.reader.join(10)
    finally:
        timer.cancel()
        server.stop()
    # sent well before the signal (0.5 s: the client's own loop may lag on this loaded machine)
    before = [o for o in tally.outcomes if tally.t0 + o.sent_at < signalled[0] - 0.5]
    drained = next(line for line in server.log if "draining" in line)
    tally.figure("SIGTERM during load", exit_code=code, drained=drained.split("draining ")[1].split()[0])
    assert code == 0
    assert set(tally.codes()) <= {200, 503}
    assert all(o.status == 200 for o in before), "requests sent before the signal must all be served"
    assert all(o.retry_after == "1" for o in tally.outcomes if o.status == 503)
    assert tally.codes()[503] + sum(o.refused for o in tally.outcomes) > 0, (
        "nothing arrived after the signal?"
    )


@pytest.mark.slow
def test_an_out_of_memory_in_a_step_shrinks_the_batch_and_loses_nothing(tiny_pipe):
    """A server started from the test (the same app, engine process and uvicorn server, on
    loopback): the fault hook is an
    EngineConfig field for tests, deliberately not a `ttsperf serve` flag or environment variable."""
    # 12 requests of 118 steps sent at once: at step 60 four rows run (-> 2), at step 100 the two kept
    # ones still do (-> 1); 60 steps leave time for all 12 to arrive on a loaded machine
    server = start_live(max_batch=4, inject_oom_at_steps=frozenset({60, 100}))
    try:
        check = wav_samples(expected_samples(TWELVE))
        with RunningPeak(server.engine) as peak:
            started = time.monotonic()
            tally = offer(server.url, "/invoke", {"text": TWELVE}, rate=1000, seconds=0.012, check=check)
            elapsed = time.monotonic() - started
        with server.client() as c:
            after = c.post("/invoke", json={"text": SHORT})
            metrics = scrape(c)
        max_batch, effective = server.engine.max_batch, server.engine.effective_max_batch
    finally:
        server.stop()
    tally.figure(
        "out of memory in a step",
        ooms=int(metrics["ttsperf_oom_total"]),
        batch=f"{max_batch}->{effective}",
        seconds=f"{elapsed:.1f}",
    )
    assert tally.codes() == {200: tally.sent}  # requeued rows restart, answered as if nothing happened
    assert metrics["ttsperf_oom_total"] == 2 and peak.peak == 4
    assert effective == 1  # 4 -> 2 -> 1: halved at each fault
    assert after.status_code == 200
