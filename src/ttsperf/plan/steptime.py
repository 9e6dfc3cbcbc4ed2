"""Step-time model: how long one engine decode step, one prefill and one vocoder call take.

    t(B, L) = t_fixed + max(bytes(B, L) / (BW x MBU), flops(B, L) / (peak x MFU))

bytes and flops come from the architecture (ttsperf.facts); t_fixed, 1/(BW x MBU) and
1/(peak x MFU) are either fitted to a profile's measured step times (least squares) or documented
defaults. `L` enters as the sum of the contexts of the rows in the batch, so rows of different
ages cost what they really read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ttsperf import facts as F
from ttsperf.errors import UserError
from ttsperf.plan.schema import Basis

# --- Defaults: assumptions, each with its source (repeated in docs/PLANNING.md). ---
# docs/reference/chattts.md [quote]: stock eager ChatTTS at batch 1 spends >90% of a step in fixed
# per-step overhead, 6-14 ms observed on an RTX 4090 against a ~0.4 ms bandwidth floor. We take
# the middle of that range, and the same for every card: the overhead is host-side (Python,
# kernel launches, sampling), so it follows the host, not the GPU.
DEFAULT_T_FIXED_S = 0.010
DEFAULT_T_FIXED_SOURCE = (
    "quote: 6-14 ms/step at batch 1 on an RTX 4090, stock eager (docs/reference/chattts.md); midpoint"
)


class Span(NamedTuple):
    """A fixed cost's planned figure and the ends of the range it is sourced over, s."""

    centre: float
    low: float
    high: float


# The engine settings ttsperf serve offers (the flag that selects each). What each costs per step
# comes from a host profile (plan/overhead.py): measured host work and counted kernels.
MODE_FLAGS = {"eager": "", "compile": "--compile", "cuda-graphs": "--cuda-graphs"}
GRAPHS_MAX_BATCH = 256  # GraphedStep captures up to 256 rows (engine/graphs.py); beyond, eager steps


@dataclass(frozen=True)
class Mode:
    name: str  # as plan prints it
    flag: str  # the `ttsperf serve` flag that selects it ("" = the default, eager)
    t_fixed: float  # planned per-step overhead, s
    low: float  # the range that overhead is sourced over, s
    high: float
    source: str
    max_batch: int | None = None  # rows this mode covers (beyond them the engine steps eagerly)
    audio: Span | None = None  # one Decoder+Vocos call's fixed cost in this mode (None: as the step's)


