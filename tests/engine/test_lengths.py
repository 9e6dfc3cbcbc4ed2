"""The length policy: how long a row may run and what its result says about why it stopped."""

from __future__ import annotations

from ttsperf.engine.lengths import Length, LengthPolicy, length_source
from ttsperf.engine.types import SynthRequest
from ttsperf.model.length import SpeechRate

TEXT = "你好，这是一段用于压测的文本。"


def test_real_weights_run_to_eos_up_to_max_new_tokens():
    policy = LengthPolicy(max_new_tokens=2048, synthetic=False, speech_rate=SpeechRate())
    assert policy.of(SynthRequest(TEXT)) == Length(2048, forced=False, capped=False)
    assert policy.of(SynthRequest(TEXT, max_new_tokens=100)) == Length(100, False, False)
    assert policy.of(SynthRequest(TEXT, max_new_tokens=9999)).limit == 2048  # never past the engine's


def test_synthetic_or_fixed_lengths_come_from_the_speech_rate_and_say_when_cut():
    rate = SpeechRate()
    steps = rate.steps(TEXT)
    synthetic = LengthPolicy(2048, synthetic=True, speech_rate=rate)
    assert synthetic.of(SynthRequest(TEXT)) == Length(steps, forced=True, capped=False)
    assert synthetic.of(SynthRequest(TEXT, max_new_tokens=10)) == Length(10, forced=True, capped=True)
    real = LengthPolicy(2048, synthetic=False, speech_rate=rate)
    assert real.of(SynthRequest(TEXT, fixed_length=True)) == Length(steps, True, False)


def test_length_source():
    assert length_source(eos=True, forced=False, capped=False) == "eos"
    assert length_source(eos=False, forced=False, capped=False) == "max-new-tokens"
    assert length_source(eos=False, forced=True, capped=True) == "max-new-tokens"
    assert length_source(eos=False, forced=True, capped=False) == "speech-rate"
