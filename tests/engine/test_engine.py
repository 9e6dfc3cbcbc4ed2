"""Continuous batching, isolation, streaming, cancellation, backpressure, deadlines, OOM, drain:
each with a step's status read at once and one step ahead (`overlap`: on a GPU the host reads step
N while step N+1 runs; on a CPU it is forced here, so the same bookkeeping runs)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from ttsperf.engine.audio import context_frames
from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.switches import Switches
from ttsperf.engine.types import (
    AudioChunk,
    NotAccepting,
    QueueFull,
    RequestHandle,
    SynthError,
    SynthRequest,
    SynthResult,
    TextTooLong,
)
from ttsperf.model.length import SpeechRate
from ttsperf.model.sampling import SamplingParams

GREEDY = SamplingParams(top_k=1)
TEXT = "你好，这是一段用于压测的文本。"
OTHERS = [
    "Hello world, this is a test.",
    "今天天气很好。",
    "A longer English sentence about weather and GPUs.",
]


@pytest.fixture(params=[False, True], ids=["at-once", "one-ahead"])
def overlap(request) -> bool:
    return request.param


@pytest.fixture
def engine(tiny_pipe, overlap):
    eng = Engine(tiny_pipe, EngineConfig(max_batch=8, overlap=overlap)).start()
    yield eng
    eng.stop(drain=False, timeout=10)


def _run(engine, text, **kw):
    return engine.submit(SynthRequest(text, kw.pop("sampling", GREEDY), **kw)).collect(timeout=60)


def test_result_equals_the_pipeline(engine, tiny_pipe):
    samples, result = _run(engine, TEXT)
    gen = tiny_pipe.generate([TEXT], GREEDY)[0]
    assert isinstance(result, SynthResult) and result.steps == gen.steps == SpeechRate().steps(TEXT)
    np.testing.assert_allclose(samples, tiny_pipe.vocode(tiny_pipe.mel(gen)), atol=1e-5)
    assert result.length_source == "speech-rate" and result.audio_seconds == len(samples) / 24000


def test_a_length_cut_by_max_new_tokens_says_so(engine):
    """The synthetic model's speech-rate length is cut to the request's cap: not 'speech-rate'."""
    samples, result = _run(engine, TEXT, max_new_tokens=10)
    assert result.steps == 10 < SpeechRate().steps(TEXT)
    assert result.length_source == "max-new-tokens"


def test_a_text_is_tokenized_once_and_the_prefill_takes_those_ids(engine, monkeypatch):
    """The prefill embeds the ids counted at submission (the core tokenizes there, once)."""
    tok = engine.pipe.tokenizer
    calls, hf = [], tok.hf
    monkeypatch.setattr(tok, "hf", lambda *a, **kw: calls.append(a) or hf(*a, **kw))
    alone, _ = _run(engine, TEXT)
    assert len(calls) == 1
    ids = tok.ids(tok.decorate_code_prompt(OTHERS[0]))  # another text's ids: what the prefill uses
    handle = engine.submit(SynthRequest(TEXT, GREEDY), prompt_ids=ids)
    other, _ = handle.collect(timeout=60)
    assert handle.prompt_tokens == len(ids) and not np.array_equal(other, alone)


def test_a_request_does_not_depend_on_its_batch(engine):
    alone, _ = _run(engine, TEXT)
    others = [engine.submit(SynthRequest(t, SamplingParams(seed=i))) for i, t in enumerate((OTHERS * 3)[:7])]
    together, _ = engine.submit(SynthRequest(TEXT, GREEDY)).collect(timeout=60)
    for h in others:
        assert isinstance(h.collect(timeout=60)[1], SynthResult)
    assert engine.stats.batch_size.counts[0] < engine.stats.batch_size.n  # some steps ran batch > 1
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_seeded_sampling_is_reproducible_in_any_batch(engine):
    a, _ = _run(engine, TEXT, sampling=SamplingParams(seed=11))
    busy = [engine.submit(SynthRequest(t)) for t in OTHERS]
    b, _ = _run(engine, TEXT, sampling=SamplingParams(seed=11))
    [h.collect(timeout=60) for h in busy]
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_short_request_joins_and_leaves_before_a_long_one(engine):
    long = engine.submit(SynthRequest(TEXT * 4, GREEDY))
    time.sleep(0.05)
    short = engine.submit(SynthRequest("好。", GREEDY))
    _, short_result = short.collect(timeout=60)
    _, long_result = long.collect(timeout=60)
    assert short_result.steps < long_result.steps
    # the short one did not wait for the long one: its queue time is far below the long's run time
    assert short_result.queue_seconds < long_result.inference_seconds


def test_streaming_chunks_decode_only_new_frames(tiny_pipe, overlap):
    eng = Engine(
        tiny_pipe, EngineConfig(max_batch=2, overlap=overlap, first_chunk_steps=24, chunk_steps=24)
    ).start()
    seen: list[int] = []
    hook = tiny_pipe.model.decoder.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[-1]))
    try:
        text = TEXT * 3
        streamed = eng.submit(SynthRequest(text, GREEDY, stream=True))
        events = []
        while not events or not isinstance(events[-1], (SynthResult, SynthError)):
            events.append(streamed.next_event_blocking(timeout=60))
        chunks = [e.samples for e in events[:-1]]
        result = events[-1]
    finally:
        hook.remove()
        eng.stop()
    assert isinstance(result, SynthResult) and result.chunks == len(chunks) >= 3
    whole, _ = (
        Engine(tiny_pipe, EngineConfig(max_batch=1, overlap=overlap))
        .start()
        .submit(SynthRequest(text, GREEDY))
        .collect(60)
    )
    audio = np.concatenate(chunks)
    assert len(audio) == len(whole)
    # seams: left context is exact; only the 4-step lookahead on the right approximates
    assert np.max(np.abs(audio - whole)) < 0.02 * np.max(np.abs(whole))
    ctx_steps = context_frames(tiny_pipe.model) // 2 + 1
    assert max(seen) <= 24 + ctx_steps + 4 + 1, seen  # bounded window, not the whole prefix
    assert len(seen) == result.chunks


def test_cancellation_frees_the_slot(engine):
    handle = engine.submit(SynthRequest(TEXT * 20, GREEDY))
    while engine.running() == 0:
        time.sleep(0.005)
    handle.cancel()
    _, final = handle.collect(timeout=30)
    assert isinstance(final, SynthError) and final.kind == "cancelled"
    deadline = time.monotonic() + 5
    while engine.running() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert engine.running() == 0


def test_queue_full_then_text_too_long(tiny_pipe):
    eng = Engine(tiny_pipe, EngineConfig(max_batch=1, max_queue=1, max_prompt_tokens=40))
    eng.submit(SynthRequest(TEXT))  # not started: stays queued
    with pytest.raises(QueueFull) as full:
        eng.submit(SynthRequest(TEXT))
    assert full.value.retry_after > 0
    with pytest.raises(TextTooLong) as long:
        eng.submit(SynthRequest(TEXT * 10))
    assert long.value.limit == 40 and long.value.tokens > 40


def test_deadline_answers_timeout(tiny_pipe, overlap):
    eng = Engine(tiny_pipe, EngineConfig(max_batch=1, overlap=overlap)).start()
    try:
        _, final = eng.submit(SynthRequest(TEXT * 30, GREEDY, timeout=0.05)).collect(timeout=30)
    finally:
        eng.stop(drain=False)
    assert isinstance(final, SynthError) and final.kind == "timeout"


def test_out_of_memory_shrinks_the_batch_and_loses_nothing(tiny_pipe, overlap):
    # prefill_wait 0: a request that missed the first turn joins at the next, so rows run at step 5
    config = EngineConfig(max_batch=4, overlap=overlap, inject_oom_at_steps=frozenset({5}), prefill_wait=0.0)
    eng = Engine(tiny_pipe, config).start()
    try:
        alone = [tiny_pipe.generate([t], GREEDY)[0].steps for t in OTHERS]
        handles = [eng.submit(SynthRequest(t, GREEDY)) for t in OTHERS]
        finals = [h.collect(timeout=60)[1] for h in handles]
    finally:
        eng.stop()
    assert all(isinstance(f, SynthResult) for f in finals), finals
    assert [f.steps for f in finals] == alone
    assert eng.stats.ooms == 1 and eng.effective_max_batch < 4


@pytest.mark.parametrize("where", ["prefill", "collect"])
def test_a_bug_in_a_turn_answers_its_requests_internal_and_the_engine_goes_on(
    tiny_pipe, overlap, monkeypatch, where, caplog
):
    """A failure that is not out of memory (a bug) answers the requests it touched with an
    'internal' error, logged, and the next request is served: rows being prefilled (taken from
    the queue, not yet running) are answered too, not left waiting forever."""
    eng = Engine(tiny_pipe, EngineConfig(max_batch=2, overlap=overlap, prefill_wait=0.0))
    real = getattr(eng.runner, where)
    calls = []

    def failing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == (1 if where == "prefill" else 3):
            raise ValueError("a bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(eng.runner, where, failing_once)
    eng.start()
    try:
        first = eng.submit(SynthRequest(TEXT, GREEDY)).collect(timeout=60)[1]
        after = eng.submit(SynthRequest(TEXT, GREEDY)).collect(timeout=60)[1]
    finally:
        eng.stop(drain=False)
    assert isinstance(first, SynthError) and (first.kind, first.message) == ("internal", "ValueError: a bug")
    assert isinstance(after, SynthResult) and after.steps == tiny_pipe.generate([TEXT], GREEDY)[0].steps
    assert "a turn failed" in caplog.text


def one_end_waiting(tiny_pipe):
    """One step ahead, turns driven by hand until a short request's row finished and its end
    waits for its audio (handed out next turn) while a long one runs -> (engine, short, long)."""
    eng = Engine(tiny_pipe, EngineConfig(max_batch=2, overlap=True, prefill_wait=0.0))
    short = eng.submit(SynthRequest(OTHERS[1], GREEDY, stream=True))
    long = eng.submit(SynthRequest(TEXT * 4, GREEDY, stream=True))
    with eng._contexts():
        for _ in range(1000):
            eng._turn()
            if eng.emission.waiting():
                break
    assert eng.emission.waiting() == 1 and eng.table.size == 1
    return eng, short, long


def test_a_failed_turn_still_hands_out_the_audio_launched_before_it(tiny_pipe, monkeypatch):
    """One step ahead, a row that finished waits one turn for its last audio; if that turn fails,
    the finished request still hears its chunks and its result, and the one still running hears
    'internal'."""
    eng, short, long = one_end_waiting(tiny_pipe)

    def failing():
        raise ValueError("a bug")

    monkeypatch.setattr(eng.runner, "collect", failing)
    eng.worker.thread.start()
    try:
        short_events = short.collect(timeout=60)
        long_final = long.collect(timeout=60)[1]
    finally:
        eng.stop(drain=False)
    samples, final = short_events
    assert isinstance(final, SynthResult) and final.chunks > 0
    assert len(samples) == round(final.audio_seconds * tiny_pipe.cfg.sample_rate) > 0
    assert isinstance(long_final, SynthError) and long_final.kind == "internal"


def test_audio_that_cannot_be_read_back_answers_the_requests_waiting_for_it(tiny_pipe, monkeypatch):
    """One step ahead, if the audio launched for a row that finished cannot be read back (the
    device failed), that request is answered 'internal' like the running one, not left waiting."""
    eng, short, long = one_end_waiting(tiny_pipe)

    def lost():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(eng.emission._launched.decoding, "samples", lost)
    eng.worker.thread.start()
    try:
        finals = [h.collect(timeout=60)[1] for h in (short, long)]
    finally:
        eng.stop(drain=False)
    why = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert [(f.kind, f.message) for f in finals] == [("internal", why)] * 2


def test_a_request_hears_nothing_after_its_end():
    """Events after a request's result or error are dropped: a failed turn answers every row it
    held, and one of them may just have been answered."""
    handle = RequestHandle(SynthRequest(TEXT), loop=None)
    handle.put(SynthError("internal", "first"))
    handle.put(SynthError("internal", "second"))
    handle.put(AudioChunk(np.zeros(4, np.float32), 24_000, 0))
    assert handle.next_event_blocking(timeout=1) == SynthError("internal", "first")
    assert handle._q.empty()


def test_drain_answers_everything_then_refuses(tiny_pipe, overlap):
    eng = Engine(tiny_pipe, EngineConfig(max_batch=2, overlap=overlap)).start()
    handles = [eng.submit(SynthRequest(t)) for t in OTHERS * 2]
    eng.stop(drain=True, timeout=60)
    assert all(isinstance(h.collect(timeout=1)[1], SynthResult) for h in handles)
    with pytest.raises(NotAccepting):
        eng.submit(SynthRequest(TEXT))


def test_stop_without_drain_answers_shutdown(tiny_pipe, overlap):
    eng = Engine(tiny_pipe, EngineConfig(max_batch=1, overlap=overlap))
    handles = [eng.submit(SynthRequest(t)) for t in OTHERS]
    eng.start().stop(drain=False, timeout=30)
    kinds = [h.collect(timeout=5)[1] for h in handles]
    assert all(isinstance(k, (SynthResult, SynthError)) for k in kinds)
    assert any(isinstance(k, SynthError) and k.kind == "shutdown" for k in kinds)


def test_switches_report_what_applies_on_cpu(tiny_pipe):
    eng = Engine(tiny_pipe, EngineConfig(max_batch=1))
    report = eng.describe()["switches"]
    assert report["tf32"]["applied"] is False and "not applicable on cpu" in report["tf32"]["note"]
    assert report["cudnn_benchmark"]["applied"] is False
    assert report["inference_mode"]["applied"] is True


def test_int8_quantised_engine_runs(overlap):
    from ttsperf.model.config import TINY
    from ttsperf.model.pipeline import Pipeline

    pipe = Pipeline.synthetic_model(TINY, seed=0)
    eng = Engine(pipe, EngineConfig(max_batch=2, overlap=overlap), Switches(int8=True)).start()
    try:
        samples, final = eng.submit(SynthRequest(TEXT, GREEDY)).collect(timeout=60)
    finally:
        eng.stop()
    assert eng.describe()["switches"]["int8"]["applied"] is True
    assert isinstance(final, SynthResult) and np.isfinite(samples).all() and samples.size
    weight = pipe.model.gpt.layers[0].mlp.up_proj.weight  # torchao's int8 weight-only tensor
    assert type(weight).__name__ == "Int8Tensor" and weight.qdata.dtype == torch.int8


def test_a_request_being_prefilled_counts_as_pending(tiny_pipe, monkeypatch, overlap):
    """stop(drain=True) must wait for a request taken off the queue but not yet a batch row."""
    eng = Engine(tiny_pipe, EngineConfig(max_batch=2, overlap=overlap))
    seen = []
    original = eng._prefill

    def slow_prefill(handle):
        seen.append(eng.pending())  # while prefilling, the request is neither queued nor a row
        original(handle)

    monkeypatch.setattr(eng, "_prefill", slow_prefill)
    handle = eng.submit(SynthRequest(TEXT))
    eng.start().stop(drain=True, timeout=30)
    assert seen == [1]
    assert isinstance(handle.collect(timeout=5)[1], SynthResult)
