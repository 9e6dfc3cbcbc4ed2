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

SAMPLE_RATE = 24_000  # Hz, Vocos output
HOP = 256  # samples per mel frame (Vocos ISTFT hop)
MEL_FRAMES_PER_STEP = 2  # each GPT step (4 codebook tokens) becomes 2 mel frames
STEPS_PER_SECOND = SAMPLE_RATE / HOP / MEL_FRAMES_PER_STEP  # 46.875
SAMPLES_PER_STEP = HOP * MEL_FRAMES_PER_STEP  # 512

LengthSource = Literal["eos", "speech-rate"]

# Defaults, each a published average for read speech (TTS reads text aloud):
# - Mandarin, 5.18 syllables/s: Pellegrino, Coupé & Marsico (2011), "A cross-language perspective
#   on speech information rate", Language 87(3): 539-558 — the syllable rate of Mandarin in 20
#   texts read aloud by native speakers (English 6.19, Japanese 7.84 in the same study). A Chinese
#   character is one syllable, so 5.18 characters/s. Whether the study's durations include silent
#   pauses we could not check from the sources at hand.
# - English, 183 words/min = 3.05 words/s: Brysbaert (2019), "How many words do we read per
#   minute? A review and meta-analysis of reading rate", Journal of Memory and Language 109:104047
#   — the average oral reading rate of adults over 77 studies (5,965 participants).
# No pause per punctuation mark is added: we found no published figure to source it from.
CJK_CHARS_PER_SECOND = 5.18
WORDS_PER_SECOND = 183 / 60

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
        """GPT decode steps for `text`: round(46.875 x seconds), at least 1."""
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
