"""The skeleton config runs chattts's op graph: the same aten ops, names and counts, per part.

Shapes differ (that is the point); the op sequence must not, or the host seconds `profile --host`
times on the skeleton would be another model's. chattts runs on the meta device (no compute) in the
fast tests and on real CPU tensors in the slow one.
"""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

from ttsperf.model.config import CHATTTS, SKELETON
from ttsperf.profile import host as H
from ttsperf.profile.kernels import count_ops


def _step_ops(r, b: int):
    r.state.truncate(0)
    r.prefill(H.admissions(b))
    return count_ops(lambda: r.run_step(*H.step_args(r))).ops


def test_skeleton_keeps_every_count_of_chattts_and_shrinks_every_width():
    for part in ("gpt", "decoder", "dvae_decoder", "dvae_encoder", "vq", "vocos"):
        mine, theirs = getattr(SKELETON, part), getattr(CHATTTS, part)
        for f in fields(mine):
            a, b = getattr(mine, f.name), getattr(theirs, f.name)
            width = f.name in ("hidden_size", "intermediate_size", "idim", "odim", "hidden", "bn_dim", "dim")
            width = width or (part == "vocos" and f.name == "intermediate_dim")
            assert (a < b) if width else (a == b), (part, f.name, a, b)
    assert (SKELETON.sample_rate, SKELETON.mel_frames_per_step) == (
        CHATTTS.sample_rate,
        CHATTTS.mel_frames_per_step,
    )


@torch.inference_mode()
def test_decode_step_runs_chattts_ops_on_the_skeleton():
    skeleton, chattts = H.runner(SKELETON, "cpu", max_batch=4), H.runner(CHATTTS, "meta", max_batch=4)
    for b in (1, 3):
        mine, theirs = _step_ops(skeleton, b), _step_ops(chattts, b)
        assert mine == theirs, set(mine.items()) ^ set(theirs.items())
        assert sum(mine.values()) > 500  # 20 layers of ops, not an empty count


@torch.inference_mode()
def test_prefill_and_audio_call_run_chattts_ops_on_the_skeleton():
    skeleton, chattts = H.runner(SKELETON, "meta", max_batch=4), H.runner(CHATTTS, "meta", max_batch=4)
    for r in (skeleton, chattts):
        r.state.truncate(0)
    prefill = [count_ops(lambda r=r: r.prefill(H.admissions(3))).ops for r in (skeleton, chattts)]
    assert prefill[0] == prefill[1]
    audio = []
    for r in (skeleton, chattts):
        _, args = r.audio.inputs(H.audio_windows(r.audio, 3), r.state.hidden)
        audio.append(count_ops(lambda r=r, args=args: r.audio.synthesize(*args)).ops)
    assert audio[0] == audio[1]
    assert audio[0]["conv1d.default"] >= 12 + 8  # every Decoder and Vocos layer is there


@pytest.mark.slow
@torch.inference_mode()
def test_decode_step_ops_equal_chattts_on_real_cpu_tensors():
    """The same check with chattts's 0.28 B random weights on the CPU: the meta device dispatches
    as a real device does."""
    skeleton, chattts = H.runner(SKELETON, "cpu", max_batch=2), H.runner(CHATTTS, "cpu", max_batch=2)
    assert _step_ops(skeleton, 2) == _step_ops(chattts, 2)
