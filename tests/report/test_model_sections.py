"""report/model_sections.py: the profile and `profile --optimizations` sections (see conftest.py)."""

from __future__ import annotations

from ttsperf.report.inputs import read_inputs
from ttsperf.report.model_sections import optimizations_section, profile_section

from .blocks import tables as _tables


def test_profile_section_memory_and_step_time_vs_batch(results):
    inputs = read_inputs([results / "profile.json"])
    path, prof = inputs.profiles[0]
    sec = profile_section(path, prof, "k")
    memory, step = sec.charts()
    assert (
        "Memory vs batch" in memory.svg
        and "context 16 tokens" in memory.svg
        and "context 64 tokens" in memory.svg
    )
    assert "ms per step" in step.svg
    steps = _tables(sec)[2]
    assert len(steps.rows) == len(prof.steps) == 6
    assert steps.rows[0][2] == f"{1000 * prof.steps[0].seconds.value:.2f} ms"


def test_optimisations_section_and_deltas(results):
    inputs = read_inputs([results / "optimizations.json"])
    path, rows = inputs.optimizations[0]
    table = _tables(optimizations_section(path, rows))[0]
    by = {r[0]: r for r in table.rows}
    assert by["fp32 (baseline)"][3] == "+0%"
    assert by["TF32 off"][2] == "–" and "not measured: CUDA only" in by["TF32 off"][7]
    half = next(r for r in rows if r["variant"] == "fp16 weights (.half())")
    base = rows[0]
    assert by["fp16 weights (.half())"][3] == f"{half['step_ms'] / base['step_ms'] - 1:+.0%}"
