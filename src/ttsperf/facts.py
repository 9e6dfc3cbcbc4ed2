"""ChatTTS facts, in one torch-free place, each with where it comes from: the audio rates, the
speech rate a text's length is judged by, and the shapes plan computes with.

model, engine, bench (and its mock server) and plan read them here; bench and plan never build a
model, so none of this may import torch or ttsperf.model. Shapes: `docs/reference/chattts.md`
(computed from the chattts 0.2.5 module shapes and checked by counting `numel()`);
tests/plan/test_plan_facts.py holds them equal to ttsperf.model.config's.
"""

from __future__ import annotations

import math

# Parameters per component [comp].
PARAMS = {
    "gpt": 188_775_168,  # LlamaModel, 20 layers x 9,438,720 + final norm 768
    "embed": 36_399_234,  # emb_text, emb_code x4, head_text, head_code x4
    "decoder": 25_920_640,
    "dvae": 15_031_048,
    "vocos": 13_531_650,
}
TOTAL_PARAMS = sum(PARAMS.values())  # 279,657,740

# GPT (LlamaModel) shape [comp].
HIDDEN = 768
LAYERS = 20
HEADS = 12
KV_HEADS = 12
HEAD_DIM = 64
INTERMEDIATE = 3072
CODEBOOKS = 4
CODE_VOCAB = 626

# Matmul weights read by every decode step: q, k, v, o (4 x h^2) and gate/up/down (3 x h x i) per
# layer, plus the 4 code heads. The norms are a rounding error; the text embedding and head_text are
# not touched while decoding audio codes.
GPT_MATMUL_PARAMS_PER_LAYER = 4 * HIDDEN * HIDDEN + 3 * HIDDEN * INTERMEDIATE
CODE_HEAD_PARAMS = CODEBOOKS * HIDDEN * CODE_VOCAB
DECODE_WEIGHT_PARAMS = LAYERS * GPT_MATMUL_PARAMS_PER_LAYER + CODE_HEAD_PARAMS

# Rates [comp, checked by meas]: 24 kHz, Vocos hop 256, 2 mel frames per GPT step.
SAMPLE_RATE = 24_000  # Hz, Vocos output
HOP = 256  # samples per mel frame (Vocos ISTFT hop)
MEL_FRAMES_PER_STEP = 2  # each GPT step (4 codebook tokens) becomes 2 mel frames
SAMPLES_PER_STEP = HOP * MEL_FRAMES_PER_STEP  # 512
STEPS_PER_AUDIO_SECOND = SAMPLE_RATE / SAMPLES_PER_STEP  # 46.875 GPT decode steps per audio second

# Speech rate, each a published average for read speech (TTS reads text aloud):
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
MAX_NEW_TOKENS = 2048  # official default `max_new_token`
STREAM_CHUNK_STEPS = 24  # official streaming yields every 24 steps

BYTES_PER_DTYPE = {"fp32": 4, "fp16": 2, "bf16": 2}


def kv_bytes_per_token(dtype: str) -> int:
    """K and V, every layer, one token of one sequence: 2 x 20 x 768 x bytes (61,440 B in fp16)."""
    return 2 * LAYERS * KV_HEADS * HEAD_DIM * BYTES_PER_DTYPE[dtype]


def steps_for_audio(seconds: float) -> int:
    """Decode steps that produce `seconds` of audio (rounded up: a partial step is a whole step)."""
    return max(1, math.ceil(seconds * STEPS_PER_AUDIO_SECOND - 1e-9))


# serve's queue by default holds a batch's worth of waiting requests, at least MIN_QUEUE: a closed
# loop of users at the load plan recommends (listeners between requests included, up to twice the
# max batch) is never refused. The fixed 64 it replaced refused 14% of plan's own check at 485 users
# with max batch 256 on an H200 (shared measurements, 2026-12-04). engine/config.py and plan's serve
# command (plan/rows.py) both follow it.
MIN_QUEUE = 64


def slot_bytes(
    max_prompt_tokens: int, max_new_tokens: int, kv_bytes_per_token: float, hidden_size: int = HIDDEN
) -> float:
    """Device bytes `ttsperf serve` sets aside per slot (row) of its batch at start, whatever the
    requests: K and V for every position a row may hold (--max-prompt-tokens + --max-new-tokens,
    and one spare position: engine/runner.py says why), and the fp32 hidden state
    of every step it may decode, plus a spare, which the audio calls read (model/step.py `Rows`).
    serve refuses a --max-batch whose slots exceed the free memory (engine/config.py) and plan's
    memory model counts the same bytes (plan/memory.py): one formula for both."""
    kv = kv_bytes_per_token * (max_prompt_tokens + max_new_tokens + 1)
    return kv + 4 * hidden_size * (max_new_tokens + 1)
