"""Memory model: how many sequences fit on a card for a workload.

    total(B) = runtime + weights + frag x (B x slot + transients(B))

- weights: every resident parameter (GPT, Embed, Decoder, DVAE, Vocos) x bytes per dtype, or the
  weights bytes a profile measured;
- runtime: memory the process holds outside the tensor allocator (CUDA context, cuBLAS/cuDNN
  workspaces) - an assumption unless a profile on that card measured it;
- slot: what `ttsperf serve` reserves per row at start (facts.slot_bytes, the formula serve checks
  --max-batch with): KV of 2 x layers x hidden x bytes per token (docs/reference/chattts.md) for
  --max-prompt-tokens + --max-new-tokens (+ 1) positions, and the fp32 hidden state of each step;
  the limits are the workload's longest prompt and reply with a margin (`Workload.serve_limits`);
- transients: the largest short-lived working set of one engine iteration (a decode step plus the
  decoder/vocoder call over the chunks it emits, or one prompt's prefill), from the shapes;
- frag: the caching allocator's rounding and fragmentation on what is allocated while serving.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ttsperf import facts as F
from ttsperf.plan.schema import Basis
from ttsperf.profile.search import largest_fitting

GIB = 1024**3

# --- Defaults: each is an assumption, with where it comes from (docs/PLANNING.md repeats them). ---
# A process that only initialised CUDA shows ~781 MB in nvidia-smi (pytorch/pytorch#34323); the
# context size varies with driver, GPU and loaded libraries.
DEFAULT_RUNTIME_BYTES = 781 * 1024**2
DEFAULT_RUNTIME_SOURCE = "assumption: ~781 MB CUDA context as reported in pytorch/pytorch#34323"
# 10 % headroom for allocator rounding/fragmentation; vLLM's default gpu_memory_utilization=0.9
# leaves the same share of a card unused.
DEFAULT_FRAGMENTATION = 1.10
DEFAULT_FRAGMENTATION_SOURCE = "assumption: 10% headroom, as vLLM's default gpu_memory_utilization 0.9"
# Vendor VRAM "GB" are binary in practice (a "24 GB" RTX 4090 reports 24,564 MiB).
CARD_GB_IS_GIB_SOURCE = "assumption: catalog memory_gb read as GiB (vendor VRAM sizes are binary)"

# Working-set widths (elements per row) from the architecture; see transients().
DECODER_CHANNELS = 4 * 512  # ConvNeXt inverted bottleneck: 4 x hidden 512 (standard ConvNeXt expansion)
FRAMES_PER_STEP = 2


@dataclass
class Workload:
    """The requests: how much audio, how long a prompt, how they stream. One length by default;
    `lengths` makes them several, equally likely (the mean is then audio_seconds, prompt_tokens)."""

    audio_seconds: float = 8.0  # the guide's "8 s" clips
    prompt_tokens: int = 64  # assumption: a sentence plus ChatTTS's control tokens
    first_chunk_steps: int = F.STREAM_CHUNK_STEPS
    chunk_steps: int = F.STREAM_CHUNK_STEPS
    lookahead_steps: int = 4  # ttsperf's engine holds back 4 steps of each non-final chunk
    # serve's limits, which size every slot it reserves (facts.slot_bytes): None = the workload's
    # own with a margin (`serve_limits`), as plan prints them in its serve command
    max_prompt_tokens: int | None = None
    max_new_tokens: int | None = None
    # requests of several lengths, each equally likely: (audio seconds, prompt tokens); a length
    # twice as likely appears twice. Empty: every request is audio_seconds with prompt_tokens.
    lengths: tuple[tuple[float, int], ...] = ()
    # True: the k-th request sent takes lengths[k % n], in order, as bench sends a text set's
    # texts (--like: the run's own order); False: each drawn at random, as users ask
    ordered: bool = False

    @classmethod
    def mixed(cls, lengths: list[tuple[float, int]], **kw: int | bool | None) -> Workload:
        """Requests drawn from `lengths` (one length: plainly that one), with their mean as the
        workload's audio_seconds and prompt_tokens."""
        if not lengths:
            raise ValueError("mixed: expected at least one length")
        audio = sum(a for a, _ in lengths) / len(lengths)
        prompt = round(sum(p for _, p in lengths) / len(lengths))
        several = tuple(lengths) if len(set(lengths)) > 1 else ()
        return cls(audio_seconds=lengths[0][0] if not several else audio,
                   prompt_tokens=lengths[0][1] if not several else prompt, lengths=several, **kw)  # fmt: skip

    def classes(self) -> tuple[tuple[float, int], ...]:
        """Each request's (audio seconds, prompt tokens), one equally likely class each."""
        return self.lengths or ((self.audio_seconds, self.prompt_tokens),)

    @property
    def steps(self) -> int:
        """Decode steps of a request (the mean request's with several lengths)."""
        return F.steps_for_audio(self.audio_seconds)

    @property
    def context_tokens(self) -> int:
        """Tokens one sequence holds in the KV cache when it finishes: prompt + every decoded step
        (the longest request's: a slot must hold any of them)."""
        return max(p + F.steps_for_audio(a) for a, p in self.classes())

    @property
    def longest(self) -> tuple[int, int]:
        """(prompt tokens, decode steps) serve must admit: the longest prompt and the longest reply."""
        return max(p for _, p in self.classes()), max(F.steps_for_audio(a) for a, _ in self.classes())

    def serve_limits(self) -> tuple[int, int]:
        """serve's --max-prompt-tokens and --max-new-tokens for these requests: as set, else the
        longest prompt and the longest reply with LIMIT_MARGIN, rounded up to LIMIT_ROUND."""
        prompt, steps = self.longest
        return (self.max_prompt_tokens or with_margin(prompt), self.max_new_tokens or with_margin(steps))

    @property
    def kv_tokens(self) -> int:
        """KV tokens reserved per sequence: serve's slot, prompt limit + audio limit."""
        return sum(self.serve_limits())


