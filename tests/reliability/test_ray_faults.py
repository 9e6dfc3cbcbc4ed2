"""A Ray Serve replica killed mid-run (SIGKILL: what the OOM killer or a crash does), under load.

`ttsperf serve --ray` with 2 replicas of the tiny model; 8 clients in a closed loop, half on
/invoke, half streaming /v1/audio/speech. One replica's process is killed while it holds
requests. Expected: Ray starts a replacement; the requests the dead replica held fail cleanly,
promptly and visibly: an error status (Ray's proxy answers 500 for a request whose replica died
before its answer began) or a stream cut short that the client sees as incomplete; never a hang,
never a 200 with short audio. Every other request, and every one after the replacement is up,
succeeds. Prints its figure line:

    ray replica killed: sent=… answered=… 503=… failed_cleanly=… lost=0
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass

import httpx
import pytest

from server.helpers import expected_samples
from server.ray_live import RayServe, needs_ray, start_ray_serve
from ttsperf.audio import decode_wav, from_pcm16

pytestmark = [needs_ray, pytest.mark.slow]  # slow: a Ray cluster per module
MEDIUM = "今天天气很好我们去公园散步吧" * 2  # ~250 steps: a second or two per request here
CLIENTS = 8
CLIENT_TIMEOUT = 120.0  # an answer slower than this is a hang: counted lost
RECOVERY_TIMEOUT = 300.0  # kill -> the replacement replica answering, on a loaded 2-core machine


@dataclass
class Outcome:
    sent: float
    done: float
    kind: str  # ok | 503 | failed (error status or cut stream: the client knows) | lost
    replica: str | None
    detail: str


def one_request(c: httpx.Client, i: int) -> Outcome:
    sent, replica = time.monotonic(), None
    try:
        if i % 2:
            body = {"input": MEDIUM, "response_format": "pcm", "seed": i}
            with c.stream("POST", "/v1/audio/speech", json=body) as r:
                replica = r.headers.get("x-replica")
                samples = len(from_pcm16(b"".join(r.iter_bytes())))
        else:
            r = c.post("/invoke", json={"text": MEDIUM, "seed": i})
            replica = r.headers.get("x-replica")
            samples = len(decode_wav(r.content)[0]) if r.status_code == 200 else 0
    except httpx.TimeoutException as exc:
        return Outcome(sent, time.monotonic(), "lost", replica, f"no answer: {type(exc).__name__}")
    except httpx.TransportError as exc:  # connection closed mid-answer: the stream was cut short
        return Outcome(sent, time.monotonic(), "failed", replica, type(exc).__name__)
    done = time.monotonic()
    if r.status_code == 200:
        ok = samples == expected_samples(MEDIUM)
        return Outcome(sent, done, "ok" if ok else "lost", replica, f"200 with {samples} samples")
    return Outcome(sent, done, "503" if r.status_code == 503 else "failed", replica, str(r.status_code))


class Load:
    """CLIENTS threads, each sending one request after another until stopped."""

    def __init__(self, live: RayServe):
        self.live, self.outcomes, self.lock = live, [], threading.Lock()
        self.stopping = threading.Event()
        self.crashed: list[BaseException] = []  # a bug in this test, not an outcome: fails it
        self.threads = [threading.Thread(target=self._client, args=(k,)) for k in range(CLIENTS)]

    def _client(self, k: int) -> None:
        try:
            with self.live.client(timeout=CLIENT_TIMEOUT) as c:
                i = k
                while not self.stopping.is_set():
                    outcome = one_request(c, i)
                    with self.lock:
                        self.outcomes.append(outcome)
                    i += CLIENTS
        except BaseException as exc:
            self.crashed.append(exc)
            raise

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(CLIENT_TIMEOUT + 30)
        assert not self.crashed, self.crashed

    def snapshot(self) -> list[Outcome]:
        with self.lock:
            return list(self.outcomes)


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def served_by(outcomes: list[Outcome]) -> set[str | None]:
    return {o.replica for o in outcomes if o.kind == "ok"}


@pytest.fixture(scope="module")
def ray_live():
    live = start_ray_serve("--max-batch", "4", "--max-queued", "64", replicas=2)
    yield live
    live.stop()


def test_a_killed_replica_is_replaced_and_nothing_is_lost(ray_live: RayServe):
    pids = ray_live.replica_pids()
    assert len(pids) == 2, f"expected 2 replica processes, found {pids}"
    with Load(ray_live) as load:
        wait_until(lambda: len(served_by(load.snapshot())) == 2, 120, "both replicas answering")
        before = served_by(load.snapshot())
        killed_at = time.monotonic()
        os.kill(pids[0], signal.SIGKILL)  # a replica process of the command this test started

        def replacement() -> set[str | None]:
            return served_by([o for o in load.snapshot() if o.sent > killed_at]) - before

        wait_until(lambda: replacement(), RECOVERY_TIMEOUT, "a replacement replica to answer")
        new = replacement()
        recovered_at = min(o.done for o in load.snapshot() if o.replica in new)
        # then keep the load on until every client has had several requests on the healed deployment
        wait_until(
            lambda: sum(o.sent > recovered_at for o in load.snapshot()) >= 4 * CLIENTS, 120, "more load"
        )
    outcomes = load.snapshot()
    kinds = Counter(o.kind for o in outcomes)
    failed = [o for o in outcomes if o.kind == "failed"]
    print(
        f"\nray replica killed: sent={len(outcomes)} answered={kinds['ok']} 503={kinds['503']} "
        f"failed_cleanly={kinds['failed']} lost={kinds['lost']}"
        f" | replacement answering {recovered_at - killed_at:.1f} s after the kill;"
        f" failures: {dict(Counter(o.detail for o in failed))}"
    )
    assert kinds["lost"] == 0, [o for o in outcomes if o.kind == "lost"]
    assert failed, "the killed replica held requests: some must have failed"
    # the failures are the requests the dead replica held: sent before it died, answered promptly
    assert all(o.sent < recovered_at and o.done - killed_at < 60 for o in failed), failed
    dead = before - {o.replica for o in outcomes if o.sent > recovered_at}
    assert len(dead) == 1  # the killed replica answers no more; the other one served throughout
    after = [o for o in outcomes if o.sent > recovered_at]
    assert after and all(o.kind == "ok" for o in after), Counter(o.kind for o in after)
    assert {o.replica for o in after} == (before - dead) | new  # two replicas again
