"""The runner's promises: one host read per step, batched prefill and batched audio equal to doing
each row alone, and the same codes as the one-batch pipeline for the same seed."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import ttsperf.engine.graphs as graphs_module
import ttsperf.engine.runner as runner_module
import ttsperf.model.step as step_module
from ttsperf.engine.audio import BatchedAudio, Window
from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.types import SynthRequest, SynthResult
from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.sampling import SamplingParams
from ttsperf.model.step import Step
from ttsperf.model.transfer import pack

TEXTS = ["你好，这是一段用于压测的文本。", "Hello world, this is a test.", "今天天气很好。", "好。"]
aten = torch.ops.aten


class HostReads(TorchDispatchMode):
    """Counts what would make the host wait for a GPU: a scalar read off a tensor, and every
    .numpy() / .tolist() (a tensor's data used on the host; a CUDA tensor needs a .cpu() first,
    so `t.cpu().numpy()` counts once)."""

    SCALAR = {aten._local_scalar_dense.default, aten.is_nonzero.default, aten.equal.default}

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.SCALAR:
            self.count += 1
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def watching(self):
        originals = {name: getattr(torch.Tensor, name) for name in ("numpy", "tolist")}

        def counted(name):
            def method(t, *a, **kw):
                self.count += 1
                return originals[name](t, *a, **kw)

            return method

        for name in originals:
            setattr(torch.Tensor, name, counted(name))
        try:
            with self:
                yield self
        finally:
            for name, original in originals.items():
                setattr(torch.Tensor, name, original)


def test_a_step_reads_the_device_once(tiny_pipe):
    """Driven step by step in this thread (dispatch modes are per thread): every step makes one
    host read (the rows' steps and EOS flags); a step that emits audio adds one per Decoder+Vocos
    call, and nothing else reads the device, however many rows run."""
    engine = Engine(tiny_pipe, EngineConfig(max_batch=8, first_chunk_steps=24, chunk_steps=24))
    handles = [
        engine.submit(SynthRequest(t, SamplingParams(seed=i), stream=i % 2 == 0))
        for i, t in enumerate(TEXTS * 2)
    ]
    calls: list[int] = []
    original = engine.runner.launch_audio

    def launch_audio(windows):
        if windows:
            calls[-1] += len({max(1, w.steps - w.first - 1).bit_length() for w in windows})
        return original(windows)

    engine.runner.launch_audio = launch_audio
    per_step: list[tuple[int, int]] = []
    with engine._contexts():
        engine._admit()
        assert engine.running() == 8
        while engine.running():
            calls.append(0)
            with HostReads().watching() as reads:
                engine._step()
            per_step.append((reads.count, calls[-1]))
    assert all(isinstance(h.collect(timeout=1)[1], SynthResult) for h in handles)
    assert len(per_step) > 20 and any(audio for _, audio in per_step)
    assert all(reads == 1 + audio for reads, audio in per_step), per_step


@pytest.mark.parametrize("graphs", [False, True])
@pytest.mark.parametrize("rows", [1, 8])
def test_a_prefill_reads_nothing_and_sends_its_inputs_in_two_copies(tiny_pipe, monkeypatch, rows, graphs):
    """However many rows join: no host read, and the prompts and the rows' settings (Rows.put)
    each go to the device in one packed copy (on an H200 a prefill of n rows made 3n+7 blocking
    copies, each a stream synchronize). Graphed, the prompts' copy is into the bucket's static
    buffer (GraphedPrefill, checked on a CPU without capture)."""
    sends: list[int] = []
    packs: list[int] = []

    def counted(real, into):
        def send(device, *tensors):
            into.append(len(tensors))
            return real(device, *tensors)

        return send

    real = step_module.to_device
    for module in (step_module, runner_module):
        monkeypatch.setattr(module, "to_device", counted(real, sends))
    monkeypatch.setattr(graphs_module, "pack", lambda ts, pin: (packs.append(len(ts)), pack(ts, pin))[1])
    engine = Engine(tiny_pipe, EngineConfig(max_batch=8, prefill_wait=0.0, graphs_without_capture=graphs))
    with engine._contexts():
        engine.runner.warm()  # as start() does: every prefill bucket built before a request
    sends.clear(), packs.clear()
    for i, t in enumerate((TEXTS * 4)[:rows]):
        engine.submit(SynthRequest(t, SamplingParams(seed=i)))
    with engine._contexts(), HostReads().watching() as reads:
        engine._admit()
    assert engine.running() == rows
    assert reads.count == 0
    # the rows' packed columns (Rows.put) and positions, then ids, text mask, last positions, slots
    assert (sends, packs) == (([2], [4]) if graphs else ([2, 4], []))
    if graphs:
        assert engine.runner.graphed_prefill.eager_calls == 0
    engine.stop(drain=False)


def test_batched_prefill_equals_one_prompt_at_a_time(tiny_pipe):
    g = tiny_pipe.cfg.gpt
    prompts = [tiny_pipe.prompt([t]) for t in TEXTS]
    lengths = [ids.shape[1] for ids, _, _ in prompts]

    def slots():
        return KVSlots(
            g.num_hidden_layers, 4, g.num_key_value_heads, 64, 16, dtype=torch.float32, device="cpu"
        )

    fwd, embed = SlotForward(tiny_pipe.model.gpt), tiny_pipe.model.embed
    alone_slots, together_slots = slots(), slots()
    with torch.inference_mode():  # the pipeline's prefill (one row at a time) and the engine's
        alone = [Step(embed, fwd, alone_slots).prefill([p], r)[0] for r, p in enumerate(prompts)]
        together = Step(embed, fwd, together_slots).prefill(prompts, 0)
    torch.testing.assert_close(together, torch.stack(alone), atol=1e-5, rtol=1e-5)
    for layer in range(g.num_hidden_layers):
        for r, n in enumerate(lengths):  # the padding's K/V past each prompt is never read
            torch.testing.assert_close(
                together_slots.k[layer][r, :, :n], alone_slots.k[layer][r, :, :n], atol=1e-5, rtol=1e-5
            )
            torch.testing.assert_close(
                together_slots.v[layer][r, :, :n], alone_slots.v[layer][r, :, :n], atol=1e-5, rtol=1e-5
            )


def test_one_audio_call_equals_each_row_decoded_alone(tiny_pipe):
    """First chunks, middle chunks and finals of different lengths in one call: each row's new
    samples are those of decoding its own window alone (the old per-row path)."""
    model = tiny_pipe.model
    audio = BatchedAudio(model, lookahead_steps=4)
    hop = audio.hop
    hidden = torch.randn(5, 200, tiny_pipe.cfg.gpt.hidden_size, generator=torch.Generator().manual_seed(0))
    cases = [
        (0, 24, 0, False),
        (1, 48, 40 * hop, False),
        (2, 130, 210 * hop, False),
        (3, 57, 0, True),
        (4, 190, 330 * hop, True),
    ]
    windows = [audio.window(slot, steps, emitted, final) for slot, steps, emitted, final in cases]
    assert all(windows)
    with torch.inference_mode():
        together = audio.decode(hidden, windows)
        for w, samples in zip(windows, together, strict=True):
            states = hidden[w.slot, w.first : w.steps].T.unsqueeze(0)
            alone = model.vocos(model.decoder(states))[0].numpy()
            base = 2 * w.first * hop
            assert len(samples) == w.end - w.start > 0
            np.testing.assert_allclose(samples, alone[w.start - base : w.end - base], atol=1e-5)


def test_window_skips_what_was_emitted_and_keeps_the_left_context(tiny_pipe):
    audio = BatchedAudio(tiny_pipe.model, lookahead_steps=4)
    first = audio.window(0, 24, 0, final=False)
    assert first == Window(0, 0, 24, 0, (48 - 8) * audio.hop)
    later = audio.window(0, 48, first.end, final=False)
    assert later.start == first.end and 2 * later.first <= first.end // audio.hop - audio.ctx_frames
    assert audio.window(0, 48, later.end, final=False) is None  # nothing new yet
    assert audio.window(0, 0, 0, final=True) is None


@pytest.mark.parametrize("seed", [3, 2**40 + 1])
def test_a_seeded_request_gives_the_pipelines_codes(tiny_pipe, seed):
    """The engine and the one-batch pipeline draw from the same stateless generator, so a seeded,
    sampled (not greedy) request sounds the same through either."""
    engine = Engine(tiny_pipe, EngineConfig(max_batch=4)).start()
    try:
        busy = [engine.submit(SynthRequest(t, SamplingParams(seed=9))) for t in TEXTS[1:]]
        samples, result = engine.submit(SynthRequest(TEXTS[0], SamplingParams(seed=seed))).collect(timeout=60)
        [h.collect(timeout=60) for h in busy]
    finally:
        engine.stop()
    gen = tiny_pipe.generate([TEXTS[0]], SamplingParams(seed=seed))[0]
    assert isinstance(result, SynthResult) and result.steps == gen.steps
    np.testing.assert_allclose(samples, tiny_pipe.vocode(tiny_pipe.mel(gen)), atol=1e-5)
