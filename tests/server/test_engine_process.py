"""The engine in a process of its own: the HTTP front never loads torch, the audio is the engine's
to the byte, a killed engine answers every request in flight and takes serve down non-zero, and
SIGTERM drains through both processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import psutil
import pytest

from ttsperf.audio import encode_wav, to_pcm16
from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.types import SynthRequest
from ttsperf.model.config import get_config
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import SamplingParams

from .helpers import LONG, SHORT, ServeProcess, scrape, start_live, wait_for

TINY = ("--synthetic", "--config", "tiny")


def _engine_child(server: ServeProcess) -> psutil.Process:
    """The engine's process, as serve's log names it ("engine process PID ready ...")."""
    line = next(line for line in server.log if "engine process " in line)
    engine = psutil.Process(int(line.split("engine process ")[1].split()[0]))
    assert engine.ppid() == server.pid
    return engine


def _maps_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def test_the_front_modules_import_no_torch():
    code = (
        "import sys, ttsperf.server.app, ttsperf.server.run, ttsperf.server.ray_deployment, "
        "ttsperf.engine.client, ttsperf.cli.serve; "
        "bad = [m for m in sys.modules if m == 'torch' or m == 'ttsperf.engine.engine']; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_serve_runs_the_model_in_a_child_and_the_front_never_loads_torch():
    with ServeProcess(*TINY, "--max-batch", "4") as server, server.client() as c:
        assert c.post("/invoke", json={"text": SHORT}).status_code == 200
        engine = _engine_child(server)
        assert _maps_torch(engine.pid) and not _maps_torch(server.pid)
        assert c.get("/healthz").json()["sample_rate"] == 24_000
        # each process froze what its start-up built (the engine: torch and the model, far more)
        metrics = scrape(c)
        front, core = (metrics[f'ttsperf_gc_frozen_objects{{process="{p}"}}'] for p in ("front", "engine"))
        assert 10_000 < front < core


@pytest.mark.slow
@pytest.mark.parametrize("config", ["tiny", "skeleton"])
def test_served_audio_is_the_engines_to_the_byte(config: str):
    """The bytes a client gets, buffered and streamed, are the in-process engine's samples as PCM
    (a stream's chunks hold back their last frames, so streamed audio is its own)."""
    engine = Engine(Pipeline.synthetic_model(get_config(config), seed=0), EngineConfig(max_batch=2)).start()
    try:
        samples, result = engine.submit(SynthRequest(SHORT, SamplingParams(seed=7))).collect(120)
        chunked, _ = engine.submit(SynthRequest(SHORT, SamplingParams(seed=7), stream=True)).collect(120)
    finally:
        engine.stop(drain=False, timeout=10)
    assert result.audio_seconds > 0 and np.abs(samples).max() > 0 and len(chunked) == len(samples)
    body = {"input": SHORT, "seed": 7, "response_format": "pcm"}
    with ServeProcess("--synthetic", "--config", config, "--max-batch", "2") as server, server.client() as c:
        wav = c.post("/invoke", json={"text": SHORT, "seed": 7})
        buffered = c.post("/v1/audio/speech", json={**body, "stream": False})
        with c.stream("POST", "/v1/audio/speech", json=body) as r:
            streamed = b"".join(r.iter_raw())
    assert wav.content == encode_wav(samples)
    assert buffered.content == to_pcm16(samples)
    assert streamed == to_pcm16(chunked)


def test_one_step_ahead_the_audio_handed_out_a_turn_later_crosses_as_the_same_bytes():
    """One step ahead (a GPU's default, forced here) the engine hands each turn's audio out at the
    next turn; through the engine process and the front a client still gets the same bytes, in
    order, streamed and buffered, as with each step read at once, and the stream ends."""
    body = {"input": SHORT, "seed": 7, "response_format": "pcm"}
    got = {}
    for overlap in (False, True):
        server = start_live(max_batch=2, overlap=overlap)
        try:
            with server.client() as c:
                with c.stream("POST", "/v1/audio/speech", json=body) as r:
                    streamed = b"".join(r.iter_raw())
                buffered = c.post("/v1/audio/speech", json={**body, "stream": False}).content
                assert c.get("/healthz").json()["overlap"] is overlap
        finally:
            server.stop()
        got[overlap] = streamed, buffered
    assert len(got[False][0]) > 0 and got[True] == got[False]


@pytest.mark.slow
def test_a_killed_engine_answers_every_request_in_flight_and_serve_exits_non_zero():
    server = ServeProcess(*TINY, "--max-batch", "2", "--max-queue", "8")
    answers: list[tuple[int, float, dict]] = []

    def request(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            r = c.post("/invoke", json={"text": LONG, "seed": i})
            answers.append((r.status_code, time.monotonic(), r.json()))

    try:
        threads = [threading.Thread(target=request, args=(i,)) for i in range(4)]  # 2 run, 2 wait
        for t in threads:
            t.start()
        with server.client() as c:
            # All four in the server before the kill: a request still on its way (connected, not
            # yet read) when serve shuts down is not in flight, and uvicorn closes its connection.
            def all_in() -> bool:
                ready = c.get("/readyz").json()
                return ready.get("running") == 2 and ready.get("queue_depth") == 2

            wait_for(all_in, 30, "two requests to run and two to wait")
            engine = _engine_child(server)
            engine.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            for t in threads:
                t.join(10)
            try:
                ready = c.get("/readyz").status_code
            except httpx.TransportError:  # already gone: not ready either
                ready = None
        code = server.proc.wait(15)
    finally:
        server.stop()
    assert len(answers) == 4
    for status, at, body in answers:
        assert status == 503 and at - killed < 5
        assert "the engine stopped: the engine process exited" in body["error"]["message"]
    assert ready in (503, None)
    assert code != 0
    assert any("the engine is gone" in line for line in server.log)


@pytest.mark.slow
def test_sigterm_drains_through_both_processes():
    answers: list[httpx.Response] = []
    with ServeProcess(*TINY, "--max-batch", "2") as server:
        engine = _engine_child(server)
        with server.client() as c:
            pending = threading.Thread(target=lambda: answers.append(c.post("/invoke", json={"text": LONG})))
            pending.start()
            wait_for(lambda: c.get("/readyz").json().get("running") == 1, 30, "the request to run")
            server.proc.send_signal(signal.SIGTERM)
            pending.join(60)
        assert server.proc.wait(30) == 0
        assert not engine.is_running()
    assert answers and answers[0].status_code == 200


@pytest.mark.slow
def test_ready_means_warm_the_buckets_are_listed_and_a_request_after_readyz_builds_none():
    """Max batch 256 through the graphed path without capture (a CPU): serve's warm-up line names
    the buckets; /healthz lists them; the first request after /readyz adds none."""
    from ttsperf.cli.serve import _warm_line

    server = start_live(max_batch=256, graphs_without_capture=True)
    try:
        with server.client() as c:
            assert c.get("/readyz").status_code == 200
            before = c.get("/healthz").json()
            line = _warm_line(before)
            assert line.startswith(
                f"{before['warmed']['decode_graphs']} decode graphs (batch [1, 2, 4, 8, 16, "
            )
            assert "context [256, 512, 1024, 2048, 2561]" in line
            tops = len({top for _, _, top in before["decode_step"]["cuda_graphs"]})
            assert (
                f"20 prefill graphs (rows [1, 2, 4, 8], prompt [32, 64, 128, 256, 512]; {4 * tops} of "
                "their first codes)"
            ) in line
            print("warm before ready:", line)
            speech = {"input": SHORT, "response_format": "pcm"}
            assert c.post("/v1/audio/speech", json=speech).status_code == 200
            after = c.get("/healthz").json()
    finally:
        server.stop()
    for key in ("cuda_graphs", "eager_fallback_steps"):
        assert after["decode_step"][key] == before["decode_step"][key]
    assert after["audio_graphs"] == before["audio_graphs"] and len(before["audio_graphs"]) > 9
    assert after["prefill_graphs"] == before["prefill_graphs"] and after["eager_prefill_calls"] == 0
    assert after["first_code_graphs"] == before["first_code_graphs"]
