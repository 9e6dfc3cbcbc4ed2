"""`serve --engines N`: N engine processes behind one front. Requests spread over them (the one
holding fewest), each request's audio is what one engine makes of it to the byte, /readyz,
/healthz and /metrics speak for all of them, a killed engine takes serve down non-zero without
losing an answer, SIGTERM drains every engine, and bad counts are one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ttsperf.audio import to_pcm16
from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.gc_pauses import GcPauses
from ttsperf.engine.stats import EngineStats, merge_snapshots
from ttsperf.engine.types import SynthRequest
from ttsperf.model.config import get_config
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import SamplingParams

from .helpers import LONG, SHORT, ServeProcess, wait_for

TWO = ("--synthetic", "--config", "tiny", "--engines", "2", "--max-batch", "2")


def _four_running(c: httpx.Client) -> bool:
    ready = c.get("/readyz").json()
    return ready.get("running") == 4 and ready.get("queue_depth") == 0


def _send(url: str, n: int, answers: list) -> list[threading.Thread]:
    def one(i: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            r = c.post("/invoke", json={"text": LONG, "seed": i})
            answers.append((r.status_code, time.monotonic(), r.json() if r.status_code != 200 else {}))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def test_merged_metrics_sum_the_engines_counts_and_keep_the_shared_memory_once():
    a, b = EngineStats(), EngineStats()
    a.observe_step(3, 0.004)
    b.observe_step(5, 0.002)
    b.observe_step(6, 0.003)
    a.count("ok"), b.count("ok"), b.count("timeout")
    a.decode_steps, b.decode_steps = 10, 7

    def collector(pauses: int, frozen: int) -> dict:
        recorder = GcPauses()
        recorder.close()
        for _ in range(pauses):
            recorder.seconds[2].observe(0.1)
            recorder.collected[2] += 5
        return {**recorder.snapshot(), "frozen": frozen}

    def snap(stats: EngineStats, running: int, allocated: int) -> dict:
        memory = {"allocated": allocated, "free": 100 + allocated, "total": 1000}
        counts = {"queue_depth": 1, "running": running, "pending": running + 1, "max_batch": 8}
        return {
            **counts,
            "effective_max_batch": 8,
            "ready": True,
            "stats": stats.snapshot(),
            "device_memory": memory,
            "gc": collector(running - 1, 1000 * running),
        }

    merged = merge_snapshots([snap(a, 2, 10), snap(b, 3, 20)])
    assert (merged["running"], merged["queue_depth"], merged["max_batch"]) == (5, 2, 16)
    assert merged["device_memory"] == {"allocated": 30, "free": 110, "total": 1000}
    s = merged["stats"]
    assert s["decode_steps"] == 17 and s["requests"] == {"ok": 2, "timeout": 1}
    assert s["step_seconds"].n == 3 and s["step_seconds"].total == pytest.approx(0.009)
    assert sum(s["batch_size"].counts) == 3
    assert a.snapshot()["step_seconds"].n == 1  # the engines' own snapshots are left as they were
    gc = merged["gc"]  # each engine process's collector: pauses, objects freed and frozen, summed
    assert gc["seconds"][2].n == 3 and gc["seconds"][2].total == pytest.approx(0.3)
    assert gc["seconds"][0].n == 0 and gc["collected"][2] == 15 and gc["frozen"] == 5000


@pytest.mark.slow
def test_two_engines_each_run_their_own_batch_and_every_answer_is_one_engines_audio():
    """One request at a time goes to each engine in turn: each answer is the in-process engine's
    samples to the byte. Then, max batch 2 each, four long requests run at once only if both
    engines hold two."""
    engine = Engine(Pipeline.synthetic_model(get_config("tiny"), seed=0), EngineConfig(max_batch=2)).start()
    try:
        expected = [
            engine.submit(SynthRequest(SHORT, SamplingParams(seed=s))).collect(120)[0] for s in range(4)
        ]
    finally:
        engine.stop(drain=False, timeout=10)
    answers: list = []
    with ServeProcess(*TWO) as server, server.client() as c:
        health = c.get("/healthz").json()
        assert health["engines"] == 2 and health["max_batch"] == 2
        assert health["threads"] == max(1, (os.cpu_count() or 1) // 2)  # the cores shared out
        pids = [e["pid"] for e in health["per_engine"]]
        assert len(set(pids)) == 2 and all(psutil.Process(p).ppid() == server.pid for p in pids)
        for seed in range(4):
            body = {"input": SHORT, "seed": seed, "response_format": "pcm", "stream": False}
            assert c.post("/v1/audio/speech", json=body).content == to_pcm16(expected[seed])
        assert [e["answered"] for e in c.get("/healthz").json()["per_engine"]] == [2, 2]
        threads = _send(server.url, 4, answers)
        wait_for(lambda: _four_running(c), 60, "four requests running on two engines of two rows")
        assert [e["running"] for e in c.get("/healthz").json()["per_engine"]] == [2, 2]
        for t in threads:
            t.join(180)
        families = {f.name: f for f in text_string_to_metric_families(c.get("/metrics").text)}
    assert [status for status, _, _ in answers] == [200] * 4
    ok = [s.value for s in families["ttsperf_engine_requests"].samples if s.labels.get("status") == "ok"]
    assert ok == [8.0]  # every request counted once, whichever engine ran it
    assert families["ttsperf_max_batch"].samples[0].value == 4


@pytest.mark.slow
def test_a_killed_engine_answers_its_requests_the_other_finishes_its_own_and_serve_exits_non_zero():
    server = ServeProcess(*TWO)
    answers: list = []
    try:
        with server.client() as c:
            pids = [e["pid"] for e in c.get("/healthz").json()["per_engine"]]
            threads = _send(server.url, 4, answers)
            wait_for(lambda: _four_running(c), 60, "four requests running on two engines")
            psutil.Process(pids[0]).send_signal(signal.SIGKILL)
            killed = time.monotonic()
            wait_for(lambda: len(answers) >= 2, 10, "the killed engine's two answers")
            try:
                ready = c.get("/readyz").status_code
            except httpx.TransportError:  # serve no longer listens: not ready either
                ready = None
        for t in threads:
            t.join(120)
        code = server.proc.wait(30)
    finally:
        server.stop()
    died = [(at, body) for status, at, body in answers if status == 503]
    assert len(died) == 2 and all(at - killed < 5 for at, _ in died)
    assert all("the engine stopped: the engine process exited" in b["error"]["message"] for _, b in died)
    assert sorted(status for status, _, _ in answers) == [200, 200, 503, 503]
    assert ready in (503, None) and code != 0
    assert not psutil.pid_exists(pids[1]) or psutil.Process(pids[1]).status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_sigterm_drains_every_engine():
    answers: list = []
    with ServeProcess(*TWO) as server, server.client() as c:
        pids = [e["pid"] for e in c.get("/healthz").json()["per_engine"]]
        threads = _send(server.url, 4, answers)
        wait_for(lambda: _four_running(c), 60, "four requests running on two engines")
        server.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(120)
        assert server.proc.wait(30) == 0
    assert [status for status, _, _ in answers] == [200] * 4
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engines", "0"], "--engines 0: expected 1 to 64"),
        (["--engines", "65"], "--engines 65: expected 1 to 64"),
        (["--engines", "2", "--ray"], "--engines 2 with --ray: each replica runs one engine (--replicas)"),
        (["--threads", "0"], "--threads 0: expected 1 to 1024"),
        (["--threads", "2", "--ray"], "--threads 2 with --ray: each replica keeps torch's default"),
    ],
)
def test_a_bad_engine_count_is_one_line(args: list[str], message: str):
    cmd = [sys.executable, "-c", "from ttsperf.cli.main import app; app()", "serve", "--synthetic", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].endswith(message)


@pytest.mark.slow
def test_threads_sets_the_engines_torch_threads_and_healthz_says_so():
    with ServeProcess("--synthetic", "--config", "tiny", "--max-batch", "2", "--threads", "1") as server:
        with server.client() as c:
            health = c.get("/healthz").json()
        assert health["threads"] == 1 and health["engines"] == 1
        assert any("torch threads 1," in line for line in server.log)
