"""Request bodies of the two synthesis endpoints, validated strictly so that a wrong type or value
is a 400 naming the field, never a coercion the client did not ask for (`"text": 5` is an error,
not the string "5"), and never a 500.

`/invoke` is the guide's contract (`{"text": ...}`); `/v1/audio/speech` is OpenAI's, with ChatTTS's
sampling settings as extras. Unknown fields are rejected: a misspelt `temprature` silently ignored
would be a wrong result, not a convenience (OpenAI rejects unknown arguments too).
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from ttsperf.model.sampling_params import SamplingParams

# OpenAI's voice names, accepted so that OpenAI clients work unchanged. This model has no speaker
# embeddings yet (the prompt carries [empty_spk]), so every voice is the model's default speaker.
VOICES = (
    "default",
    "alloy",
    "ash",
    "ballad",
    "coral",
    "echo",
    "fable",
    "nova",
    "onyx",
    "sage",
    "shimmer",
    "verse",
)
# Model ids a client may name; all are served by the one loaded model (OpenAI clients hard-code
# tts-1 and friends).
MODEL_IDS = ("chattts", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
FORMATS = ("wav", "pcm")
UNSUPPORTED_FORMATS = ("mp3", "opus", "aac", "flac")
STREAM_FORMATS = ("audio", "sse")
SPEED_RANGE = (0.25, 4.0)  # OpenAI's range
SEED_MAX = 2**63 - 1  # torch.Generator.manual_seed takes a 64-bit value


def _json_integer(value: object) -> object:
    # JSON has one number type: 239.0 is the integer 239 (JSON Schema says so too, and schema-driven
    # clients send it); 1.5 stays a float and is refused as no integer.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class SamplingFields(_Strict):
    """ChatTTS's sampling settings. Defaults are the official ones; `top_k: 1` is greedy."""

    # (the bounds go before the validator, or pydantic's JSON schema loses them)
    seed: Annotated[int, Field(ge=0, le=SEED_MAX), BeforeValidator(_json_integer)] | None = Field(
        None, description="Sampling seed; none: random."
    )
    temperature: float = Field(0.3, ge=0.0, le=2.0, description="0 or top_k 1: greedy.")
    top_p: float = Field(0.7, gt=0.0, le=1.0)
    top_k: Annotated[int, Field(ge=1, le=1000), BeforeValidator(_json_integer)] = 20

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, seed=self.seed
        )


def _speakable(value: str) -> str:
    # (lone UTF-16 surrogates, which JSON can carry and the tokenizer cannot take, are already
    # refused by pydantic's str validation)
    if not value.strip():
        raise ValueError("expected text to say, found only whitespace")
    return value


def _one_of(allowed: tuple[str, ...], unsupported: tuple[str, ...] = ()) -> AfterValidator:
    def check(value: str) -> str:
        if value in unsupported:
            raise ValueError(f"{value} is not supported by this server; supported: {', '.join(allowed)}")
        if value not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, found {value!r}")
        return value

    return AfterValidator(check)


def _speed(value: float) -> float:
    lo, hi = SPEED_RANGE
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ValueError(f"expected a speed from {lo} to {hi}, found {value}")
    return value


Text = Annotated[str, Field(min_length=1, description="What to say."), AfterValidator(_speakable)]


class InvokeRequest(SamplingFields):
    """`POST /invoke`: the guide's `{"text": ...}`, with optional sampling settings."""

    text: Text


class SpeechRequest(SamplingFields):
    """`POST /v1/audio/speech`: OpenAI's fields plus ChatTTS's sampling settings and `stream`."""

    model: Annotated[str, _one_of(MODEL_IDS)] = "chattts"
    input: Text
    voice: Annotated[str, _one_of(VOICES)] = "default"
    response_format: Annotated[str, _one_of(FORMATS, UNSUPPORTED_FORMATS)] = "wav"
    speed: Annotated[float, AfterValidator(_speed)] = 1.0
    stream_format: Annotated[str, _one_of(STREAM_FORMATS)] = "audio"
    stream: bool = Field(True, description="false: one buffered body with X-* statistics headers.")

    def speed_prompt(self) -> str:
        """ChatTTS's speed token: [speed_5] is normal speed, 0 slowest, 9 fastest. OpenAI's 0.25..4
        maps on a log scale so that halving and doubling move equally: 5 + 2.5 log2(speed)."""
        level = round(5 + 2.5 * math.log2(self.speed))
        return f"[speed_{min(9, max(0, level))}]"
