"""How long a row runs, and what its result says about why it stopped (the length policy).

Real weights sample EOS, up to the request's max_new_tokens (never past the engine's). Synthetic
weights never sample EOS, so a row's length is forced from the speech-rate model (characters or
words per second of speech), as is a request that asks for `fixed_length`; a forced length is
still cut to max_new_tokens, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttsperf.engine.types import SynthRequest
from ttsperf.model.length import LengthSource, SpeechRate


@dataclass(frozen=True)
class Length:
    limit: int  # steps the row may take
    forced: bool  # the limit is its length: EOS is not sampled
    capped: bool  # the speech-rate length was cut to max_new_tokens


@dataclass(frozen=True)
class LengthPolicy:
    max_new_tokens: int  # the engine's cap
    synthetic: bool  # random weights: every length is forced
    speech_rate: SpeechRate

    def of(self, request: SynthRequest) -> Length:
        max_new = min(request.max_new_tokens or self.max_new_tokens, self.max_new_tokens)
        forced = self.synthetic or request.fixed_length
        wanted = self.speech_rate.steps(request.text) if forced else max_new
        return Length(min(wanted, max_new), forced, wanted > max_new)


def length_source(eos: bool, forced: bool, capped: bool) -> LengthSource:
    """Why a finished row stopped: it sampled EOS, reached max_new_tokens, or its forced length."""
    return "eos" if eos else "max-new-tokens" if capped or not forced else "speech-rate"
