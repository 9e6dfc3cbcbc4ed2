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

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ttsperf.model.transfer import to_device
from ttsperf.model.weights import ChatTTSModel

# ATen's CPU convolution uses mkldnn from this many rows on (1x1 kernels, one thread), and at one
# row past this many input elements (aten/src/ATen/native/Convolution.cpp, use_mkldnn): a
# compiled call guards on the choice (BatchedAudio.compile_shapes)
_MKLDNN_BATCH = 16
_MKLDNN_NUMEL = 20480


def context_frames(model: ChatTTSModel) -> int:
    """Mel frames either side that one output sample depends on."""
    decoder = model.decoder.decoder.receptive_half_width + 1  # + out_conv's 3-tap half width
    v = model.cfg.vocos
    vocos = 3 + 3 * v.num_layers + v.n_fft // (2 * v.hop_length)  # embed, blocks, ISTFT overlap
    return decoder + vocos


def _gather(
    source: torch.Tensor, rows: torch.Tensor, first: torch.Tensor, count: torch.Tensor, longest: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """count[i] entries of source row rows[i] (source: (S, T, C)) from first[i], left-aligned and
    zero-padded to `longest` -> (N, longest, C) and the (N, longest) mask of real entries."""
    offsets = torch.arange(longest, device=source.device)
    real = offsets < count.unsqueeze(1)
    index = (first.unsqueeze(1) + offsets).clamp(max=source.shape[1] - 1)
    picked = source[rows.unsqueeze(1), index]
    # where, not a product: an entry past a row's window may be one a running step is writing
    return torch.where(real.unsqueeze(-1), picked, 0.0), real


def pcm16(wav: torch.Tensor) -> torch.Tensor:
    """ttsperf.audio.to_pcm16 on the call's device: the same float32 clip, scale and round (half to
    even in both), so the bytes are the same; the host gets half the bytes and converts nothing."""
    return (wav.float().clamp(-1.0, 1.0) * 32767.0).round().to(torch.int16)


# BatchedAudio.synthesize, or synthesize_pcm (BatchedAudio.device_part)
SynthFn = Callable[[torch.Tensor, torch.Tensor, int, int], torch.Tensor]


@dataclass(frozen=True)
class CallPlan:
    """One call's rows, as the host works them out (lists, one entry per row)."""

    slots: list[int]
    first: list[int]  # first hidden step decoded (left context included)
    count: list[int]  # hidden steps decoded
    lo: list[int]  # first ISTFT frame
    frames: list[int]  # ISTFT frames
    starts: list[int]  # where the new samples start in the row's untrimmed output
    lengths: list[int]  # new samples


@dataclass(frozen=True)
class Window:
    """One row's part of an emission: its slot, hidden steps [first, steps), samples [start, end)."""

    slot: int
    first: int
    steps: int
    start: int
    end: int


class BatchedAudio:
    """The engine's audio call. Its device part (`device_part`) is `synthesize`, or with `pcm`
    `synthesize_pcm`: 16-bit PCM made on the device. `compile`: that part is
    torch.compile(dynamic=True), rows, steps and frames symbolic (a few graphs: compile_shapes);
    `cuda_graphs`: it is replayed from CUDA graphs per (rows, steps, frames) bucket (graphs.py
    GraphedAudio), and not compiled."""

    def __init__(
        self, model: ChatTTSModel, lookahead_steps: int, *, compile: bool = False, pcm: bool = False
    ):
        self.model = model
        self.hop = model.cfg.vocos.hop_length
        self.ctx_frames = context_frames(model)
        self.lookahead_frames = 2 * lookahead_steps
        self.dtype = next(model.decoder.parameters()).dtype
        self.pcm = pcm
        self.device_part: SynthFn = self.synthesize_pcm if pcm else self.synthesize
        self.call: SynthFn = self.device_part
        self.compiled = compile
        if compile:
            self.call = torch.compile(self.device_part, dynamic=True)

    def compile_now(self, hidden: torch.Tensor, report: dict) -> None:
        """Compile at start, not inside a request: every graph a call over the engine's own
        `hidden` (slots, steps, H) can need (`compile_shapes`). If compiling fails, or would take
        more graphs than dynamo keeps for one function, the call runs eagerly and the report
        says why."""
        if self.compiled and not report.get("applied", True):  # the step's compile failed: none
            self.call, self.compiled = self.device_part, False
        if not self.compiled:
            return
        try:
            t0 = time.perf_counter()
            shapes = self.compile_shapes(hidden)
            # past dynamo's limit a call would run eagerly, unreported: an error here says so
            with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
                for rows, steps in shapes:
                    self.decode(hidden, [Window(r, 0, steps, 0, self.hop) for r in range(rows)])
            took = time.perf_counter() - t0
            report["note"] += f"; audio call compiled in {took:.1f} s ({len(shapes)} shapes)"
        except Exception as exc:  # noqa: BLE001 - any failure of the compiler stack
            self.call, self.compiled = self.device_part, False
            why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
            report["note"] += f"; audio call not compiled, runs eagerly: {why}"

    def compile_shapes(self, hidden: torch.Tensor) -> list[tuple[int, int]]:
        """(rows, steps) of calls that between them compile every graph a call of up to
        hidden.shape[0] rows and hidden.shape[1] steps takes on a CPU. Rows and steps are
        symbolic, but a graph guards on each conv's backend, which ATen picks by the input's size
        (`use_mkldnn`): one row or more (and with one torch thread, 16 rows or more); and at one
        row, whether the conv's input has more than `_MKLDNN_NUMEL` elements. The one-row calls
        at each conv's threshold are cheap; a call's steps and frames are at least 2 (`inputs`),
        since 1 would be a graph of its own."""
        slots, longest = hidden.shape[:2]
        shapes = [(rows, 2) for rows in (1, 2, _MKLDNN_BATCH) if rows <= slots]
        past = sorted({s for s in self._one_row_thresholds(hidden) if 2 < s <= longest})
        return shapes + [(1, s) for s in past]

    def _one_row_thresholds(self, hidden: torch.Tensor) -> list[int]:
        """For each conv of the call, the fewest steps at which its input at one row has more
        than `_MKLDNN_NUMEL` elements: its length is a multiple of the steps, so two eager calls
        (4 and 8 steps) give it."""
        convs = [m for part in (self.model.decoder, self.model.vocos) for m in part.modules()]
        convs = [m for m in convs if isinstance(m, torch.nn.modules.conv._ConvNd)]
        seen: dict[int, list[int]] = {id(m): [] for m in convs}
        hooks = [
            conv.register_forward_pre_hook(lambda module, args: seen[id(module)].append(args[0].numel()))
            for conv in convs
        ]
        try:
            for steps in (4, 8):
                _, args = self.inputs([Window(0, 0, steps, 0, self.hop)], hidden[:1, :steps])
                self.device_part(*args)
        finally:
            for hook in hooks:
                hook.remove()
        out = []
        for sizes in seen.values():
            if len(sizes) != 2:  # not in the call (or called twice a call: none is)
                continue
            at4, at8 = sizes
            if at8 > at4:  # the smallest steps with at4 + (at8 - at4) (steps - 4) / 4 > _MKLDNN_NUMEL
                out.append(4 + (_MKLDNN_NUMEL - at4) * 4 // (at8 - at4) + 1)
        return out

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
        return self.launch(hidden, windows).samples()

    def launch(self, hidden: torch.Tensor, windows: list[Window]) -> Decoding:
        """Queue the call (one per length group) on the current stream and its samples' copy to
        the host; nothing waits for the device (CUDA: the copy goes to pinned memory)."""
        cuda = hidden.device.type == "cuda" and bool(windows)  # no call: nothing to wait for
        start = _recorded() if cuda else None
        t0 = time.perf_counter()
        groups: dict[int, list[int]] = {}
        for i, w in enumerate(windows):
            groups.setdefault(max(1, w.steps - w.first - 1).bit_length(), []).append(i)
        parts = []
        for members in groups.values():
            p, args = self.inputs([windows[i] for i in members], hidden)
            wav = self.call(*args).detach()
            if cuda:  # its own host buffer: the static output of a graph is the next call's too
                host = torch.empty(wav.shape, dtype=wav.dtype, pin_memory=True)
                wav = host.copy_(wav, non_blocking=True)
            parts.append((members, p, wav))
        done = _recorded() if cuda else None
        return Decoding(len(windows), parts, start, done, time.perf_counter() - t0, self.pcm)

    def plan(self, windows: list[Window]) -> CallPlan:
        """The host's part of a call: which steps each row decodes and which frames reach its samples."""
        hop, n = self.hop, self.model.cfg.vocos.n_fft
        base = [2 * w.first * hop for w in windows]  # window sample 0 is the row's global sample base
        # The ISTFT runs only on the frames that reach the new samples [start, end): frame f
        # covers window samples [f hop - n/2, f hop + n/2). Left context frames served the convs.
        lo = [max(0, (w.start - b - n // 2) // hop + 1) for w, b in zip(windows, base, strict=True)]
        hi = [
            min(2 * (w.steps - w.first), (w.end - 1 - b + n // 2) // hop + 1)
            for w, b in zip(windows, base, strict=True)
        ]
        # untrimmed sample u of row r is window sample u - n/2 + lo[r] hop
        starts = [w.start - b + n // 2 - low * hop for w, b, low in zip(windows, base, lo, strict=True)]
        return CallPlan(
            slots=[w.slot for w in windows], first=[w.first for w in windows],
            count=[w.steps - w.first for w in windows], lo=lo,
            frames=[h - low for h, low in zip(hi, lo, strict=True)], starts=starts,
            lengths=[w.end - w.start for w in windows],
        )  # fmt: skip

    def synthesize(self, hidden: torch.Tensor, index: torch.Tensor, steps: int, frames: int) -> torch.Tensor:
        """The device's part of a call, no host read: index (5, N) = each row's slot, first step,
        step count, first frame, frame count; `steps`, `frames` the longest of each
        -> untrimmed samples (N, n_fft + hop (frames - 1))."""
        slots, first, count, lo, nframes = index
        states, real = _gather(hidden, slots, first, count, steps)
        mask = real.repeat_interleave(2, dim=1).unsqueeze(1).to(self.dtype)
        mel = self.model.decoder(states.transpose(1, 2).to(self.dtype), mask)
        features = self.model.vocos.backbone(mel, mask)  # (N, 2T, dim)
        rows = torch.arange(index.shape[1], device=index.device)
        sub, present = _gather(features, rows, lo, nframes, frames)
        head = self.model.vocos.head
        return head.istft.overlap_add(head.spectrum(sub), present)

    def synthesize_pcm(
        self, hidden: torch.Tensor, index: torch.Tensor, steps: int, frames: int
    ) -> torch.Tensor:
        """`synthesize` as 16-bit PCM, in the same graph (compiled, captured)."""
        return pcm16(self.synthesize(hidden, index, steps, frames))

    def inputs(self, windows: list[Window], hidden: torch.Tensor) -> tuple[CallPlan, tuple]:
        """The call's plan and `synthesize`'s arguments (the index copied to the device in a copy
        that does not wait for it)."""
        p = self.plan(windows)
        # through NumPy: torch.tensor reads nested lists element by element, 3x as long here
        rows = np.array([p.slots, p.first, p.count, p.lo, p.frames], dtype=np.int64)
        (index,) = to_device(hidden.device, torch.from_numpy(rows))
        steps, frames = max(p.count), max(p.frames)
        if self.compiled:  # the padding is masked; at 1 a compiled call would take a graph of its own
            steps, frames = max(2, steps), max(2, frames)
        return p, (hidden, index, steps, frames)


def _recorded() -> torch.cuda.Event:
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


class Decoding:
    """An audio call on its way: `samples()` waits for it (CUDA: its copy's event, not the
    device) -> each window's new samples, in order (float, or int16 PCM where the call made it);
    `seconds`: the call's time (CUDA: on the device, between events around it, once waited for;
    a CPU: its launch, which computed it)."""

    def __init__(
        self,
        count: int,
        parts: list[tuple[list[int], CallPlan, torch.Tensor]],
        start: torch.cuda.Event | None,
        done: torch.cuda.Event | None,
        seconds: float,
        pcm: bool = False,
    ):
        self.count, self.parts, self.start, self.done, self.seconds = count, parts, start, done, seconds
        self.pcm = pcm

    def samples(self) -> list[np.ndarray]:
        if self.done is not None and self.start is not None:
            self.done.synchronize()
            self.seconds = self.start.elapsed_time(self.done) / 1e3
        out: list[np.ndarray] = [np.zeros(0, np.int16 if self.pcm else np.float32)] * self.count
        for members, p, wav in self.parts:
            host = wav.cpu().numpy()  # on the host already (CUDA: pinned, copied)
            # chunks a consumer keeps must not hold pinned memory (PCM becomes bytes at once)
            pinned = wav.is_pinned() and not self.pcm
            for r, (u0, n) in enumerate(zip(p.starts, p.lengths, strict=True)):
                part = host[r, u0 : u0 + n]
                out[members[r]] = part.copy() if pinned else part
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
