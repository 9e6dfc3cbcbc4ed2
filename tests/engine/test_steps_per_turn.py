"""Several decode steps per host turn (EngineConfig.steps_per_turn, vLLM's multi-step scheduling):
the host launches k steps and reads one status for all of them. What that must not change is
checked here on a CPU: the audio (chunks are cut at their own boundaries, not where a row is when
the host reads it), a finished row running the turn out (it takes nothing and stays inside its KV
slot), and the step counts /metrics reports."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_overlap import TEXTS, events_of, requests  # this folder is on sys.path (rootdir tests)

from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.runner import Admission
from ttsperf.engine.types import SynthRequest, SynthResult
from ttsperf.errors import UserError
from ttsperf.model.sampling import SamplingParams


def serve_all(pipe, steps: int, together: bool, overlap: bool = False, max_batch: int = 3):
    """-> per request: its chunks and its final event, and the engine's stats."""
    config = EngineConfig(
        max_batch=max_batch, first_chunk_steps=8, chunk_steps=8, overlap=overlap, steps_per_turn=steps
    )
    engine = Engine(pipe, config).start()
    try:
        if together:
            handles = [engine.submit(r) for r in requests()]
            return [events_of(h) for h in handles], engine.stats
        return [events_of(engine.submit(r)) for r in requests()], engine.stats
    finally:
        engine.stop(drain=False, timeout=10)


@pytest.mark.parametrize(("steps", "overlap"), [(4, False), (5, True), (19, False)])
def test_one_at_a_time_the_chunks_are_cut_where_they_were(tiny_pipe, steps, overlap):
    """Streamed and buffered, one request at a time, a turn of one step against 4 (a divisor of the
    chunk's 8), 5 read one step ahead, or 19 (two chunks' boundaries pass in one turn): the same
    steps and chunk boundaries, samples equal to float rounding (a row's last boundary and its end
    may now share one audio call, which decodes them as a batch of two)."""
    one, _ = serve_all(tiny_pipe, 1, together=False)
    several, stats = serve_all(tiny_pipe, steps, together=False, overlap=overlap)
    assert any(len(chunks) > 2 for chunks, _ in one)  # streamed rows cut several chunks
    for (chunks, final), (chunks_k, final_k) in zip(one, several, strict=True):
        assert isinstance(final, SynthResult) and isinstance(final_k, SynthResult)
        assert (final.steps, final.chunks) == (final_k.steps, final_k.chunks)
        assert [len(c) for c in chunks] == [len(c) for c in chunks_k]
        for c, c_k in zip(chunks, chunks_k, strict=True):
            np.testing.assert_allclose(c, c_k, atol=1e-6)
    # /metrics counts steps, not turns: every turn's k steps, each its share of the turn's seconds
    assert stats.step_seconds.n % steps == 0 and stats.step_seconds.n == stats.batch_size.n
    assert stats.step_seconds.n >= max(f.steps for _, f in several)


def test_together_every_request_is_answered_with_the_same_lengths_and_audio(tiny_pipe):
    """Eight requests through a batch of 3: rows join and leave at other steps when a turn is 4
    steps (a finished row runs its turn out, so a later step may run in a larger batch): the same
    steps and chunk boundaries, samples equal to float rounding."""
    one, _ = serve_all(tiny_pipe, 1, together=True)
    four, _ = serve_all(tiny_pipe, 4, together=True)
    for (chunks, final), (chunks_4, final_4) in zip(one, four, strict=True):
        assert isinstance(final_4, SynthResult) and final.steps == final_4.steps
        assert [len(c) for c in chunks] == [len(c) for c in chunks_4]
        for c, c_4 in zip(chunks, chunks_4, strict=True):
            np.testing.assert_allclose(c, c_4, atol=1e-5)


@pytest.mark.parametrize("overlap", [False, True])
def test_a_row_ended_by_its_prefill_runs_its_turns_out_inside_its_slot(tiny_pipe, overlap):
    """One code allowed, the longest prompt a slot holds, 8 steps a turn: the row runs 8 steps
    more (16 one step ahead) before the host reads that it ended; past the slot's spare position
    they write at the last one (past it: an IndexError on a CPU, a device fault on a GPU)."""
    request = SynthRequest(TEXTS[1], SamplingParams(seed=3))
    prompt = len(Engine(tiny_pipe, EngineConfig(max_batch=1)).prompt_ids(request))
    config = EngineConfig(
        max_batch=2, max_prompt_tokens=prompt, max_new_tokens=1, overlap=overlap, steps_per_turn=8
    )
    engine = Engine(tiny_pipe, config).start()
    try:
        finals = [engine.submit(request).collect(timeout=60)[1] for _ in range(3)]
        last = engine.runner.state.last_position
        assert int(engine.runner.state.positions.max()) <= last == engine.runner.slots.max_len - 1
    finally:
        engine.stop(drain=False, timeout=10)
    assert all(isinstance(f, SynthResult) and f.steps == 1 for f in finals), finals


def test_a_turn_launches_k_steps_and_one_status(tiny_pipe):
    engine = Engine(tiny_pipe, EngineConfig(max_batch=2, max_prompt_tokens=64, max_new_tokens=40))
    r = engine.runner
    with engine._contexts():
        r.prefill([Admission(TEXTS[0], "[speed_5]", SamplingParams(seed=1), 1, 40, True)])
        at = int(r.state.host.positions[0])
        r.launch(4)
        assert r.launched == 1  # one status for the four steps
        out = r.collect()
    assert out.steps.tolist() == [5] and out.taken == 5  # the prefill's code and four steps'
    assert int(r.state.host.positions[0]) == int(r.state.positions[0]) == at + 4


@pytest.mark.parametrize(("steps", "expected"), [(0, "expected at least 1"), (65, "expected at most 64")])
def test_a_turn_of_no_steps_or_too_many_is_refused_by_its_flag(steps, expected):
    with pytest.raises(UserError, match=f"--steps-per-turn {steps}: {expected}"):
        EngineConfig(steps_per_turn=steps).validate()


def test_a_turn_that_fails_midway_keeps_the_host_s_positions_those_of_the_device(tiny_pipe):
    """Out of memory at a turn's third step: the two steps before it ran, so the host's mirror of
    the positions (from which the next step's context length comes) counts them."""
    engine = Engine(tiny_pipe, EngineConfig(max_batch=2, max_prompt_tokens=64, max_new_tokens=40))
    r = engine.runner
    run, calls = r.run_step, []

    def failing(*args):
        calls.append(args)
        if len(calls) == 3:
            raise torch.OutOfMemoryError("injected")
        run(*args)

    r.run_step = failing
    with engine._contexts():
        r.prefill([Admission(TEXTS[0], "[speed_5]", SamplingParams(seed=1), 1, 40, True)])
        with pytest.raises(torch.OutOfMemoryError):
            r.launch(4)
    assert len(calls) == 3 and r.launched == 0  # no status for a failed turn
    assert int(r.state.host.positions[0]) == int(r.state.positions[0]) == calls[0][1] + 1
