"""Memory model against hand-computed cases and the reference numbers (docs/reference/chattts.md)."""

from __future__ import annotations

import pytest

from ttsperf import facts as F
from ttsperf.plan.memory import GIB, MemoryModel, Workload, card_bytes


def test_parameter_counts_and_weights_match_the_reference():
    assert F.TOTAL_PARAMS == 279_657_740
    assert F.PARAMS["gpt"] == 20 * 9_438_720 + 768
    # the decode path reads the 20 layers' matmuls (no norms) and the 4 code heads
    assert F.DECODE_WEIGHT_PARAMS == 20 * (9_438_720 - 2 * 768) + 4 * 768 * 626
    assert MemoryModel("fp32").weights_bytes == 1_118_630_960  # "1.12 GB fp32"
    assert MemoryModel("fp16").weights_bytes == 559_315_480  # "0.56 GB fp16/bf16"
    assert MemoryModel("bf16").weights_bytes == 559_315_480


def test_kv_per_token_and_per_audio_second_match_the_reference():
    assert F.kv_bytes_per_token("fp32") == 122_880
    assert F.kv_bytes_per_token("fp16") == 61_440
    assert F.STEPS_PER_AUDIO_SECOND == 46.875
    m16 = MemoryModel("fp16", fragmentation=1.0)
    m32 = MemoryModel("fp32", fragmentation=1.0)
    assert m16.per_audio_second(Workload()) == 2_880_000  # 2.88 MB/s fp16
    assert m32.per_audio_second(Workload()) == 5_760_000  # 5.76 MB/s fp32
    # the guide's 3080 case: 4 x 375 steps x 123 KB = ~0.18 GB of KV in fp32
    assert m32.kv_bytes(4, 375) == 184_320_000


def test_steps_for_audio_rounds_up():
    assert F.steps_for_audio(8.0) == 375
    assert F.steps_for_audio(1.0) == 47  # 46.875 -> 47 steps
    assert F.steps_for_audio(1 / 46.875) == 1


def test_breakdown_by_hand():
    w = Workload(audio_seconds=8.0, prompt_tokens=64, first_chunk_steps=24)
    m = MemoryModel("fp16", runtime_bytes=100, fragmentation=1.5)
    # serve's limits for it: 64 x 1.25 = 80 -> 96 prompt tokens, 375 x 1.25 = 468.75 -> 480 steps
    assert w.serve_limits() == (96, 480)
    ctx = 96 + 480
    # a slot: K and V of 576 positions and one spare, and 481 fp32 hidden states of 768
    kv = 4 * ((ctx + 1) * 61_440 + 481 * 768 * 4)
    per_row = 4 * 768 * 2 + 2 * 3072 * 2 + 12 * ctx * 4 + 4 * 626 * 4 + 2 * 2 * 24 * 2048 * 2
    prefill = 64 * (4 * 768 + 2 * 3072) * 2 + 12 * 64 * 64 * 4 + 64 * 4 * 626 * 4
    tr = max(4 * per_row, prefill)
    b = m.breakdown(4, w)
    assert b["kv_cache"] == kv
    assert b["transients"] == tr
    assert b["fragmentation"] == pytest.approx(0.5 * (kv + tr))
    assert b["total"] == pytest.approx(559_315_480 + 100 + 1.5 * (kv + tr))


def test_prefill_transient_dominates_small_batches_with_long_prompts():
    m = MemoryModel("fp16")
    w = Workload(audio_seconds=1.0, prompt_tokens=2000)
    assert m.transients(1, w.context_tokens, 2000, 24) >= 12 * 2000 * 2000 * 4


def test_max_batch_is_the_exact_boundary():
    w = Workload()
    m = MemoryModel("fp16")
    for gb in (10, 16, 24, 80):
        cap = card_bytes(gb)
        b = m.max_batch(cap, w)
        assert m.total(b, w) <= cap < m.total(b + 1, w)
    assert m.max_batch(card_bytes(24), w, cap=64) == 64
    assert m.max_batch(0.5 * GIB, w) == 0  # weights + runtime alone exceed half a GiB


def test_max_batch_by_hand_on_a_24_gib_card():
    # Without transients the bound is closed-form: (card - weights - runtime) / (frag x serve's slot)
    w = Workload(audio_seconds=8.0, prompt_tokens=64)
    m = MemoryModel("fp16", runtime_bytes=0, fragmentation=1.0)
    per_seq = 61_440 * (96 + 480 + 1) + 481 * 768 * 4
    free = 24 * GIB - 559_315_480
    b = m.max_batch(24 * GIB, w)
    # the transients cost a little per row, so the answer is just under the KV-only bound
    assert b <= free // per_seq
    assert b >= 0.95 * (free // per_seq)


def test_guide_3080_claim_batch_4_of_8_s_fits_with_room():
    """The guide says a 10 GB RTX 3080 OOMs at batch 4 with 8 s clips; the numbers say 1.4 GiB."""
    w = Workload(audio_seconds=8.0)
    for dtype in ("fp16", "fp32"):
        m = MemoryModel(dtype)
        assert m.total(4, w) < 2.5 * GIB
        assert m.max_batch(card_bytes(10), w) > 100


def test_slot_tokens_reserve_kv_for_the_longest_request_the_engine_allows():
    """ttsperf's engine preallocates max_prompt_tokens + max_new_tokens per slot (512 + 2048 unless told)."""
    m = MemoryModel("fp16")
    sized = Workload(audio_seconds=8.0)
    slots = Workload(audio_seconds=8.0, max_prompt_tokens=512, max_new_tokens=2048)
    assert slots.kv_tokens == 2560
    assert m.breakdown(4, slots)["kv_cache"] == 4 * (2561 * 61_440 + 2049 * 768 * 4)
    assert m.max_batch(card_bytes(24), slots) < m.max_batch(card_bytes(24), sized) * 576 / 2560 * 1.05


@pytest.mark.parametrize(
    ("prompt", "steps", "limits"), [(64, 375, (96, 480)), (1, 1, (32, 32)), (32, 384, (64, 480))]
)
def test_serve_limits_are_the_longest_prompt_and_reply_with_a_quarter_more(prompt, steps, limits):
    w = Workload(audio_seconds=steps / F.STEPS_PER_AUDIO_SECOND, prompt_tokens=prompt)
    assert w.longest == (prompt, steps)
    assert w.serve_limits() == limits
    # several lengths: the longest prompt and the longest reply, whichever requests hold them
    mixed = Workload.mixed([(8.0, 10), (2.0, 200)])
    assert mixed.longest == (200, 375) and mixed.serve_limits() == (256, 480)


def test_plan_counts_the_bytes_serve_reserves_one_formula():
    """plan's slot is facts.slot_bytes, which serve's --max-batch check uses (engine/config.py)."""
    from ttsperf.engine.config import EngineConfig

    w = Workload(audio_seconds=8.0, prompt_tokens=64)
    for dtype in ("fp16", "fp32"):
        m = MemoryModel(dtype)
        config = EngineConfig(max_batch=1, max_prompt_tokens=96, max_new_tokens=480)
        assert m.slot_bytes(w) == F.slot_bytes(config.max_prompt_tokens, config.max_new_tokens,
                                               F.kv_bytes_per_token(dtype))  # fmt: skip
        assert config.slot_tokens == w.kv_tokens == 576