# serve's limits plan prints, from the workload: the longest prompt and the longest reply, each with
# a quarter more, rounded up to a multiple of 32 tokens. The margin is an assumption: no spread of
# real ChatTTS reply lengths for one text is published (docs/PLANNING.md, "Workload"), and a Latin
# word may split into several tokens; past the limits serve cuts the audio (the result says so) or
# answers 413. Synthetic weights' lengths are the speech rate's, which fit without it.
LIMIT_MARGIN = 1.25
LIMIT_ROUND = 32


def with_margin(tokens: int) -> int:
    return -(-math.ceil(tokens * LIMIT_MARGIN) // LIMIT_ROUND) * LIMIT_ROUND


@dataclass
class MemoryModel:
    dtype: str = "fp16"
    weights_bytes: float | None = None  # None -> computed from parameter counts
    kv_bytes_per_token: float | None = None  # None -> 2 x layers x hidden x bytes
    runtime_bytes: float = DEFAULT_RUNTIME_BYTES
    fragmentation: float = DEFAULT_FRAGMENTATION
    basis: dict[str, Basis] = field(default_factory=dict)  # field -> where the number comes from

    def __post_init__(self) -> None:
        b = F.BYTES_PER_DTYPE[self.dtype]
        if self.weights_bytes is None:
            self.weights_bytes = F.TOTAL_PARAMS * b
            self.basis.setdefault(
                "weights_bytes", Basis.projected(f"{F.TOTAL_PARAMS:,} parameters x {b} B ({self.dtype})")
            )
        if self.kv_bytes_per_token is None:
            self.kv_bytes_per_token = F.kv_bytes_per_token(self.dtype)
            self.basis.setdefault(
                "kv_bytes_per_token", Basis.projected(f"2 x {F.LAYERS} layers x {F.HIDDEN} x {b} B")
            )
        self.basis.setdefault("runtime_bytes", Basis.sourced(DEFAULT_RUNTIME_SOURCE))
        self.basis.setdefault("fragmentation", Basis.sourced(DEFAULT_FRAGMENTATION_SOURCE))

    @property
    def act_bytes(self) -> int:
        return F.BYTES_PER_DTYPE[self.dtype]

    def kv_bytes(self, batch: int, context: int) -> float:
        return float(self.kv_bytes_per_token) * batch * context  # type: ignore[arg-type]

    def transients(self, batch: int, context: int, prompt: int, chunk_steps: int) -> float:
        """Largest working set of one engine iteration (bytes), outside weights and KV.

        Decode step: per row the hidden state and residual (4 x hidden), MLP gate+up
        (2 x intermediate), fp32 attention scores over the full context (heads x context x 4 B) and
        fp32 code logits (4 x 626 x 4 B); plus a decoder/vocoder call over one chunk for every row
        (frames x 4 x 512 channels, input and output buffers).
        Prefill: one prompt at a time: MLP and hidden per token, fp32 attention scores
        heads x P x P (eager attention) and fp32 logits per position.
        """
        b = self.act_bytes
        per_row = (
            4 * F.HIDDEN * b
            + 2 * F.INTERMEDIATE * b
            + F.HEADS * context * 4
            + F.CODEBOOKS * F.CODE_VOCAB * 4
            + 2 * FRAMES_PER_STEP * chunk_steps * DECODER_CHANNELS * b
        )
        p = prompt
        prefill = (
            p * (4 * F.HIDDEN + 2 * F.INTERMEDIATE) * b
            + F.HEADS * p * p * 4
            + p * F.CODEBOOKS * F.CODE_VOCAB * 4
        )
        return max(batch * per_row, prefill)

    def breakdown_at(self, batch: int, context: int, prompt: int, chunk_steps: int) -> dict[str, float]:
        """Bytes per component with `batch` sequences of `context` tokens of KV each (a profile's
        probes: KV slots and a step, no serve)."""
        tr = self.transients(batch, context, prompt, chunk_steps)
        return self._parts(self.kv_bytes(batch, context), tr)

    def slot_bytes(self, w: Workload) -> float:
        """What serve reserves per slot for `w`'s limits: facts.slot_bytes, serve's own formula."""
        return F.slot_bytes(*w.serve_limits(), float(self.kv_bytes_per_token))  # type: ignore[arg-type]

    def breakdown(self, batch: int, w: Workload) -> dict[str, float]:
        """Bytes per component with `batch` of serve's slots for `w`: kv_cache is the slots' whole
        reservation (K and V of every position, and the hidden states kept per step)."""
        tr = self.transients(batch, w.kv_tokens, w.prompt_tokens, w.chunk_steps)
        return self._parts(batch * self.slot_bytes(w), tr)

    def _parts(self, kv: float, tr: float) -> dict[str, float]:
        parts = {
            "weights": float(self.weights_bytes),  # type: ignore[arg-type]
            "runtime": float(self.runtime_bytes),
            "kv_cache": kv,
            "transients": tr,
            "fragmentation": (self.fragmentation - 1.0) * (kv + tr),
        }
        parts["total"] = sum(parts.values())
        return parts

    def total(self, batch: int, w: Workload) -> float:
        return self.breakdown(batch, w)["total"]

    def per_audio_second(self, w: Workload) -> float:
        """Bytes one more second of audio adds to one sequence (KV for a second's steps, x frag)."""
        return float(self.kv_bytes_per_token) * F.STEPS_PER_AUDIO_SECOND * self.fragmentation  # type: ignore[arg-type]

    def max_batch(self, card_bytes: float, w: Workload, cap: int | None = None) -> int:
        """Largest B with total(B) <= card memory (0: not even one sequence fits)."""
        return largest_fitting(lambda b: self.total(b, w) <= card_bytes, cap or 1 << 24)[0]


def card_bytes(memory_gb: float) -> float:
    return memory_gb * GIB
