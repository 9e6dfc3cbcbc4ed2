"""Step-time model: bytes and flops from the architecture; the fit recovers known parameters."""

from __future__ import annotations

import numpy as np
import pytest

from ttsperf import facts as F
from ttsperf.errors import UserError
from ttsperf.plan.steptime import (
    DEFAULT_T_FIXED_S,
    StepModel,
    decode_bytes,
    decode_flops,
    default_model,
    fit_step_times,
)

KV16 = F.kv_bytes_per_token("fp16")


def test_bytes_and_flops_by_hand():
    w = F.DECODE_WEIGHT_PARAMS
    assert decode_bytes(1, 100, "fp16", KV16) == w * 2 + KV16 * (100 + 1)
    assert decode_bytes(8, 800, "fp32", 2 * KV16) == w * 4 + 2 * KV16 * (800 + 8)
    assert decode_flops(4, 400) == 2 * w * 4 + 4 * 20 * 768 * 400


def test_default_bandwidth_floor_on_a_4090_is_the_reference_0_4_ms():
    m = default_model("fp16", KV16, 1008, 165.2)
    floor = float(decode_bytes(1, 64, "fp16", KV16)) / 1008e9  # at 100% of peak bandwidth
    assert 0.35e-3 < floor < 0.45e-3  # docs/reference/chattts.md: "~0.4 ms/step"
    # batch 1 is dominated by the fixed overhead (the reference's ">90%")
    assert DEFAULT_T_FIXED_S / float(m.step(1, 64)) > 0.9


def test_step_grows_with_batch_and_context():
    m = default_model("fp16", KV16, 1008, 165.2)
    assert m.step(64, 64 * 500) > m.step(64, 64 * 100) > m.step(1, 100)


def test_coefficients_reproduce_step():
    m = default_model("fp16", KV16, 300, 20.0)  # slow compute so both regimes occur
    c0, c1, c2, c3, c4 = m.coefficients()
    for b, sc in [(1, 10), (512, 512 * 50), (2048, 2048 * 4000)]:
        unrolled = c0 + max(c1 + c2 * (sc + b), c3 * b + c4 * sc)
        assert unrolled == pytest.approx(float(m.step(b, sc)), rel=1e-12)


def synthetic_points(t_fixed, inv_bw, inv_flops, grid):
    m = StepModel("fp16", KV16, t_fixed, inv_bw, inv_flops)
    return [(b, c, float(m.step(b, b * c))) for b, c in grid]


def test_fit_recovers_bandwidth_bound_parameters_and_reports_mfu_unidentified():
    grid = [(b, c) for b in (1, 4, 16, 64) for c in (64, 512, 2048)]
    pts = synthetic_points(0.008, 1 / (1000e9 * 0.7), 1 / (165e12 * 0.5), grid)
    fit = fit_step_times(pts, "fp16", KV16)
    assert fit.t_fixed == pytest.approx(0.008, rel=1e-3)
    assert fit.inv_bw == pytest.approx(1 / 700e9, rel=1e-3)
    assert fit.inv_flops is None  # no point is compute-bound on this card
    assert fit.rel_rms < 1e-6


def test_fit_recovers_a_compute_bound_regime():
    grid = [(b, c) for b in (1, 8, 64, 256, 1024) for c in (64, 512)]
    inv_flops = 1 / (10e12 * 0.5)  # a slow-compute device: big batches are compute-bound
    pts = synthetic_points(0.002, 1 / (500e9 * 0.6), inv_flops, grid)
    fit = fit_step_times(pts, "fp16", KV16)
    assert fit.inv_flops is not None
    assert fit.inv_flops == pytest.approx(inv_flops, rel=0.05)
    assert fit.t_fixed == pytest.approx(0.002, rel=0.05)


def test_fit_with_noise_stays_close():
    rng = np.random.default_rng(1)
    grid = [(b, c) for b in (1, 4, 16) for c in (64, 512, 1024)]
    pts = [(b, c, t * (1 + rng.normal(0, 0.02))) for b, c, t in synthetic_points(0.01, 1 / 6e11, 0.0, grid)]
    fit = fit_step_times(pts, "fp16", KV16)
    assert fit.t_fixed == pytest.approx(0.01, rel=0.05)
    assert 0.0 < fit.rel_rms < 0.05


def test_fit_needs_two_points():
    with pytest.raises(UserError, match="profile: field .steps.: expected at least 2 measured"):
        fit_step_times([(1, 64, 0.01)], "fp16", KV16)


def test_prefill_measured_points_interpolate_and_extend():
    m = StepModel("fp16", KV16, 0.01, 0.0, 0.0, prefill_points=[(32, 0.02), (64, 0.03)])
    assert m.prefill(48) == pytest.approx(0.025)
    assert m.prefill(32, n=4) == pytest.approx(0.03 + (128 - 64) * (0.01 / 32))  # 4 prompts = 128 tokens
    # two noisy points sloping down never extrapolate below the last measured time
    noisy = StepModel("fp16", KV16, 0.01, 0.0, 0.0, prefill_points=[(16, 0.0013), (26, 0.0009)])
    assert noisy.prefill(26, n=64) == pytest.approx(0.0009)


def test_vocoder_measured_rate_or_roofline():
    m = default_model("fp16", KV16, 1008, 165.2)
    assert m.vocoder(0.0) == 0.0
    assert m.vocoder(1.0) > m.t_fixed
    m.vocoder_s_per_audio_s = 0.05
    assert m.vocoder(2.0) == pytest.approx(0.1)
