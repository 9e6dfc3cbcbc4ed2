from __future__ import annotations

import pytest

from ttsperf.model.config import TINY
from ttsperf.model.pipeline import Pipeline


@pytest.fixture(scope="session")
def tiny_pipe() -> Pipeline:
    return Pipeline.synthetic_model(TINY, seed=0)
