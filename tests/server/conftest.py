"""A real server on loopback for every test here: the tiny model in an engine process of its own
(as `ttsperf serve` runs it) behind the app, served by uvicorn (our DrainingServer) in a thread on
127.0.0.1 and a port the OS picks."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from ttsperf.model.config import get_config
from ttsperf.model.pipeline import Pipeline

from .helpers import Live, start_live


@pytest.fixture(scope="session")
def pipe() -> Pipeline:
    return Pipeline.synthetic_model(get_config("tiny"), seed=0)


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    """The default server: batch 8, no API key."""
    server = start_live()
    yield server
    server.stop()


@pytest.fixture
def make_live() -> Iterator[Callable[..., Live]]:
    """Servers with their own engine settings (small queue, short timeout, ...), stopped after."""
    started: list[Live] = []

    def make(**kw) -> Live:
        started.append(start_live(**kw))
        return started[-1]

    yield make
    for server in started:
        server.stop()