# The engine's host work per row per step (NumPy bookkeeping over the batch, Python only for rows
# an event touches): what remains of ttsperf's engine step on tiny (whose model work is small)
# once the model forward, the sampling pass and the audio calls are taken out. It is ~1-2 ms per
# step whatever the batch (eager dispatch: t_fixed's part on a GPU) and, per row, below the
# benchmark's resolution: 7.1 and -5.5 us per row per step at batch 256 in two runs
# (benchmarks/engine_overhead.py, docs/PERFORMANCE.md). The larger reading stands until a
# profile of the card (host_per_row_step_s) replaces it.
DEFAULT_T_ROW_S = 7e-6
DEFAULT_T_ROW_SOURCE = (
    "measured: host share of ttsperf's engine step per row on tiny at batch 256, the larger of two "
    "runs' readings (7.1 and -5.5 us; benchmarks/engine_overhead.py, docs/PERFORMANCE.md)"
)
# Model bandwidth utilisation: serving stacks reach ~60-85% of peak bandwidth in decode
# (rule of thumb, open-source-ai.tech glossary "model bandwidth utilization"); an eager PyTorch
# engine sits at the low end.
# The server's hand-off of one streamed chunk: its event loop (one thread) frames it and writes it
# to the socket, one chunk after another, so the k-th chunk of a step's emission leaves k
# hand-offs after the audio call returns. Measured as the CPU seconds of `ttsperf serve`'s event
# loop thread per chunk sent (its per-request work included, 8 chunks per request): 0.26-0.53 ms
# at the ten points of two runs of benchmarks/plan_accuracy.py on tiny (docs/VALIDATION.md).
# benchmarks/loop_cost.py splits that work: 1.10 ms per request, charged at its intake (before
# the engine can queue it), and 0.30 ms per chunk (docs/PERFORMANCE.md, "The event loop's work").
DEFAULT_T_CHUNK_S = 0.30e-3
DEFAULT_T_REQUEST_S = 1.10e-3
_LOOP_COST = (
    "a least-squares split of ttsperf serve's event-loop CPU over six runs of few- and many-chunk "
    "replies on a 2-vCPU EPYC (benchmarks/loop_cost.py, docs/PERFORMANCE.md)"
)
DEFAULT_T_CHUNK_SOURCE = "measured: " + _LOOP_COST
DEFAULT_T_REQUEST_SOURCE = "measured: " + _LOOP_COST
# The scheduler's own host work per step, beyond the runner's step that a host profile times
# (admission, emission, the row table): measured by `ttsperf profile` as host_per_step_s on tiny.
DEFAULT_T_HOST_S = 0.37e-3
DEFAULT_T_HOST_SOURCE = (
    "measured: the engine's host work per step beyond the bare step, host_per_step_s of a tiny "
    "profile on a 2-vCPU EPYC (docs/VALIDATION.md)"
)
DEFAULT_MBU = 0.60
DEFAULT_MBU_SOURCE = "assumption: low end of the 60-85% MBU rule of thumb for decode"
# No published figure for ChatTTS; decode is bandwidth-bound on every catalog card at the batch
# sizes that fit, so this mostly shapes prefill.
DEFAULT_MFU = 0.50
DEFAULT_MFU_SOURCE = "assumption: no published ChatTTS figure; matters for prefill, rarely for decode"
# Decoder + Vocos: both run at 93.75 mel frames/s; each frame meets every weight about once.
VOCODER_PARAMS = F.PARAMS["decoder"] + F.PARAMS["vocos"]
VOCODER_FLOPS_PER_AUDIO_SECOND = 2 * VOCODER_PARAMS * 2 * F.STEPS_PER_AUDIO_SECOND


def decode_bytes(batch, sum_context, dtype: str, kv_per_token: float):
    """Bytes one decode step moves: every decode weight once, every cached K/V read, one written."""
    b = F.BYTES_PER_DTYPE[dtype]
    return F.DECODE_WEIGHT_PARAMS * b + kv_per_token * (np.asarray(sum_context) + np.asarray(batch))


def decode_flops(batch, sum_context):
    """2 flops per weight per row, plus QK^T and AV over each row's context (2 x 2 x hidden per token)."""
    return 2.0 * F.DECODE_WEIGHT_PARAMS * np.asarray(batch) + 4.0 * F.LAYERS * F.HIDDEN * np.asarray(
        sum_context
    )


def prefill_bytes(prompt: int, dtype: str, kv_per_token: float) -> float:
    return F.DECODE_WEIGHT_PARAMS * F.BYTES_PER_DTYPE[dtype] + kv_per_token * prompt


def prefill_flops(prompt: int) -> float:
    # causal attention: each token attends to half the prompt on average
    return 2.0 * F.DECODE_WEIGHT_PARAMS * prompt + 2.0 * F.LAYERS * F.HIDDEN * prompt * prompt


@dataclass
class Correction:
    """measured / fitted-roofline step time at a profile's (batch, context) grid, interpolated.

    On the device a profile measured, the roofline's shape can miss what really happens (on CPU,
    caches and the attention kernel make long contexts cost more than their bytes): multiplying by
    this factor makes the model return the measured time at every measured point, interpolate
    between them (linearly in log batch and log context) and keep the nearest edge's factor
    outside the measured range.
    """

    log_b: np.ndarray  # sorted log batch values
    log_l: np.ndarray  # sorted log context values
    factor: np.ndarray  # (len(log_b), len(log_l))

    def __call__(self, batch: float, mean_context: float) -> float:
        lb, ll = math.log(max(batch, 1.0)), math.log(max(mean_context, 1.0))
        col = [np.interp(ll, self.log_l, row) for row in self.factor]
        return float(np.interp(lb, self.log_b, col))

    @classmethod
    def from_points(cls, points: list[tuple[int, int, float]], model: StepModel) -> Correction:
        bs = sorted({p[0] for p in points})
        ls = sorted({p[1] for p in points})
        sums = np.zeros((len(bs), len(ls)))
        counts = np.zeros((len(bs), len(ls)))
        for b, c, t in points:
            i, j = bs.index(b), ls.index(c)
            sums[i, j] += t / float(model.roofline(b, b * c))
            counts[i, j] += 1
        # a (batch, context) pair the profile did not measure keeps the roofline (factor 1)
        factor = np.where(counts > 0, sums / np.maximum(counts, 1), 1.0)
        return cls(np.log(np.array(bs, float)), np.log(np.array(ls, float)), factor)


