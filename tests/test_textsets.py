"""ttsperf/textsets.py: the texts bench sends and plan plans, their speech and prompt lengths."""

from __future__ import annotations

import pytest

from ttsperf import facts as F
from ttsperf.textsets import GUIDE_SENTENCE, TEXT_SETS, expected_seconds, lengths, prompt_tokens


def test_the_8s_set_is_the_guides_stated_workload_and_its_own_sentence_is_not():
    """The guide plans "单句 8 s" utterances; its payload sentence says it is about 8 s and is 3.67 s."""
    eights = [expected_seconds(t) for t in TEXT_SETS["zh-8s"]]
    assert len(eights) == 5 and all(7.9 <= s <= 8.15 for s in eights)
    assert sum(eights) / len(eights) == pytest.approx(8.0, abs=0.05)
    assert "长度八秒左右" in GUIDE_SENTENCE and expected_seconds(GUIDE_SENTENCE) == pytest.approx(19 / 5.18)


def test_a_chinese_prompt_is_its_characters_and_marks_and_four_control_tokens():
    """Exact against ChatTTS's tokenizer (BERT's basic tokenizer splits every Chinese character
    and punctuation mark off), on every Chinese text shipped."""
    from ttsperf.model.tokenizer import Tokenizer, decorate_code_prompt

    tok = Tokenizer.synthetic()
    for name in ("guide", "zh", "zh-8s"):
        for text in TEXT_SETS[name]:
            assert prompt_tokens(text) == len(tok.ids(decorate_code_prompt(text))), text
    assert prompt_tokens("Sure, one moment please.") == 4 + 4 + 2  # words and marks: an estimate


def test_lengths_are_each_texts_speech_and_prompt_in_order():
    got = lengths("zh-8s")
    assert got == [(expected_seconds(t), prompt_tokens(t)) for t in TEXT_SETS["zh-8s"]]
    assert all(F.steps_for_audio(a) in (372, 381) for a, _ in got)  # 41 or 42 characters
    with pytest.raises(KeyError):
        lengths("klingon")
