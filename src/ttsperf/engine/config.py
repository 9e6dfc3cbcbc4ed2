"""The engine's settings, torch-free so that a command can show and check them before loading
anything: the runtime switches (what the model runs as) and the scheduler's limits. Their defaults
are the engine's; `ttsperf serve`'s options (server/settings.py) take them from here."""

from __future__ import annotations

from dataclasses import dataclass, field

from ttsperf import facts as F
from ttsperf.errors import UserError

AUTO_BATCH_CAP = 64  # --max-batch auto never goes past this, whatever the memory
GIB = 1024**3
MAX_STEPS_PER_TURN = 64  # 1.4 s of audio between a turn's events: more would only delay them


def default_queue(max_batch: int) -> int:
    """The queue by default holds a batch's worth, at least 64 (facts.MIN_QUEUE says why)."""
    return max(F.MIN_QUEUE, max_batch)


@dataclass(frozen=True)
class Switches:
    dtype: str = "fp32"  # fp32 | fp16 | bf16: the weights' storage type
    autocast: bool = False  # fp32 weights, fp16/bf16 matmuls (the guide's torch.cuda.amp.autocast)
    tf32: bool = True  # TF32 matmuls on Ampere+ (the guide: +8%)
    cudnn_benchmark: bool = True  # the guide: -18% with it off
    inference_mode: bool = True  # vs no_grad: no version counters, no autograd bookkeeping
    compile: bool = False  # torch.compile the decode step's layers
    cuda_graphs: bool = False  # capture the decode step (CUDA only)
    int8: bool = False  # int8 weight-only quantisation of the GPT's linear layers (torchao)

    def validate(self) -> Switches:
        if self.dtype not in ("fp32", "fp16", "bf16"):
            raise UserError(f"--dtype {self.dtype!r}: expected fp32, fp16 or bf16")
        return self


@dataclass(frozen=True)
class EngineConfig:
    max_batch: int | None = None  # None: from free memory (auto_max_batch)
    max_queue: int | None = None  # None: default_queue(max batch)
    max_new_tokens: int = F.MAX_NEW_TOKENS  # 43.7 s of audio, the official default
    max_prompt_tokens: int = 512
    first_chunk_steps: int = F.STREAM_CHUNK_STEPS  # 0.51 s of audio before the first streamed chunk
    chunk_steps: int = F.STREAM_CHUNK_STEPS
    lookahead_steps: int = 4
    # prompt tokens (rows x longest prompt) prefilled at one step boundary: joining requests wait
    # a step or more rather than stall the running streams for one long prefill
    prefill_tokens: int = 2048
    # While rows run, arrivals join in groups: once `prefill_rows` wait, or the oldest has waited
    # `prefill_wait` seconds (admission.py `due`); an idle engine prefills at once.
    prefill_wait: float = 0.02
    prefill_rows: int = 8
    # Decode steps per host turn (vLLM's multi-step scheduling, vllm-project/vllm#7000): the host
    # launches this many steps, then reads one status for all of them, so its per-turn work
    # (the status read, the events, admission, the turn's message) is spread over them. Chunks
    # are cut where they were due, so the audio is the same; events come up to this many steps
    # later, and a row that finishes runs the turn out, taking nothing.
    steps_per_turn: int = 1
    request_timeout: float = 300.0
    # --max-batch auto sizes the slots to this share of the free memory's headroom: 1/N when N
    # engines share one device (serve --engines N, engine/pool.py)
    memory_share: float = 1.0
    retry_after: float = 1.0
    inject_oom_at_steps: frozenset[int] = field(default_factory=frozenset)  # fault injection (tests)
    # read step N's status while step N+1 runs (one step ahead). None: where the device runs
    # asynchronously (CUDA); on a CPU a launched step is done, and reading it a step later only
    # delays events. True/False: tests and benchmarks compare the two; never a serve flag
    overlap: bool | None = None
    # the CUDA-graph path without capturing (each bucket's padded step runs eagerly): its buckets
    # and warm-up checked on a CPU (tests); never a serve flag
    graphs_without_capture: bool = False
    # chunks as 16-bit PCM made by the audio call on the device (PcmChunk): what the engine's process
    # sends the front (core.py), half the bytes copied back and nothing converted on the host.
    # False: float32 AudioChunk, for callers in the same process (profile, tests); never a serve flag
    pcm: bool = False

    def validate(self) -> EngineConfig:
        names = (
            "max_new_tokens",
            "max_prompt_tokens",
            "first_chunk_steps",
            "chunk_steps",
            "prefill_tokens",
            "prefill_rows",
            "steps_per_turn",
        )
        for name in names:
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} {getattr(self, name)}: expected at least 1")
        if self.steps_per_turn > MAX_STEPS_PER_TURN:
            raise UserError(
                f"--steps-per-turn {self.steps_per_turn}: expected at most {MAX_STEPS_PER_TURN} "
                "(events wait that many steps)"
            )
        if not 0 <= self.prefill_wait <= 1:
            raise UserError(f"--prefill-wait {self.prefill_wait * 1000:g}ms: expected 0 to 1000 ms")
        if not 0 < self.memory_share <= 1:
            raise UserError(f"memory_share {self.memory_share}: expected more than 0, at most 1")
        if self.max_queue is not None and self.max_queue < 1:
            raise UserError(
                f"--max-queue {self.max_queue}: expected at least 1 (or leave it to the max batch)"
            )
        if self.max_batch is not None and self.max_batch < 1:
            raise UserError(f"--max-batch {self.max_batch}: expected at least 1 (or auto)")
        if self.lookahead_steps < 0 or self.lookahead_steps >= self.first_chunk_steps:
            raise UserError(f"lookahead_steps {self.lookahead_steps}: expected 0 <= it < first_chunk_steps")
        return self

    @property
    def slot_tokens(self) -> int:
        """KV positions a slot holds: the prompt limit + the audio limit (plan prints both)."""
        return self.max_prompt_tokens + self.max_new_tokens

    def check_fits(self, free_bytes: int | None, kv_bytes_per_token: int, hidden: int, device: str) -> None:
        """Refuse, before anything is allocated, a --max-batch whose slots (F.slot_bytes each) do
        not fit `free_bytes`, the device's free memory with the model loaded; None (a CPU, or
        memory that cannot be read) or --max-batch auto: no check (auto sizes to what is free)."""
        if free_bytes is None or self.max_batch is None:
            return
        per_slot = F.slot_bytes(self.max_prompt_tokens, self.max_new_tokens, kv_bytes_per_token, hidden)
        if self.max_batch * per_slot <= free_bytes:
            return
        fits = int(free_bytes // per_slot)
        raise UserError(
            f"--max-batch {self.max_batch}: {self.max_batch} slots of {self.slot_tokens} tokens "
            f"(--max-prompt-tokens {self.max_prompt_tokens} + --max-new-tokens {self.max_new_tokens}) "
            f"need {self.max_batch * per_slot / GIB:.2f} GiB, {free_bytes / GIB:.2f} GiB is free on "
            f"{device}; expected at most {fits}, or fewer tokens per slot"
        )
