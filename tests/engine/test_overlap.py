"""One step ahead (issue 33 item 3): the engine launches step N+1 before it reads step N's status,
so on a GPU the host's work for a step runs while the next one does. What that asks of the
bookkeeping is checked here on a CPU, where the order is the same and the device is not
asynchronous: a status read later still lands on the right rows after rows moved and joined, a
finished row that runs the one step more changes nothing it keeps and stays inside its KV slot,
and a request's audio is the same to the byte with the status read at once or one step ahead."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ttsperf.engine.device_batch import BatchState
from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.runner import Admission
from ttsperf.engine.types import AudioChunk, SynthError, SynthRequest, SynthResult
from ttsperf.model.sampling import RowParams, SamplingParams, seed_key

TEXTS = ["你好，这是一段用于压测的文本。", "Hello world, this is a test.", "今天天气很好。", "好。"]


def batch_of(n: int) -> BatchState:
    state = BatchState(8, 4, 16, 32, 0, torch.device("cpu"))
    params = RowParams.of([SamplingParams()] * n, 626)
    state.add([10] * n, [20] * n, [True] * n, seed_key(torch.arange(n)), params, [30] * n)
    return state


def test_a_status_read_later_lands_on_the_rows_where_they_are_now():
    state = batch_of(5)
    state.steps[:5] = torch.tensor([1, 2, 3, 4, 5])
    state.done[4] = True
    state.send()  # step N's status, on its way
    state.steps[:5] += 10  # step N+1 ran: the status read below must not see it
    state.compact(np.array([0, 2]))  # rows 3 and 4 move into slots 0 and 2
    n = 1
    state.add(
        [7] * n, [20] * n, [True] * n, seed_key(torch.arange(n)), RowParams.of([SamplingParams()], 626), [30]
    )
    assert state.receive() == (4 + 2 + 5, None)  # codes taken by the three rows the status knows
    assert state.host.steps[:4].tolist() == [4, 2, 5, 0]  # the row that joined after: nothing yet
    assert state.host.done[:4].tolist() == [False, False, True, False]
    assert not state.sent


def test_statuses_are_read_oldest_first_and_a_truncation_forgets_the_rows_gone():
    state = batch_of(3)
    state.steps[:3] = 1
    state.send()
    state.steps[:3] = 2
    state.send()
    state.truncate(2)
    assert state.receive() == (2, None) and state.host.steps[:3].tolist() == [1, 1, 0]
    assert state.receive() == (2, None) and state.host.steps[:3].tolist() == [2, 2, 0]


def runner_of(pipe, max_prompt: int, max_new: int):
    engine = Engine(pipe, EngineConfig(max_batch=2, max_prompt_tokens=max_prompt, max_new_tokens=max_new))
    return engine, engine.runner


def test_the_step_launched_next_is_not_read_by_the_collect_before_it(tiny_pipe):
    engine, r = runner_of(tiny_pipe, 64, 40)
    with engine._contexts():
        r.prefill([Admission(TEXTS[0], "[speed_5]", SamplingParams(seed=1), 1, 40, True)])
        r.launch()
        r.launch()
        assert r.launched == 2
        first = r.collect()
        assert first.steps.tolist() == [2] and first.taken == 2  # the prefill's code and step 1's
        assert r.collect().steps.tolist() == [3] and r.launched == 0


def test_a_finished_row_runs_one_step_more_inside_its_slot_and_keeps_what_it_had(tiny_pipe):
    """The longest prompt a slot holds and the longest audio: the step after the last one writes
    its K/V inside the slot (past it would be an IndexError on a CPU, a device fault on a GPU) and
    takes nothing."""
    prompt = tiny_pipe.prompt([TEXTS[0]], "[speed_5]")[0].shape[1]
    limit = 12
    engine, r = runner_of(tiny_pipe, prompt, limit)
    s = r.state
    with engine._contexts():
        r.prefill([Admission(TEXTS[0], "[speed_5]", SamplingParams(seed=2), 2, limit, True)])
        while not (out := r.step()).steps[0] >= limit:
            pass
        kept = [t[:1].clone() for t in (s.codes, s.steps, s.history)]
        hidden = s.hidden[0, :limit].clone()
        k_last = r.slots.k[0][0, :, prompt + limit - 1].clone()
        r.step()  # the one step more, as one step ahead runs it before reading that the row ended
    assert out.steps[0] == limit and int(s.positions[0]) == prompt + limit == r.slots.max_len - 1
    for before, now in zip(kept, (s.codes, s.steps, s.history), strict=True):
        assert torch.equal(before, now[:1])
    assert torch.equal(hidden, s.hidden[0, :limit])
    assert not torch.equal(k_last, r.slots.k[0][0, :, prompt + limit - 1])  # it did write there


def events_of(handle) -> tuple[list[np.ndarray], SynthResult | SynthError]:
    """A request's streamed chunks (or its one buffered answer's samples) and its final event."""
    events = [handle.next_event_blocking(timeout=60)]
    while not isinstance(events[-1], (SynthResult, SynthError)):
        events.append(handle.next_event_blocking(timeout=60))
    return [e.samples for e in events if isinstance(e, AudioChunk)], events[-1]


@pytest.mark.parametrize("overlap", [False, True])
def test_a_row_ended_by_its_prefill_runs_two_steps_more_inside_its_slot(tiny_pipe, overlap):
    """One code allowed, the longest prompt: one step ahead, the host reads that such a row ended
    only after two more steps (it joined after the step in flight was sent), which write the slot's
    last two positions; the spare position holds the second."""
    request = SynthRequest(TEXTS[1], SamplingParams(seed=3))
    prompt = len(Engine(tiny_pipe, EngineConfig(max_batch=1)).prompt_ids(request))
    config = EngineConfig(max_batch=2, max_prompt_tokens=prompt, max_new_tokens=1, overlap=overlap)
    engine = Engine(tiny_pipe, config).start()
    try:
        finals = [engine.submit(request).collect(timeout=60)[1] for _ in range(3)]
    finally:
        engine.stop(drain=False, timeout=10)
    assert all(isinstance(f, SynthResult) and f.steps == 1 for f in finals), finals


def serve_all(pipe, overlap: bool, requests: list[SynthRequest], together: bool, max_batch: int = 3):
    """-> per request: its chunks and its final event (one after another, or all submitted at once)."""
    config = EngineConfig(max_batch=max_batch, first_chunk_steps=8, chunk_steps=8, overlap=overlap)
    engine = Engine(pipe, config).start()
    try:
        if together:
            handles = [engine.submit(r) for r in requests]
            return [events_of(h) for h in handles], engine.describe()
        return [events_of(engine.submit(r)) for r in requests], engine.describe()
    finally:
        engine.stop(drain=False, timeout=10)


def requests() -> list[SynthRequest]:
    return [
        SynthRequest(t * (1 + i % 3), SamplingParams(seed=i), stream=i % 2 == 0, max_new_tokens=None)
        for i, t in enumerate(TEXTS * 2)
    ]


def test_one_at_a_time_the_audio_is_the_same_to_the_byte(tiny_pipe):
    """Streamed and buffered, one request at a time: the same chunks, byte for byte."""
    at_once, described = serve_all(tiny_pipe, False, requests(), together=False)
    ahead, described_ahead = serve_all(tiny_pipe, True, requests(), together=False)
    assert (described["overlap"], described_ahead["overlap"]) == (False, True)
    for (chunks, final), (chunks_ahead, final_ahead) in zip(at_once, ahead, strict=True):
        assert isinstance(final, SynthResult) and isinstance(final_ahead, SynthResult)
        assert final.steps == final_ahead.steps and final.chunks == final_ahead.chunks
        assert [c.tobytes() for c in chunks] == [c.tobytes() for c in chunks_ahead]


def test_together_every_request_is_answered_with_the_same_lengths_and_audio(tiny_pipe):
    """Eight requests through a batch of 3: rows join and leave at other turns one step ahead (a
    finished row runs a step more, so later steps may run in a larger batch): the same steps and
    chunk boundaries, samples equal to float rounding."""
    at_once, _ = serve_all(tiny_pipe, False, requests(), together=True)
    ahead, _ = serve_all(tiny_pipe, True, requests(), together=True)
    for (chunks, final), (chunks_ahead, final_ahead) in zip(at_once, ahead, strict=True):
        assert isinstance(final_ahead, SynthResult) and final.steps == final_ahead.steps
        assert [len(c) for c in chunks] == [len(c) for c in chunks_ahead]
        for c, c_ahead in zip(chunks, chunks_ahead, strict=True):
            np.testing.assert_allclose(c, c_ahead, atol=1e-5)


def test_by_default_a_cpu_reads_each_step_at_once(tiny_pipe):
    """On a CPU a launched step is done: reading it a step later would only delay every event."""
    engine = Engine(tiny_pipe, EngineConfig(max_batch=1))
    assert tiny_pipe.device.type == "cpu" and engine.describe()["overlap"] is False


@pytest.mark.parametrize("overlap", [False, True])
def test_one_step_ahead_the_audio_is_handed_out_at_the_next_turn(tiny_pipe, overlap, monkeypatch):
    """One step ahead the host does not wait for the audio call it launched: its samples are taken
    at a later turn (or at the end of the same turn once no rows are left, with no next turn to
    come); read at once, in the turn that launched it. Either way every request hears its chunks
    in order, then its end."""
    config = EngineConfig(max_batch=3, first_chunk_steps=8, chunk_steps=8, overlap=overlap)
    engine = Engine(tiny_pipe, config)
    turn = [0]
    real_turn, real_launch = engine._turn, engine.runner.launch_audio
    taken: list[tuple[int, int, int]] = []  # (launched at turn, taken at turn, rows then)

    def counted_turn():
        turn[0] += 1
        real_turn()

    def launch_audio(windows):
        decoding, at = real_launch(windows), turn[0]
        real_samples = decoding.samples

        def samples():
            taken.append((at, turn[0], engine.table.size))
            return real_samples()

        decoding.samples = samples
        return decoding

    monkeypatch.setattr(engine, "_turn", counted_turn)
    monkeypatch.setattr(engine.runner, "launch_audio", launch_audio)
    engine.start()
    try:
        answers = [events_of_indexed(engine.submit(r)) for r in requests()[:4]]
    finally:
        engine.stop(drain=True, timeout=30)
    assert taken
    if overlap:
        assert all(later > at or rows == 0 for at, later, rows in taken)
        assert sum(later > at for at, later, _ in taken) > len(taken) // 2
    else:
        assert all(later == at for at, later, _ in taken)
    for indices, final in answers:
        assert isinstance(final, SynthResult) and indices == list(range(final.chunks))


def events_of_indexed(handle) -> tuple[list[int], SynthResult | SynthError]:
    """A request's chunks' indices, in the order it heard them, and its final event."""
    indices = []
    while True:
        event = handle.next_event_blocking(timeout=60)
        if not isinstance(event, AudioChunk):
            return indices, event
        indices.append(event.index)
