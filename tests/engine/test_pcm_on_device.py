"""16-bit PCM made by the audio call on the device (EngineConfig.pcm, what the engine's process sends
the front): the same bytes the host makes from the float samples (ttsperf.audio.to_pcm16), eager,
through the graphed buckets and handed out a turn later. Compiled, the conversion fuses into the
call's graph: test_audio.py allows one PCM step there."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ttsperf.audio import from_pcm16, to_pcm16
from ttsperf.engine.audio import pcm16
from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.types import AudioChunk, PcmChunk, SynthRequest, SynthResult
from ttsperf.model.sampling import SamplingParams

TEXTS = ("你好，世界。", "今天天气很好，我们去公园散步吧。" * 2, "hello there")


def test_pcm16_rounds_and_clips_as_the_host_does():
    rng = np.random.default_rng(0)
    ties = (np.arange(-40, 40) + 0.5) / 32767  # x 32767 lands on .5: half to even in both
    edges = [-1.5, -1.0, -0.99999, 0.0, -0.0, 0.99999, 1.0, 1.5, 3e38, -3e38, np.inf, -np.inf]
    wav = np.concatenate([rng.uniform(-1.2, 1.2, 10_000), ties, edges]).astype(np.float32)
    assert (wav[10_000:-12] * np.float32(32767) % 1 == 0.5).sum() > 40  # float32 keeps most ties
    assert pcm16(torch.from_numpy(wav)).numpy().tobytes() == to_pcm16(wav)
    half = wav[np.abs(wav) < 60_000].astype(np.float16)  # half precision in: float32 first, as the host
    assert pcm16(torch.from_numpy(half)).numpy().tobytes() == to_pcm16(half)


def _chunks(engine: Engine) -> list[list[AudioChunk | PcmChunk]]:
    """Each request's chunks, streamed and buffered, one request at a time: requests that join a
    batch at other steps share other calls, whose float results may differ in the last bit."""
    out = []
    for i, text in enumerate(TEXTS * 2):
        handle = engine.submit(SynthRequest(text, SamplingParams(seed=i), stream=i < len(TEXTS)))
        events = []
        while isinstance(event := handle.next_event_blocking(120), AudioChunk | PcmChunk):
            events.append(event)
        assert isinstance(event, SynthResult), event
        out.append(events)
    return out


def _served(pipe, **config) -> list[list[AudioChunk | PcmChunk]]:
    engine = Engine(pipe, EngineConfig(max_batch=4, **config)).start()
    try:
        return _chunks(engine)
    finally:
        engine.stop(drain=False, timeout=10)


@pytest.mark.parametrize(
    "mode",
    [
        {},
        {"graphs_without_capture": True},  # the padded buckets GraphedAudio replays on a GPU
        {"overlap": True},  # one step ahead: the audio read a turn later
    ],
    ids=["eager", "graphs", "one-step-ahead"],
)
def test_pcm_chunks_are_the_float_chunks_as_the_host_would_make_them(tiny_pipe, mode):
    floats, pcms = _served(tiny_pipe, **mode), _served(tiny_pipe, pcm=True, **mode)
    assert all(isinstance(c, AudioChunk) for r in floats for c in r)
    assert all(isinstance(c, PcmChunk) for r in pcms for c in r)
    assert [len(r) for r in floats] == [len(r) for r in pcms] and len(floats[0]) > 1  # streamed: chunks
    assert [[c.index for c in r] for r in pcms] == [[c.index for c in r] for r in floats]
    assert [[c.pcm for c in r] for r in pcms] == [[to_pcm16(c.samples) for c in r] for r in floats]


def test_collect_on_a_pcm_engine_gives_the_float_samples_through_pcm(tiny_pipe):
    """RequestHandle.collect joins PcmChunks as the front decodes them: the samples of the float
    engine, each rounded to its 16-bit step (from_pcm16(to_pcm16(x)))."""
    collected = []
    for config in ({}, {"pcm": True}):
        engine = Engine(tiny_pipe, EngineConfig(max_batch=4, **config)).start()
        try:
            request = SynthRequest(TEXTS[1], SamplingParams(seed=3), stream=True)
            samples, final = engine.submit(request).collect(timeout=120)
        finally:
            engine.stop(drain=False, timeout=10)
        assert isinstance(final, SynthResult) and samples.dtype == np.float32 and len(samples) > 0
        collected.append(samples)
    floats, through_pcm = collected
    np.testing.assert_array_equal(through_pcm, from_pcm16(to_pcm16(floats)))
    assert not np.array_equal(through_pcm, floats)  # it did go through 16 bits
