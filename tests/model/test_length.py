import math
import typing

import pytest

from ttsperf.errors import UserError
from ttsperf.model import length
from ttsperf.model.length import (
    HOP,
    SAMPLE_RATE,
    SAMPLES_PER_STEP,
    STEPS_PER_SECOND,
    LengthSource,
    SpeechRate,
    steps_to_seconds,
)


def test_steps_per_second_is_derived_from_sample_rate_and_hop():
    assert (SAMPLE_RATE, HOP) == (24_000, 256)
    mel_frames_per_second = SAMPLE_RATE / HOP
    assert mel_frames_per_second == 93.75
    assert STEPS_PER_SECOND == mel_frames_per_second / 2 == 46.875


def test_samples_per_step_is_two_hops():
    assert SAMPLES_PER_STEP == 2 * HOP == 512
    assert SAMPLES_PER_STEP * STEPS_PER_SECOND == SAMPLE_RATE
    assert steps_to_seconds(375) == 8.0  # 8 s of audio is 375 steps


def test_length_source_names():
    assert typing.get_args(LengthSource) == ("eos", "speech-rate", "max-new-tokens")


def test_defaults_are_the_sourced_rates():
    rate = SpeechRate()
    assert rate.cjk_chars_per_second == 5.18  # Pellegrino et al. 2011, Mandarin syllables/s
    assert math.isclose(rate.words_per_second, 183 / 60)  # Brysbaert 2019, oral reading wpm


@pytest.mark.parametrize(
    "text, counts, rate, seconds",
    [
        # 10 Chinese characters at 5 per second: 2 s, round(2 x 46.875) = 94 steps.
        ("今天我们去公园散步吧。", (10, 0), SpeechRate(5, 3), 2.0),
        # Hello world I don't know state of the art: an apostrophe keeps one word, hyphens split.
        ("Hello, world! I don't know state-of-the-art.", (0, 9), SpeechRate(5, 3), 3.0),
        # Mixed text: characters and words each at their own rate, summed.
        ("我喜欢 ChatTTS 和 open source 软件。", (6, 3), SpeechRate(6, 2), 2.5),
    ],
)
def test_seconds_and_steps(text, counts, rate, seconds):
    assert SpeechRate.count(text) == counts
    assert rate.seconds(text) == pytest.approx(seconds)
    assert rate.steps(text) == round(seconds * 46.875)


def test_ten_chinese_characters_at_five_per_second_is_94_steps():
    assert SpeechRate(cjk_chars_per_second=5, words_per_second=3).steps("今天我们去公园散步吧。") == 94


def test_control_tokens_are_not_spoken():
    assert SpeechRate.count("[speed_5]你好[uv_break] there [laugh][break_0]") == (2, 1)


def test_punctuation_only_text_still_gets_one_step():
    assert SpeechRate().seconds("。！") == 0.0
    assert SpeechRate().steps("。！") == 1


def test_empty_text_is_rejected():
    with pytest.raises(UserError, match="empty text"):
        SpeechRate().steps("   ")


@pytest.mark.parametrize("field", ["cjk_chars_per_second", "words_per_second"])
@pytest.mark.parametrize("bad", [0, -1.5, math.nan, math.inf, "fast", True])
def test_bad_rates_are_rejected_naming_the_field(field, bad):
    with pytest.raises(UserError, match=field) as err:
        SpeechRate(**{field: bad})
    assert repr(bad) in str(err.value) or str(bad) in str(err.value)


def test_rate_is_written_as_a_dict():
    assert SpeechRate(4, 2).to_dict() == {"cjk_chars_per_second": 4, "words_per_second": 2}
    assert length.WORDS_PER_SECOND == 183 / 60
