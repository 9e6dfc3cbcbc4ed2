"""Profiles for plan tests, generated from known step-model parameters (so a fit can be checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttsperf import facts as F
from ttsperf.plan.steptime import StepModel
from ttsperf.profile.schema import (
    DeviceInfo,
    Measured,
    MemoryPoint,
    ModelInfo,
    ModelProfile,
    PrefillPoint,
    StepPoint,
)


def m(value: float, unit: str) -> Measured:
    return Measured(value=value, unit=unit, how="synthetic test value", n=5)


def make_profile(
    device: str = "RTX 4090",
    kind: str = "cuda",
    t_fixed: float = 0.004,
    bw_eff: float = 700e9,
    memory_bytes: int | None = 24 * 2**30,
    dtype: str = "fp16",
    runtime_extra: float = 300e6,
) -> ModelProfile:
    kv = F.kv_bytes_per_token(dtype)
    weights = F.TOTAL_PARAMS * F.BYTES_PER_DTYPE[dtype]
    sm = StepModel(dtype, kv, t_fixed, 1.0 / bw_eff, 0.0)
    grid = [(b, c) for b in (1, 4, 16, 64) for c in (64, 512, 2048)]
    return ModelProfile(
        device=DeviceInfo(name=device, kind=kind, memory_bytes=memory_bytes),
        model=ModelInfo(config="chattts", dtype=dtype, parameters=dict(F.PARAMS), synthetic=True),
        runtime={"autocast": False, "cuda_graphs": False},
        weights_bytes=m(weights, "B"),
        kv_bytes_per_token=m(kv, "B"),
        memory=[
            MemoryPoint(batch=b, context=c, peak_bytes=m(weights + runtime_extra + b * c * kv, "B"))
            for b, c in grid
        ],
        steps=[StepPoint(batch=b, context=c, seconds=m(float(sm.step(b, b * c)), "s")) for b, c in grid],
        prefill=[PrefillPoint(prompt_tokens=p, seconds=m(t_fixed + p * 1e-5, "s")) for p in (16, 64, 256)],
        decode_seconds_per_audio_second=m(0.01, "s/s"),
    )


@pytest.fixture(name="make_profile")
def make_profile_fixture():
    return make_profile


@pytest.fixture
def profile_file(tmp_path: Path):
    def write(**kw) -> Path:
        p = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}.json"
        p.write_text(json.dumps(make_profile(**kw).dump()), encoding="utf-8")
        return p

    return write
