"""Hidden states -> audio for every row that emits at a step, in one Decoder+Vocos call.

Each row decodes only its new steps plus the left context the convolutions need, never the whole
prefix again (the official streaming re-decodes everything, O(n^2) in the length). Rows of
different window lengths share the call: windows are left-aligned and masked (decoder.py,
vocos.py), so each row's samples are those it would get decoded alone. Windows are grouped by
length (powers of two) so one long final does not pad many short chunks.

Left context covers the receptive field of Decoder + Vocos + the ISTFT overlap, so emitted samples
match a whole-utterance decode on their left side. On the right, an unfinished chunk holds back
`lookahead` frames; the rest of the receptive field is not yet known, so the last samples of a
non-final chunk are an approximation (measured in tests/engine and docs/PERFORMANCE.md). The
final chunk decodes to the end, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ttsperf.model.weights import ChatTTSModel


def context_frames(model: ChatTTSModel) -> int:
    """Mel frames either side that one output sample depends on."""
    decoder = model.decoder.decoder.receptive_half_width + 1  # + out_conv's 3-tap half width
    v = model.cfg.vocos
    vocos = 3 + 3 * v.num_layers + v.n_fft // (2 * v.hop_length)  # embed, blocks, ISTFT overlap
    return decoder + vocos


def _gather(
    source: torch.Tensor, rows: list[int], first: list[int], count: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """count[i] entries of source row rows[i] (source: (S, T, C)) from first[i], left-aligned and
    zero-padded to the longest -> (N, longest, C) and the (N, longest) mask of real entries."""
    device = source.device
    offsets = torch.arange(max(count), device=device)
    real = offsets < torch.tensor(count, device=device).unsqueeze(1)
    index = (torch.tensor(first, device=device).unsqueeze(1) + offsets).clamp(max=source.shape[1] - 1)
    picked = source[torch.tensor(rows, device=device).unsqueeze(1), index]
    return picked * real.unsqueeze(-1), real


@dataclass(frozen=True)
class Window:
    """One row's part of an emission: its slot, hidden steps [first, steps), samples [start, end)."""

    slot: int
    first: int
    steps: int
    start: int
    end: int


class BatchedAudio:
    def __init__(self, model: ChatTTSModel, lookahead_steps: int):
        self.model = model
        self.hop = model.cfg.vocos.hop_length
        self.ctx_frames = context_frames(model)
        self.lookahead_frames = 2 * lookahead_steps
        self.dtype = next(model.decoder.parameters()).dtype

    def window(self, slot: int, steps: int, emitted: int, final: bool) -> Window | None:
        """What a row with `steps` hidden states and `emitted` samples out emits now (None: nothing)."""
        frames = 2 * steps
        end = (frames - 1) * self.hop if final else (frames - self.lookahead_frames) * self.hop
        if steps == 0 or end <= emitted:
            return None
        first = max(0, (emitted // self.hop - self.ctx_frames) // 2)
        return Window(slot, first, steps, emitted, end)

    def decode(self, hidden: torch.Tensor, windows: list[Window]) -> list[np.ndarray]:
        """hidden (slots, steps, H): every row's states. -> each window's new samples, in order."""
        out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(windows)
        groups: dict[int, list[int]] = {}
        for i, w in enumerate(windows):
            groups.setdefault(max(1, w.steps - w.first - 1).bit_length(), []).append(i)
        for members in groups.values():
            for i, samples in zip(members, self._decode([windows[i] for i in members], hidden), strict=True):
                out[i] = samples
        return out

    def _decode(self, windows: list[Window], hidden: torch.Tensor) -> list[np.ndarray]:
        hop = self.hop
        n = self.model.cfg.vocos.n_fft
        slots = [w.slot for w in windows]
        states, real = _gather(
            hidden, slots, [w.first for w in windows], [w.steps - w.first for w in windows]
        )
        frames = real.repeat_interleave(2, dim=1).unsqueeze(1).to(self.dtype)
        mel = self.model.decoder(states.transpose(1, 2).to(self.dtype), frames)
        features = self.model.vocos.backbone(mel, frames)  # (N, 2T, dim)
        # The ISTFT runs only on the frames that reach the new samples [start, end): frame f
        # covers window samples [f hop - n/2, f hop + n/2). Left context frames served the convs.
        base = [2 * w.first * hop for w in windows]  # window sample 0 is the row's global sample base
        lo = [max(0, (w.start - b - n // 2) // hop + 1) for w, b in zip(windows, base, strict=True)]
        hi = [
            min(2 * (w.steps - w.first), (w.end - 1 - b + n // 2) // hop + 1)
            for w, b in zip(windows, base, strict=True)
        ]
        counts = [h - low for h, low in zip(hi, lo, strict=True)]
        sub, present = _gather(features, list(range(len(windows))), lo, counts)
        head = self.model.vocos.head
        wav = (
            head.istft.overlap_add(head.spectrum(sub), present).detach().cpu().numpy()
        )  # the one copy off the device
        # untrimmed sample u of row r is window sample u - n/2 + lo[r] hop
        out = []
        for r, w in enumerate(windows):
            u0 = w.start - base[r] + n // 2 - lo[r] * hop
            out.append(wav[r, u0 : u0 + w.end - w.start])
        return out


class AudioDecoder:
    """One sequence's audio so far, for callers that hold one row's states as a list (profile)."""

    def __init__(self, model: ChatTTSModel, lookahead_steps: int):
        self.batched = BatchedAudio(model, lookahead_steps)
        self.ctx_frames, self.hop = self.batched.ctx_frames, self.batched.hop
        self.emitted = 0  # global samples already handed out

    def emit(self, hidden: list[torch.Tensor], final: bool) -> np.ndarray:
        window = self.batched.window(0, len(hidden), self.emitted, final)
        if window is None:
            return np.zeros(0, dtype=np.float32)
        samples = self.batched.decode(torch.stack(hidden).unsqueeze(0), [window])[0]
        self.emitted = window.end
        return samples