def _interpolate(points: list[tuple[int, float]], x: float) -> float:
    """Measured (x, seconds) points, linear between them, the last measured slope beyond them
    (np.interp would clamp); one point: proportional."""
    xs, ts = zip(*sorted(points), strict=True)
    if len(xs) == 1:
        return float(ts[0]) * x / xs[0]
    if x > xs[-1]:  # a noisy pair can slope down: never below flat
        slope = max(0.0, (ts[-1] - ts[-2]) / (xs[-1] - xs[-2]))
        return float(ts[-1] + slope * (x - xs[-1]))
    return float(np.interp(x, xs, ts))


@dataclass
class StepModel:
    """Seconds per step on one device. inv_bw = 1/(BW x MBU) s/B; inv_flops = 1/(peak x MFU) s/flop."""

    dtype: str
    kv_per_token: float
    t_fixed: float
    inv_bw: float
    inv_flops: float
    basis: dict[str, Basis] = field(default_factory=dict)  # parameter -> where its value comes from
    prefill_points: list[tuple[int, float]] = field(default_factory=list)  # measured (P, s)
    vocoder_s_per_audio_s: float | None = None  # measured on this card
    vocoder_call_s: float | None = None  # one streamed chunk's call, measured on this card
    audio_points: list[tuple[int, float]] = field(default_factory=list)  # measured (rows, s) per call
    vocoder_fixed: float | None = None  # a call's launch cost; None = t_fixed (assumption)
    # The batched prefill's host work per (rows admitted, seconds), from a host profile: it runs
    # eagerly in every mode, so its fixed cost is not the step's (empty: t_fixed, an assumption).
    prefill_host: list[tuple[int, float]] = field(default_factory=list)
    correction: Correction | None = None  # measured/roofline on this card's profile grid
    # The engine's host work per row per step (NumPy bookkeeping; engine/engine.py), added by
    # the simulator for ttsperf's engine on top of t(B, L); not part of the device's roofline.
    t_row: float = 0.0
    # The engine's host work per step whatever its rows, beyond the bare decode step a profile's
    # grid times (the batch state's ops, the scheduler): measured by a profile; on a card planned
    # from defaults it is part of t_fixed, the quote for a whole eager step.
    t_host: float = 0.0
    # The server's hand-off per streamed chunk (its event loop), and whether it runs on the
    # engine's own CPU (a profiled CPU device: the engine waits while it runs) or beside it (a
    # GPU's host: only the chunks wait).
    t_chunk: float = DEFAULT_T_CHUNK_S
    chunk_serial: bool = False
    # The same event loop's work per request received (HTTP, validation, the tokenizer), before
    # the engine can queue it.
    t_request: float = DEFAULT_T_REQUEST_S

    def roofline(self, batch, sum_context):
        """t_fixed + max(bytes/(BW MBU), flops/(peak MFU)) for `batch` rows holding `sum_context` tokens."""
        mem = decode_bytes(batch, sum_context, self.dtype, self.kv_per_token) * self.inv_bw
        comp = decode_flops(batch, sum_context) * self.inv_flops
        return self.t_fixed + np.maximum(mem, comp)

    def factor(self, batch: float, sum_context: float) -> float:
        return 1.0 if self.correction is None else self.correction(batch, sum_context / max(batch, 1))

    def step(self, batch, sum_context):
        """Seconds for one decode step (vectorised over sum_context): the roofline x the correction."""
        t = self.roofline(batch, sum_context)
        if self.correction is None:
            return t
        return t * np.vectorize(lambda s: self.factor(batch, s))(sum_context)

    def coefficients(self) -> tuple[float, float, float, float, float]:
        """t = c0 + max(c1 + c2 x (sum_context + B), c3 x B + c4 x sum_context): roofline() unrolled,
        for the simulator's scalar fast path (which applies the correction per run of steps)."""
        b = F.BYTES_PER_DTYPE[self.dtype]
        return (
            self.t_fixed,
            F.DECODE_WEIGHT_PARAMS * b * self.inv_bw,
            self.kv_per_token * self.inv_bw,
            2.0 * F.DECODE_WEIGHT_PARAMS * self.inv_flops,
            4.0 * F.LAYERS * F.HIDDEN * self.inv_flops,
        )

    def prefill(self, prompt: int, n: int = 1) -> float:
        """One prefill call over `n` prompts of `prompt` tokens each (admitted together).

        Measured points (one prompt of P tokens) are interpolated at n x P tokens: a batched
        prefill processes that many tokens in one call.
        """
        if self.prefill_points:
            return _interpolate(self.prefill_points, n * prompt)
        mem = prefill_bytes(prompt * n, self.dtype, self.kv_per_token) * self.inv_bw
        comp = n * prefill_flops(prompt) * self.inv_flops
        fixed = _interpolate(self.prefill_host, n) if self.prefill_host else self.t_fixed
        return fixed + max(mem, comp)

    def vocoder(self, audio_seconds: float, rows: int = 1) -> float:
        """One Decoder+Vocos call over `audio_seconds` of new audio, `rows` rows' chunks in it.

        Measured calls when the profile has them for this card: the engine's batched call vs rows
        (interpolated, the last slope beyond), or one row's chunk (then a call of n rows costs n
        of them: an upper bound, batching only amortises), or a rate per audio second; else the
        same roofline shape as a step: a fixed launch cost (vocoder_fixed, assumed equal to
        t_fixed unless set: 12 + 8 conv blocks launch kernels like 20 transformer layers do)
        plus the convolutions' weight reads or flops.
        """
        if audio_seconds <= 0:
            return 0.0
        if self.audio_points:
            return _interpolate(self.audio_points, rows)
        if self.vocoder_call_s is not None:  # one row's chunk measured: the launch cost dominates it
            return self.vocoder_call_s * rows
        if self.vocoder_s_per_audio_s is not None:
            return self.vocoder_s_per_audio_s * audio_seconds
        b = F.BYTES_PER_DTYPE[self.dtype]
        mem = VOCODER_PARAMS * b * self.inv_bw
        comp = VOCODER_FLOPS_PER_AUDIO_SECOND * audio_seconds * self.inv_flops
        fixed = self.t_fixed if self.vocoder_fixed is None else self.vocoder_fixed
        return fixed + max(mem, comp)


