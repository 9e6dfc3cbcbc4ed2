"""The graphed prefill (GraphedPrefill) gives each joining row what the eager prefill gives it: the
same first codes, hidden state and K/V, whatever the bucket's padding (rows and prompt length);
checked on a CPU with the padded call run eagerly, the capture itself needs a GPU
(benchmarks/gpu_check.py). A call whose bucket would pass the last slot runs eagerly."""

from __future__ import annotations

import pytest
import torch

from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.runner import Admission
from ttsperf.model.sampling import SamplingParams

TEXTS = ["你好，这是一段用于压测的文本。", "Hello world, this is a test.", "今天天气很好。", "好。"]


def admissions(texts: list[str], seed: int = 0) -> list[Admission]:
    return [
        Admission(t, "[speed_5]", SamplingParams(seed=seed + i), seed + i, 100, True)
        for i, t in enumerate(texts)
    ]


def runner(pipe, graphs: bool):
    engine = Engine(pipe, EngineConfig(max_batch=4, graphs_without_capture=graphs))
    return engine, engine.runner


@pytest.mark.parametrize("calls", [[3, 1], [1, 2, 1], [2, 2]])
def test_graphed_prefill_gives_each_row_the_eager_rows_state(tiny_pipe, calls):
    eager_engine, eager = runner(tiny_pipe, graphs=False)
    graphed_engine, graphed = runner(tiny_pipe, graphs=True)
    with eager_engine._contexts():
        graphed.warm()
        texts = iter(TEXTS)
        for n in calls:
            rows = admissions([next(texts) for _ in range(n)], seed=10 * n)
            eager.prefill(rows), graphed.prefill(rows)
    e, g = eager.state, graphed.state
    assert e.size == g.size == sum(calls)
    b = e.size
    for name in ("codes", "positions", "steps", "done", "history"):
        assert torch.equal(getattr(e, name)[:b], getattr(g, name)[:b]), name
    torch.testing.assert_close(e.hidden[:b, 0], g.hidden[:b, 0])
    lengths = e.host.positions[:b].tolist()
    for layer in range(len(eager.slots.k)):
        for slot, n in enumerate(lengths):  # past a prompt: padding, overwritten before it is read
            torch.testing.assert_close(eager.slots.k[layer][slot, :, :n], graphed.slots.k[layer][slot, :, :n])
            torch.testing.assert_close(eager.slots.v[layer][slot, :, :n], graphed.slots.v[layer][slot, :, :n])
    prefill = graphed.graphed_prefill
    # [3, 1]: 3 rows pad to the 4-row bucket (slot 3 free then); [2, 2]: the second pair's
    # 2-row bucket fits slots 2..3. [1, 2, 1]: 2 rows at slot 1 pad to 2, the last joins at 3.
    assert prefill.eager_calls == 0
    assert len(prefill.graphs) == len(prefill.reachable()) == 3 * 5  # rows 1, 2, 4 x prompts 32..512


def test_a_bucket_past_the_last_slot_or_the_longest_prompt_runs_eagerly(tiny_pipe):
    engine, graphed = runner(tiny_pipe, graphs=True)
    prefill = graphed.graphed_prefill
    assert prefill.row_sizes == [1, 2, 4] and prefill.prompt_sizes == [32, 64, 128, 256, 512]
    assert prefill.key(3, 20, first=0) == (4, 32)
    assert prefill.key(3, 20, first=1) is None  # 4 rows from slot 1 would pass slot 3
    assert prefill.key(1, 513, first=0) is None  # longer than --max-prompt-tokens' bucket
    assert prefill.key(5, 20, first=0) is None
    with engine._contexts():
        graphed.prefill(admissions(TEXTS[:1]))
        graphed.prefill(admissions(TEXTS[1:4]))  # 3 rows at slot 1: eager
    assert prefill.eager_calls == 1 and graphed.state.size == 4
    assert sorted(prefill.graphs) == [(1, 32)]  # built on first use (no warm-up here)
