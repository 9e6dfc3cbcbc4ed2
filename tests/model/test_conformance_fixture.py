"""ttsperf's model against outputs the official ChatTTS package produced on the same weights.

`make conformance` runs both implementations side by side and saves the official outputs for the
`tiny` config in tests/fixtures/conformance_tiny.npz; this test recomputes ours (assets rebuilt
from the same seed) and compares, so every `make test` checks conformance without the 7 GB venv.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ttsperf.model.assets import make_random_assets
from ttsperf.model.config import TINY
from ttsperf.model.conformance import STAGES, ours_stage_outputs, rel_error

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_tiny.npz"
REL_TOL = 1e-4


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    saved = np.load(FIXTURE)
    inputs = {k[3:]: saved[k] for k in saved.files if k.startswith("in_")}
    theirs = {k[4:]: saved[k] for k in saved.files if k.startswith("out_")}
    root = make_random_assets(tmp_path_factory.mktemp("conf") / "asset", "tiny", seed=0)
    return ours_stage_outputs(TINY, root, inputs), theirs


@pytest.mark.parametrize("stage", [s for s in STAGES if s != "synth_codes"])
def test_stage_matches_official(compared, stage):
    ours, theirs = compared
    assert ours[stage].shape == theirs[stage].shape
    assert rel_error(ours[stage], theirs[stage]) <= REL_TOL


def test_greedy_codes_match_official(compared):
    ours, theirs = compared
    np.testing.assert_array_equal(ours["synth_codes"], theirs["synth_codes"])


def test_a_different_model_would_fail(compared, tmp_path):
    """The comparison has teeth: weights from another seed are far outside the tolerance."""
    saved = np.load(FIXTURE)
    inputs = {k[3:]: saved[k] for k in saved.files if k.startswith("in_")}
    other = ours_stage_outputs(TINY, make_random_assets(tmp_path / "other", "tiny", seed=1), inputs)
    _, theirs = compared
    assert rel_error(other["gpt_hidden"], theirs["gpt_hidden"]) > 1e-2