ROOFLINE_HOW = {
    "prefill": "per call of n prompts of P tokens: fixed + max(bytes/(BW MBU), flops/(peak MFU)) over "
    "n x P tokens; fixed = the host profile's batched prefill at n rows (eager in every mode, its ops "
    "priced as step.t_fixed says), "
    "else t_fixed (an assumption)",
    "vocoder": "per call: fixed + max(Decoder+Vocos weights/(BW x MBU), "
    "2 x params x 93.75 frames/s x audio s/(peak x MFU)); fixed = the engine mode's, from the host "
    "profile (step.t_fixed says how), else t_fixed (an assumption)",
}


def roofline_bases() -> dict[str, Basis]:
    """The prefill's and the vocoder's formulas: computed here (projected) until a profile measures them."""
    return {k: Basis.projected(v) for k, v in ROOFLINE_HOW.items()}


def default_model(dtype: str, kv_per_token: float, bandwidth_gbs: float, peak_tflops: float) -> StepModel:
    return StepModel(
        dtype=dtype,
        kv_per_token=kv_per_token,
        t_fixed=DEFAULT_T_FIXED_S,
        inv_bw=1.0 / (bandwidth_gbs * 1e9 * DEFAULT_MBU),
        inv_flops=1.0 / (peak_tflops * 1e12 * DEFAULT_MFU),
        t_row=DEFAULT_T_ROW_S,
        t_host=DEFAULT_T_HOST_S,
        basis={
            "t_fixed": Basis.sourced(DEFAULT_T_FIXED_SOURCE),
            "t_row": Basis.sourced(f"{DEFAULT_T_ROW_S * 1e6:g} us, {DEFAULT_T_ROW_SOURCE}"),
            "t_host": Basis.sourced(f"{DEFAULT_T_HOST_S * 1e3:g} ms per step, {DEFAULT_T_HOST_SOURCE}"),
            "t_chunk": Basis.sourced(
                f"{DEFAULT_T_CHUNK_S * 1e3:g} ms per chunk, beside the engine, " + DEFAULT_T_CHUNK_SOURCE
            ),
            "t_request": Basis.sourced(
                f"{DEFAULT_T_REQUEST_S * 1e3:g} ms per request taken in, beside the engine, "
                + DEFAULT_T_REQUEST_SOURCE
            ),
            "mbu": Basis.sourced(f"{DEFAULT_MBU:.2f} ({DEFAULT_MBU_SOURCE})"),
            "mfu": Basis.sourced(f"{DEFAULT_MFU:.2f} ({DEFAULT_MFU_SOURCE})"),
            **roofline_bases(),
        },
    )


