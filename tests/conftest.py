from __future__ import annotations

import os

import pytest

from ttsperf.model.config import TINY
from ttsperf.model.pipeline import Pipeline

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist's workers (`make check`) start with COLUMNS=80 and LINES=24 that a plain pytest run
    # does not have; ttsperf.console takes COLUMNS as the user's width, so every table the CLI tests
    # read would be cut to 80 columns. Workers get the environment a serial run sees.
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)
    # One torch thread per worker, and for the servers they start: n workers x n threads each
    # oversubscribe the cores, and torch's OpenMP threads then spin against each other (a tiny-model
    # synthesis took 40 s instead of 1 s with 2 workers on 2 cores).
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_pipe() -> Pipeline:
    return Pipeline.synthetic_model(TINY, seed=0)
