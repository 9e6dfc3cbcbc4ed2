"""docs/CLAIMS.md quotes numbers from the memory model: they must be what the code computes today."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttsperf.plan.api import make_plan

CLAIMS = Path(__file__).resolve().parents[2] / "docs" / "CLAIMS.md"


@pytest.fixture(scope="module")
def doc() -> str:
    return CLAIMS.read_text(encoding="utf-8")


def _rows(dtype: str, memory_at: int):
    plan = make_plan(
        gpus="RTX 3080,A100 40GB PCIe",
        scenario="offline",
        memory_at=memory_at,
        dtype=dtype,
        requests=100,
        audio_seconds=8.0,  # the guide's "8 s clips": one length (prompt 64 tokens, the flag's default)
    )
    return plan, {r.gpu: r for r in plan.scenarios[0].rows}


def test_parameters_weights_and_kv_per_second(doc):
    plan, _ = _rows("fp16", 4)
    m = plan.inputs.model
    assert f"**{m['parameters']:,}** parameters" in doc
    assert f"**{m['weights_bytes'] / 1e9:.2f} GB** ({m['weights_bytes']:,.0f} B) in fp16" in doc
    assert f"**{m['kv_bytes_per_audio_second'] / 1e6:.2f} MB/s** per sequence in fp16" in doc
    assert f"({m['bytes_per_audio_second_with_fragmentation'] / 1e6:.2f} MB/s with" in doc


def test_3080_batch_4_and_max_batches(doc):
    _, r16 = _rows("fp16", 4)
    _, r32 = _rows("fp32", 4)
    assert f"**{r16['RTX 3080'].memory_bytes['total'] / 2**30:.2f} GiB** in fp16" in doc
    assert f"**{r32['RTX 3080'].memory_bytes['total'] / 2**30:.2f} GiB** in fp32" in doc
    assert f"the most that fit are **{r16['RTX 3080'].max_batch}** sequences in fp16, " in doc
    assert f"**{r32['RTX 3080'].max_batch}** in fp32" in doc
    assert f"the most that fit are **{r16['A100 40GB PCIe'].max_batch}** (fp16) / " in doc
    assert f"**{r32['A100 40GB PCIe'].max_batch}** (fp32)" in doc
