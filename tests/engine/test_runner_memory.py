"""The runner sizes the KV slots it allocates: as many rows as fit in half the free memory."""

from __future__ import annotations

from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.runner import AUTO_BATCH_CAP, auto_max_batch


def test_auto_max_batch_is_capped_and_never_zero(tiny_pipe):
    assert auto_max_batch(tiny_pipe, 600, cap=5) == 5
    assert auto_max_batch(tiny_pipe, 600, headroom=1e-12) == 1  # nothing fits: still one row
    assert 1 <= auto_max_batch(tiny_pipe, 600) <= AUTO_BATCH_CAP


def test_an_engine_without_max_batch_gets_the_runners_size(tiny_pipe):
    engine = Engine(tiny_pipe, EngineConfig(max_batch=None, max_prompt_tokens=100, max_new_tokens=100))
    assert engine.max_batch == engine.runner.max_batch == auto_max_batch(tiny_pipe, 200)
    assert engine.slots.max_batch == engine.max_batch == engine.describe()["effective_max_batch"]
