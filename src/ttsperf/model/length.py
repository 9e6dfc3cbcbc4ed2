"""How many GPT decode steps a text takes when the model cannot say (speech-rate length model).

Random weights never emit EOS, so a synthetic run decides each sequence's length up front:
`steps = round(STEPS_PER_SECOND * seconds(text))`, with seconds(text) from a speaking rate —
characters per second for Chinese (CJK ideographs) plus words per second for Latin-script (and
other space-separated) words; mixed text sums both. Every result says which length source it used.

    from ttsperf.model.length import SpeechRate
    SpeechRate().steps("今天天气很好，我们去公园散步吧。")   # 14 characters / 5.18 per s -> 127 steps
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Literal

from ttsperf.errors import UserError
from ttsperf.facts import (  # the defaults, with their sources, live in ttsperf.facts
    CJK_CHARS_PER_SECOND,
    HOP,
    MEL_FRAMES_PER_STEP,
    SAMPLE_RATE,
    SAMPLES_PER_STEP,
    WORDS_PER_SECOND,
)
from ttsperf.facts import STEPS_PER_AUDIO_SECOND as STEPS_PER_SECOND

# what ended a synthesis: the model's EOS, the speech-rate length (synthetic weights, fixed
# length), or the --max-new-tokens cap before either
LengthSource = Literal["eos", "speech-rate", "max-new-tokens"]


# Han ideographs, the ranges BERT's tokenizer treats as Chinese characters (one syllable each).
_CJK = (
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002a6df\U0002a700-\U0002b73f\U0002b740-\U0002b81f"
    "\U0002b820-\U0002ceaf\U0002f800-\U0002fa1f"
)
_CJK_CHAR = re.compile(f"[{_CJK}]")
# ChatTTS control tokens ([uv_break], [speed_5], ...) are not spoken words.
_CONTROL = re.compile(r"\[[A-Za-z]+(?:_[A-Za-z0-9]+)*\]")
# A word: a run of letters or digits outside the Han ranges; an apostrophe inside keeps it one word
# (don't, l'eau). Hyphens and other punctuation separate words.
_WORD = re.compile(rf"[^\W_{_CJK}]+(?:['’][^\W_{_CJK}]+)*")


@dataclass(frozen=True)
class SpeechRate:
    """Speaking rate: characters per second for Chinese, words per second for space-separated words."""

    cjk_chars_per_second: float = CJK_CHARS_PER_SECOND
    words_per_second: float = WORDS_PER_SECOND

    def __post_init__(self) -> None:
        for name in ("cjk_chars_per_second", "words_per_second"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"{name}: expected a positive number, found {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise UserError(f"{name}: expected a positive finite number, found {value}")

    @staticmethod
    def count(text: str) -> tuple[int, int]:
        """(Chinese characters, words) in `text`, control tokens removed."""
        text = _CONTROL.sub(" ", text)
        return len(_CJK_CHAR.findall(text)), len(_WORD.findall(text))

    def seconds(self, text: str) -> float:
        """Seconds of speech `text` takes at this rate (0.0 when nothing in it is spoken)."""
        chars, words = self.count(text)
        return chars / self.cjk_chars_per_second + words / self.words_per_second

    def steps(self, text: str) -> int:
        """GPT decode steps for `text`: round(STEPS_PER_SECOND x seconds), at least 1."""
        if not text.strip():
            raise UserError("empty text: expected something to say, found only whitespace")
        return max(1, round(STEPS_PER_SECOND * self.seconds(text)))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def steps_to_seconds(steps: int) -> float:
    """Seconds of audio that `steps` decode steps produce."""
    return steps / STEPS_PER_SECOND


__all__ = [
    "CJK_CHARS_PER_SECOND",
    "HOP",
    "LengthSource",
    "MEL_FRAMES_PER_STEP",
    "SAMPLES_PER_STEP",
    "SAMPLE_RATE",
    "STEPS_PER_SECOND",
    "SpeechRate",
    "WORDS_PER_SECOND",
    "steps_to_seconds",
]
