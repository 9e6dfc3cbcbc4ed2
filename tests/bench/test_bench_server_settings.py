"""bench records the server it measured: ttsperf serve's /healthz, read once before the load, into
run.json's `server` block; another TTS server, or none, records nothing and says why."""

from __future__ import annotations

import pytest

from ttsperf import __version__
from ttsperf.bench.api import BenchSettings, run_bench
from ttsperf.bench.results import BenchRun, write_outputs
from ttsperf.bench.server_info import from_healthz, healthz_url


@pytest.fixture(scope="module")
def ttsperf_server():
    """`ttsperf serve` as a user starts it, on loopback: the tiny model, settings of our choosing,
    and --cuda-graphs, which a CPU cannot apply (so it runs eager)."""
    from tests.server.helpers import ServeProcess

    args = ("--synthetic", "--config", "tiny", "--max-batch", "6", "--max-queue", "20",
            "--first-chunk-steps", "12", "--cuda-graphs", "--dtype", "bf16")  # fmt: skip
    with ServeProcess(*args) as srv:
        yield srv


@pytest.fixture
def short_texts(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("你好，世界。\n", encoding="utf-8")  # 36 steps of the tiny model: a fraction of a second
    return str(path)


@pytest.mark.slow
def test_a_ttsperf_server_s_settings_are_recorded_and_written(ttsperf_server, short_texts, tmp_path):
    target = ttsperf_server.url + "/v1/audio/speech"
    streamed = {"adapter": "openai", "stream": True, "texts": short_texts}
    run = run_bench(BenchSettings(urls=[target], requests=2, gpu=False, **streamed))
    assert run.points[0].successes == 2
    s = run.server
    assert s is not None and run.server_note == ""
    assert s.source == ttsperf_server.url + "/healthz"  # the host's root, whatever path the target named
    # CUDA graphs were asked for, but a CPU cannot capture them: the server ran eager
    assert (s.mode, s.dtype, s.int8) == ("eager", "bf16", False)
    assert (s.max_batch, s.max_queue, s.first_chunk_steps, s.chunk_steps) == (6, 20, 12, 24)
    assert (s.version, s.status, s.device) == (__version__, "ok", "cpu")
    assert (s.model, s.weights) == ("tiny", "synthetic")
    assert s.summary() == "eager, bf16, max batch 6, queue 20, first chunk 12 steps" and s.engines == 1
    write_outputs(run, tmp_path / "out")
    assert BenchRun.read(tmp_path / "out" / "run.json").server == s


def test_another_tts_server_records_nothing_and_the_run_goes_on(server_factory):
    srv = server_factory(slots=0, service_time=0.01)  # the mock: no /healthz
    run = run_bench(BenchSettings(urls=[srv.url], concurrency=[1], requests=3, gpu=False))
    assert run.server is None and run.points[0].successes == 3
    said = f"{srv.url}/healthz answered HTTP 404: not a ttsperf server, settings not recorded"
    assert run.server_note == said
    assert srv.stats()["served"] == 3  # the settings' read is no request of the load
    assert '"server": null' in run.to_json()


def test_a_server_that_does_not_answer_records_nothing(free_port_url):
    run = run_bench(BenchSettings(urls=[free_port_url], concurrency=[1], requests=1, gpu=False))
    assert run.server is None and run.server_note.startswith(f"{free_port_url}/healthz: no answer (")
    assert run.points[0].errors == {"connect": 1}


def test_a_healthz_of_another_shape_is_not_taken_for_ttsperf_s():
    assert from_healthz({"status": "ok"}, "u") is None
    assert from_healthz(["ok"], "u") is None
    assert from_healthz({"switches": {}, "config": {}}, "u") is None  # no max_batch
    # the mode that ran: CUDA graphs applied outrank compile; a switch asked for but not applied did not run
    on = {"value": True, "applied": True, "note": ""}
    both = {"switches": {"cuda_graphs": on, "compile": on}, "config": {}, "max_batch": 256}
    assert from_healthz(both, "u").mode == "cuda-graphs"
    asked = {**on, "applied": False}
    compiled = {"switches": {"compile": on, "cuda_graphs": asked}, "config": {}, "max_batch": 8}
    assert from_healthz(compiled, "u").mode == "compile"
    odd = {"switches": {"dtype": {"value": 16}}, "config": {"first_chunk_steps": "24"}, "max_batch": True}
    s = from_healthz(odd, "u")  # a field of the wrong type is left unsaid, not guessed
    assert (s.mode, s.dtype, s.first_chunk_steps, s.max_batch) == ("eager", None, None, None)


def test_a_server_of_several_engines_says_so_in_its_summary():
    """serve --engines 2: max batch and queue are each engine's, and the summary says so."""
    two = {"switches": {}, "config": {}, "max_batch": 8, "max_queue": 64, "engines": 2}
    s = from_healthz(two, "u")
    assert s.engines == 2
    assert s.summary() == "eager, max batch 8, queue 64, 2 engines, each with that batch and queue"


def test_a_server_of_several_steps_a_turn_says_so_in_its_summary():
    four = {"switches": {}, "config": {"steps_per_turn": 4}, "max_batch": 8, "max_queue": 64}
    s = from_healthz(four, "u")
    assert s.steps_per_turn == 4
    assert s.summary() == "eager, max batch 8, queue 64, 4 steps a turn"
    one = from_healthz({**four, "config": {"steps_per_turn": 1}}, "u")
    assert one.steps_per_turn == 1 and one.summary() == "eager, max batch 8, queue 64"


def test_the_healthz_url_is_at_the_host_s_root():
    assert healthz_url("http://h:8080") == "http://h:8080/healthz"
    assert healthz_url("https://h/v1/audio/speech?x=1") == "https://h/healthz"
