"""The audio call in every mode gives each row the samples of the eager call: CUDA graphs' padding
(checked on a CPU with the padded call run eagerly) and torch.compile with dynamic rows and frames."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from ttsperf.audio import to_pcm16
from ttsperf.engine.audio import BatchedAudio
from ttsperf.engine.graphs import GraphedAudio
from ttsperf.model.config import TINY
from ttsperf.model.pipeline import Pipeline


def _windows(audio: BatchedAudio, lengths: list[int]):
    return [audio.window(slot, steps, 0, final=True) for slot, steps in enumerate(lengths)]


@pytest.fixture(scope="module")
def setup():
    pipe = Pipeline.synthetic_model(TINY, seed=0)
    hidden = torch.randn(8, 70, TINY.gpt.hidden_size, generator=torch.Generator().manual_seed(1))
    return pipe, hidden


@torch.inference_mode()
def test_graph_buckets_pad_rows_steps_and_frames_without_changing_a_row(setup):
    pipe, hidden = setup
    eager, graphed = BatchedAudio(pipe.model, 4), BatchedAudio(pipe.model, 4)
    graphed.call = GraphedAudio(graphed.synthesize, 8, 70, capture=False)
    for lengths in ([5], [9, 30, 17], [40, 41, 60, 33, 50]):
        windows = _windows(eager, lengths)
        for a, b in zip(eager.decode(hidden, windows), graphed.decode(hidden, windows), strict=True):
            assert a.shape == b.shape and len(a) > 0
            np.testing.assert_allclose(a, b, atol=1e-5)
    assert len(graphed.call.graphs) >= 2 and graphed.call.eager_calls == 0


@pytest.fixture
def torch_threads(request):
    """torch's intra-op threads for one test (ATen's conv choice depends on them), put back after."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("torch_threads", [1, 2], indirect=True, ids=["1-thread", "2-threads"])
@torch.inference_mode()
def test_compiled_call_matches_eager_and_compiles_nothing_after_start(setup, torch_threads):
    """On a CPU, ATen picks each conv's backend by its input's size and a compiled call guards on
    it: 1 row or more (16 or more at one thread), and at one row, thresholds in steps (on tiny 103,
    161, 214, 321 and 641; several recompiled inside requests before). compile_now compiles every
    such graph at start: calls of every row count, either side of every threshold, whole and the
    last samples of a window (1 frame), then compile nothing more (any recompile raises)."""
    pipe, _ = setup
    hidden = torch.randn(17, 660, TINY.gpt.hidden_size, generator=torch.Generator().manual_seed(2))
    eager, compiled = BatchedAudio(pipe.model, 4), BatchedAudio(pipe.model, 4, compile=True)
    torch._dynamo.reset()  # graphs of other tests would count against dynamo's limit of 8
    torch._dynamo.utils.counters.clear()
    report = {"note": "compile"}
    compiled.compile_now(hidden, report)
    assert compiled.compiled and "audio call compiled" in report["note"], report
    assert {(1, 2), (2, 2), (16, 2), (1, 103), (1, 321), (1, 641)} <= set(compiled.compile_shapes(hidden))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 5  # one row's regimes and more
    steps = (1, 3, 102, 103, 160, 161, 213, 214, 320, 321, 640, 641, 659)
    with torch.compiler.set_stance("fail_on_recompile"):
        for rows, n in itertools.product((1, 2, 15, 16, 17), steps):
            whole = [eager.window(slot, n, 0, final=True) for slot in range(rows)]
            tail = [eager.window(w.slot, n, w.end - 1, final=True) for w in whole]  # 1 frame
            for windows in (whole, tail):
                got = compiled.decode(hidden, windows)
                if rows in (1, 17) and n in (1, 3, 103, 641):  # the eager call is the test's cost
                    for a, b in zip(eager.decode(hidden, windows), got, strict=True):
                        np.testing.assert_allclose(a, b, atol=1e-4)


@pytest.mark.slow
@torch.inference_mode()
def test_compile_at_start_calls_only_slots_that_exist(setup):
    """With one slot (serve --max-batch 1) the start calls one row: a second would index past the
    engine's states (on a CPU the compile then failed; on CUDA a device-side assert)."""
    pipe, _ = setup
    torch._dynamo.reset()
    one = torch.randn(1, 70, TINY.gpt.hidden_size, generator=torch.Generator().manual_seed(3))
    audio = BatchedAudio(pipe.model, 4, compile=True)
    assert audio.compile_shapes(one) == [(1, 2)]
    report = {"note": "compile"}
    audio.compile_now(one, report)
    assert audio.compiled and "audio call compiled" in report["note"], report


@pytest.mark.slow
@torch.inference_mode()
def test_compiled_pcm_call_is_the_compiled_float_call_as_pcm(setup):
    """With `pcm` the conversion compiles into the call's graph: at most one step of 16-bit PCM from
    the host's conversion of the compiled float call (fusing may round the last float bit
    otherwise), and no recompile after start."""
    pipe, hidden = setup
    torch._dynamo.reset()  # graphs of other tests (other shapes) would count against dynamo's limit
    floats, pcm = (
        BatchedAudio(pipe.model, 4, compile=True),
        BatchedAudio(pipe.model, 4, compile=True, pcm=True),
    )
    for audio in (floats, pcm):
        audio.compile_now(hidden, {"note": "compile"})
        assert audio.compiled
    torch._dynamo.utils.counters.clear()
    same = total = 0
    for lengths in ([5], [9, 30, 17], [40, 41, 60, 33, 50]):
        windows = _windows(floats, lengths)
        for a, b in zip(floats.decode(hidden, windows), pcm.decode(hidden, windows), strict=True):
            host = np.frombuffer(to_pcm16(a), "<i2")
            assert b.dtype == np.int16 and b.shape == host.shape and len(b) > 0
            assert np.abs(b.astype(np.int32) - host).max() <= 1
            same, total = same + int((b == host).sum()), total + len(b)
    assert same / total > 0.99, f"{same} of {total} samples equal"
    assert not torch._dynamo.utils.counters["stats"]["unique_graphs"]
