"""ChatTTS numbers the planner needs, in one place, each with where it comes from.

Source for everything here: `reference/chattts.md` (computed from the chattts 0.2.5 module shapes
and checked by counting `numel()`). `ttsperf.model.config` is being written in parallel; once it
lands, these constants should be read from it instead of repeated here (plan must still never
build a model: it only needs the shapes).
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
TEXT_VOCAB = 21_178
CODEBOOKS = 4
CODE_VOCAB = 626
MAX_POSITIONS = 4096

# Matmul weights read by every decode step: q, k, v, o (4 x h^2) and gate/up/down (3 x h x i) per
# layer, plus the 4 code heads. The norms are a rounding error; the text embedding and head_text are
# not touched while decoding audio codes.
GPT_MATMUL_PARAMS_PER_LAYER = 4 * HIDDEN * HIDDEN + 3 * HIDDEN * INTERMEDIATE
CODE_HEAD_PARAMS = CODEBOOKS * HIDDEN * CODE_VOCAB
DECODE_WEIGHT_PARAMS = LAYERS * GPT_MATMUL_PARAMS_PER_LAYER + CODE_HEAD_PARAMS

# Rates [comp, checked by meas]: 24 kHz, Vocos hop 256, 2 mel frames per GPT step.
SAMPLE_RATE = 24_000
SAMPLES_PER_STEP = 512
STEPS_PER_AUDIO_SECOND = SAMPLE_RATE / SAMPLES_PER_STEP  # 46.875
MAX_NEW_TOKENS = 2048  # official default `max_new_token`
STREAM_CHUNK_STEPS = 24  # official streaming yields every 24 steps

BYTES_PER_DTYPE = {"fp32": 4, "fp16": 2, "bf16": 2}


def kv_bytes_per_token(dtype: str) -> int:
    """K and V, every layer, one token of one sequence: 2 x 20 x 768 x bytes (61,440 B in fp16)."""
    return 2 * LAYERS * KV_HEADS * HEAD_DIM * BYTES_PER_DTYPE[dtype]


def steps_for_audio(seconds: float) -> int:
    """Decode steps that produce `seconds` of audio (rounded up: a partial step is a whole step)."""
    return max(1, math.ceil(seconds * STEPS_PER_AUDIO_SECOND - 1e-9))
