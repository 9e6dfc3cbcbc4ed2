"""plan --profile of a card profiled in every mode (profile --modes): each mode planned from the
card's own measurement of it; a mode it did not measure is refused, naming those it did."""

from __future__ import annotations

import json

import pytest

from ttsperf.errors import UserError
from ttsperf.plan.api import make_plan
from ttsperf.plan.cards import profile_for_mode
from ttsperf.profile.schema import AudioCallPoint, Measured, ModeMeasurement, StepPoint, load_profile


def m(value: float, unit: str) -> Measured:
    return Measured(value=value, unit=unit, how="synthetic test value", n=5)


# the engine's whole step per mode at batch 1 and 64 (s): most of eager's is fixed, as on a card
STEPS = {"eager": (0.012, 0.018), "compile": (0.006, 0.012), "cuda-graphs": (0.0025, 0.0032)}


def _modes_profile(make_profile, tmp_path, modes=("eager", "compile", "cuda-graphs")):
    p = make_profile(device="RTX 4090")
    for name in modes:
        lo, hi = STEPS[name]
        p.modes[name] = ModeMeasurement(
            steps=[StepPoint(batch=b, context=300, seconds=m(t, "s")) for b, t in ((1, lo), (64, hi))],
            prefill=p.prefill,
            audio_calls=[AudioCallPoint(rows=r, seconds=m(lo / 2 * r**0.3, "s")) for r in (1, 64)],
        )
    if "cuda-graphs" not in modes:
        p.modes["cuda-graphs"] = ModeMeasurement(skipped="needs CUDA")
    path = tmp_path / "modes.json"
    path.write_text(json.dumps(p.dump()))
    return path


def _row(plan):
    return next(r for r in plan.scenarios[0].rows if r.gpu == "RTX 4090")


def _plan(path, **kw):
    return make_plan(profile=[str(path)], gpus="RTX 4090", scenario="realtime", requests=200, **kw)


def test_each_mode_is_planned_from_its_own_measurement(make_profile, tmp_path):
    path = _modes_profile(make_profile, tmp_path)
    rows = {mode: _row(_plan(path, mode=mode)) for mode in STEPS}
    for mode, row in rows.items():
        assert row.settings.mode == mode and row.basis["step.t_fixed"].kind == "measured"
        assert f"measured in {path}" in row.basis["step.t_fixed"].how
    # the card's own steps: graphs cost the least fixed time and carry the most, eager the reverse
    fixed = [rows[mode].settings.step_overhead_s for mode in ("cuda-graphs", "compile", "eager")]
    assert fixed == sorted(fixed) and fixed[0] < 0.003
    assert rows["cuda-graphs"].max_streams > rows["compile"].max_streams > rows["eager"].max_streams


def test_without_mode_plan_searches_the_measured_modes(make_profile, tmp_path):
    row = _row(_plan(_modes_profile(make_profile, tmp_path)))
    assert row.settings.mode == "cuda-graphs" and row.settings.max_batch == 256  # graphs capture 256


def test_a_mode_not_measured_is_refused_naming_those_measured(make_profile, tmp_path):
    path = _modes_profile(make_profile, tmp_path, modes=("eager", "compile"))
    assert load_profile(path).measured_modes() == ["eager", "compile"]
    with pytest.raises(UserError, match=r"--mode cuda-graphs: .*modes\.json measured eager, compile"):
        _plan(path, mode="cuda-graphs")


def test_a_mode_is_the_single_mode_profile_of_it(make_profile, tmp_path):
    p = load_profile(_modes_profile(make_profile, tmp_path))
    one = profile_for_mode(p, "compile")
    assert one.steps == p.modes["compile"].steps and one.runtime["compile"] and not one.modes
    # the whole step holds the host's per-row work: not counted again beside it
    assert one.host_per_row_step_s.value == 0.0 and one.host_per_step_s.value == 0.0


def test_a_single_mode_profile_is_read_and_planned_as_before(profile_file):
    path = profile_file(device="RTX 4090")
    raw = json.loads(path.read_text())
    raw["version"] = 2
    raw.pop("modes"), raw.pop("per_op_host"), raw.pop("host")
    path.write_text(json.dumps(raw))
    assert load_profile(path).measured_modes() == []
    row = _row(_plan(path, mode="compile"))
    assert row.settings.mode == "eager"  # a single-mode profile plans the mode it measured, as before