@dataclass
class Fit:
    t_fixed: float
    inv_bw: float
    inv_flops: float | None  # None: no measured point was compute-bound, so it is not identified
    rel_rms: float  # root-mean-square relative error over the points
    n: int


def fit_step_times(
    points: list[tuple[int, int, float]], dtype: str, kv_per_token: float, where: str = "profile"
) -> Fit:
    """Least-squares fit of t_fixed, 1/(BW MBU), 1/(peak MFU) to measured (batch, context, seconds).

    For a fixed ratio r = inv_flops / inv_bw the model is linear in (t_fixed, inv_bw):
    t = t_fixed + inv_bw x max(bytes, r x flops). We scan r on a log grid (r = 0: purely
    bandwidth-bound) and keep the best relative-error fit with non-negative parameters.
    What the fit misses, Correction keeps (on the profiled card only).
    """
    if len(points) < 2:
        raise UserError(
            f"{where}: field 'steps': expected at least 2 measured (batch, context) step times to fit "
            f"t_fixed and bandwidth, found {len(points)}"
        )
    batch = np.array([p[0] for p in points], dtype=float)
    sum_ctx = np.array([p[0] * p[1] for p in points], dtype=float)
    t = np.array([p[2] for p in points], dtype=float)
    by = decode_bytes(batch, sum_ctx, dtype, kv_per_token)
    fl = decode_flops(batch, sum_ctx)
    scale = float(np.median(by / fl))
    best: tuple[float, float, float, float] | None = None  # err, t_fixed, inv_bw, r
    for r in [0.0, *(scale * np.logspace(-3, 3, 121))]:
        z = np.maximum(by, r * fl)
        w = 1.0 / t  # relative error weights
        a = np.stack([np.ones_like(z), z], axis=1) * w[:, None]
        coef, *_ = np.linalg.lstsq(a, t * w, rcond=None)
        t0, k = float(coef[0]), float(coef[1])
        if k < 0:  # time cannot fall as bytes grow: bandwidth term off, t_fixed = mean
            t0, k = float(np.sum(t * w * w) / np.sum(w * w)), 0.0
        if t0 < 0:
            t0 = 0.0
            k = max(0.0, float(np.sum(z * t * w * w) / np.sum(z * z * w * w)))
        err = float(np.sqrt(np.mean(((t0 + k * z) - t) ** 2 / t**2)))
        if best is None or err < best[0] - 1e-12:
            best = (err, t0, k, r)
    assert best is not None
    err, t0, k, r = best
    compute_bound = r > 0 and bool(np.any(r * fl > by))
    return Fit(t_fixed=t0, inv_bw=k, inv_flops=(r * k if compute_bound else None), rel_rms=err, n=len(points))
