"""Hidden states -> audio, incrementally: each chunk decodes only its new steps plus the left
context the convolutions need, never the whole prefix again (the official streaming re-decodes
everything, O(n^2) in the length).

Left context covers the receptive field of Decoder + Vocos + the ISTFT overlap, so emitted samples
match a whole-utterance decode on their left side. On the right, an unfinished chunk holds back
`lookahead` frames; the rest of the receptive field is not yet known, so the last samples of a
non-final chunk are an approximation (measured in tests/engine and docs/PERFORMANCE.md). The
final chunk decodes to the end, exactly.
"""

from __future__ import annotations

import numpy as np
import torch

from ttsperf.model.weights import ChatTTSModel


def context_frames(model: ChatTTSModel) -> int:
    """Mel frames either side that one output sample depends on."""
    decoder = model.decoder.decoder.receptive_half_width + 1  # + out_conv's 3-tap half width
    v = model.cfg.vocos
    vocos = 3 + 3 * v.num_layers + v.n_fft // (2 * v.hop_length)  # embed, blocks, ISTFT overlap
    return decoder + vocos


class AudioDecoder:
    """One sequence's audio so far; `emit` returns only the samples not emitted before."""

    def __init__(self, model: ChatTTSModel, lookahead_steps: int):
        self.model = model
        self.hop = model.cfg.vocos.hop_length
        self.ctx_frames = context_frames(model)
        self.lookahead_frames = 2 * lookahead_steps
        self.emitted = 0  # global samples already handed out
        self.dtype = next(model.decoder.parameters()).dtype

    def emit(self, hidden: list[torch.Tensor], final: bool) -> np.ndarray:
        steps = len(hidden)
        frames = 2 * steps
        if steps == 0:
            return np.zeros(0, dtype=np.float32)
        end = (frames - 1) * self.hop if final else (frames - self.lookahead_frames) * self.hop
        if end <= self.emitted:
            return np.zeros(0, dtype=np.float32)
        first_step = max(0, (self.emitted // self.hop - self.ctx_frames) // 2)
        states = torch.stack(hidden[first_step:]).T.unsqueeze(0).to(self.dtype)
        wav = self.model.vocos(self.model.decoder(states)).float()[0]
        base = 2 * first_step * self.hop  # global index of wav[0]
        out = wav[self.emitted - base : end - base].cpu().numpy()
        self.emitted = end
        return out
