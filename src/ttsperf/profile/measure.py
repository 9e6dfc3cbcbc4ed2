"""`ttsperf profile`: memory and speed of ChatTTS on this device, measured through the engine's
own step (slot forward + code heads + per-row sampling), written as a ModelProfile for `plan`.

Every timing: warm-up first, the device synchronised before each clock read, median of repeats
with the interquartile range as spread. Memory: on CUDA the allocator's peak; on CPU the bytes of
the engine's tensors (weights + KV slots) and the process RSS, both reported.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
import psutil
import torch

from ttsperf import __version__
from ttsperf.engine.audio import AudioDecoder, BatchedAudio
from ttsperf.engine.engine import EngineConfig
from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import (
    PENALTY_WINDOW,
    RowParams,
    SamplingParams,
    candidates,
    sample,
    seed_key,
    uniforms,
    width,
)
from ttsperf.profile.schema import (
    AudioCallPoint,
    DeviceInfo,
    Measured,
    MemoryPoint,
    ModelInfo,
    ModelProfile,
    PrefillPoint,
    StepPoint,
)
from ttsperf.revisions import ENGINE_REVISION

Progress = Callable[[str], None]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_time(
    fn: Callable[[], object], device: torch.device, repeats: int, warmup: int
) -> tuple[float, float]:
    """(median seconds, interquartile range)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    return statistics.median(times), q[2] - q[0]


def _how(repeats: int, warmup: int, device: torch.device, what: str) -> str:
    sync = "torch.cuda.synchronize before each clock read" if device.type == "cuda" else "CPU, synchronous"
    return f"{what}: median of {repeats} after {warmup} warm-up, {sync}; spread = interquartile range"


def _measured(seconds: float, spread: float, n: int, how: str, unit: str = "s") -> Measured:
    return Measured(value=seconds, unit=unit, how=how, spread=spread, n=n)


def device_info(device: torch.device) -> DeviceInfo:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return DeviceInfo(name=props.name, kind="cuda", memory_bytes=props.total_memory)
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), name)
    except OSError:
        pass
    threads = torch.get_num_threads()
    return DeviceInfo(
        name=f"{name} ({threads} threads)", kind="cpu", memory_bytes=psutil.virtual_memory().total
    )


def kv_slots(pipe: Pipeline, batch: int, length: int) -> KVSlots:
    """The engine's KV storage for `batch` rows of `length` tokens, in the model's dtype."""
    g = pipe.cfg.gpt
    dtype = next(pipe.model.gpt.parameters()).dtype
    head_dim = g.hidden_size // g.num_attention_heads
    return KVSlots(
        g.num_hidden_layers, batch, g.num_key_value_heads, length, head_dim, dtype=dtype, device=pipe.device
    )


def decode_step(
    pipe: Pipeline, fwd: SlotForward, batch: int, ctx: int, gen: torch.Generator
) -> tuple[KVSlots, Callable[[], None]]:
    """KV slots for `batch` rows at `ctx` tokens, and one engine decode step over them: slot
    forward + code heads + batched per-row sampling (what Engine._step runs)."""
    g, device = pipe.cfg.gpt, pipe.device
    dtype = next(pipe.model.gpt.parameters()).dtype
    slots = kv_slots(pipe, batch, ctx + 1)
    x = torch.randn(batch, g.hidden_size, generator=gen).to(device, dtype)
    pos = torch.full((batch,), ctx, device=device)
    history = torch.randint(0, g.num_audio_tokens - 1, (batch, g.num_vq, PENALTY_WINDOW), generator=gen)
    history = history.to(device)
    params = RowParams.of([SamplingParams()] * batch, g.num_audio_tokens, device)
    top = width(candidates(SamplingParams(), g.num_audio_tokens), g.num_audio_tokens)
    keys = seed_key(torch.arange(batch)).to(device)
    steps = torch.full((batch,), ctx, device=device)
    allow = torch.ones(batch, dtype=torch.bool, device=device)

    def step() -> None:
        logits = pipe.model.embed.code_logits(fwd.decode(x, slots, pos))
        codes = sample(logits, history, params, allow, g.eos_token, uniforms(keys, steps, g.num_vq), top)
        codes.cpu()  # the engine's one host read per step

    return slots, step


def audio_call_seconds(pipe: Pipeline, rows: int, repeats: int, gen: torch.Generator) -> tuple[float, float]:
    """(median, spread) of the engine's one Decoder+Vocos call (engine/audio.py) when `rows` rows
    emit a mid-stream chunk at the same step: 24 new steps each, after a full left context."""
    audio = BatchedAudio(pipe.model, 4)
    steps = 24 + (audio.ctx_frames + 1) // 2 + 24
    emitted = (2 * (steps - 24) - audio.lookahead_frames) * audio.hop  # the previous chunk's end
    hidden = torch.randn(rows, steps, pipe.cfg.gpt.hidden_size, generator=gen).to(pipe.device)
    windows = [audio.window(r, steps, emitted, final=False) for r in range(rows)]
    return median_time(lambda: audio.decode(hidden, windows), pipe.device, repeats, 1)


def fixed_overhead(steps: list[StepPoint]) -> Measured | None:
    """The part of a decode step no row adds: the intercept a of a least-squares fit
    t = a + b x batch + c x batch x context over the measured grid (None if the grid cannot
    separate the three, or the fit is not physical)."""
    if len({s.batch for s in steps}) < 2 or len({s.batch * s.context for s in steps}) < 3:
        return None
    x = np.array([[1.0, s.batch, s.batch * s.context] for s in steps])
    t = np.array([s.seconds.value for s in steps])
    coef, *_ = np.linalg.lstsq(x / t[:, None], np.ones_like(t), rcond=None)  # relative error
    if coef[0] <= 0:
        return None
    rms = float(np.sqrt(np.mean((x @ coef / t - 1) ** 2)))
    how = (
        f"intercept of a least-squares fit t = a + b x batch + c x batch x context to the {len(steps)} "
        f"step times (relative RMS error {rms:.1%}): weights read once, launches, Python - what a step "
        f"costs before any row; per row {1e3 * coef[1]:.3f} ms, per KV token read {1e9 * coef[2]:.1f} ns"
    )
    return Measured(value=float(coef[0]), unit="s", how=how, n=len(steps))


ENGINE_TEXT = "你好，这是一段用于压测的文本，长度八秒左右。" * 4  # ~700 steps, past any window here


def engine_config(max_batch: int) -> EngineConfig:
    """The engine a profile drives: room for `max_batch` rows of ENGINE_TEXT's prompt and steps."""
    return EngineConfig(max_batch=max_batch, max_queue=max_batch, max_prompt_tokens=160, max_new_tokens=1024)


def engine_step_seconds(engine, batch: int, *, warm: int = 3, measured: int = 10) -> float:
    """Median wall seconds of the engine's step (engine_step_times)."""
    return statistics.median(engine_step_times(engine, batch, warm=warm, measured=measured)[0])


def engine_step_times(engine, batch: int, *, warm: int = 3, measured: int = 10) -> tuple[list[float], int]:
    """Wall seconds of each of `measured` engine steps (decode, sampling, state update, its one
    host read, the scheduler's bookkeeping) with `batch` long non-streaming rows running, driven in
    this thread, and the rows' mean KV tokens then; the rows are cancelled after. The engine must
    not be started (no worker)."""
    from ttsperf.engine.types import SynthRequest

    with engine._contexts():
        handles = [engine.submit(SynthRequest(ENGINE_TEXT, SamplingParams(seed=i))) for i in range(batch)]
        while engine.running() < batch:
            engine._admit()
            engine._step()
        for _ in range(warm):  # CUDA graphs capture here
            engine._step()
        times = []
        for _ in range(measured):
            t0 = time.perf_counter()
            engine._step()  # its one host read waits for the device: the wall time is the step's
            times.append(time.perf_counter() - t0)
        context = round(float(engine.runner.state.host.positions[:batch].mean()))
        for h in handles:
            h.cancel()
        while engine.running():
            engine._step()
    return times, context


def engine_for(pipe: Pipeline, config: EngineConfig, switches=None):
    """An engine over `pipe` (not started) with the profile's own TF32 and cudnn flags put back
    after it applied its switches: what is measured after it runs as the profile set it."""
    from ttsperf.engine.engine import Engine

    flags = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
    )
    engine = Engine(pipe, config, switches)
    (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
    ) = flags
    return engine


def host_per_row(pipe: Pipeline, batches: list[int], repeats: int) -> tuple[Measured | None, Measured | None]:
    """The engine's step minus the bare decode step (forward + heads + sampling + one read) at the
    same batch and context, at the smallest and largest batch: the slope is what each row adds on
    the host per step (plan's t_row), the intercept what every step adds whatever its rows (the
    batch state's bookkeeping ops, the scheduler). (None, None) with fewer than two batches."""
    lo, hi = min(batches), max(batches)
    if lo == hi:
        return None, None
    engine = engine_for(pipe, engine_config(hi))
    tok = pipe.tokenizer
    context = len(tok.ids(tok.decorate_code_prompt(ENGINE_TEXT, "[speed_5]"))) + 10
    fwd, gen = SlotForward(pipe.model.gpt), torch.Generator().manual_seed(0)
    extra, spread = {}, 0.0
    for b in (lo, hi):
        whole = engine_step_seconds(engine, b, measured=max(5, repeats))
        slots, step = decode_step(pipe, fwd, b, context, gen)
        bare, spread = median_time(step, pipe.device, max(5, repeats), 2)
        extra[b] = whole - bare
        del slots
    line = host_line(extra, spread)
    if line is None:
        return None, None
    slope, per_step = line
    how = (
        f"(engine step - bare decode step) at batch {hi} minus at batch {lo}, over {hi - lo} rows; "
        f"{1e6 * extra[lo]:.0f} us and {1e6 * extra[hi]:.0f} us beyond the bare step, context ~{context}"
    )
    return (
        Measured(value=slope, unit="s", how=how, n=2),
        Measured(value=per_step, unit="s", how=f"intercept of the same line: {how}", n=2),
    )


def host_line(extra: dict[int, float], spread: float) -> tuple[float, float] | None:
    """(per row, per step) of the host's share, from what the engine's step adds to the bare step
    at two batches; None when the rise between them is within the bare step's spread (IQR) at the
    larger batch. The host share is microseconds per row: on a 0.28 B model's 70-240 ms CPU step
    the difference of two medians is drift, and a number made of drift would steer plan (1.56 ms
    per row measured so, docs/VALIDATION.md, "The full-size model"); unresolved, plan keeps its
    default."""
    lo, hi = min(extra), max(extra)
    rise = extra[hi] - extra[lo]
    if abs(rise) <= spread:
        return None
    slope = max(0.0, rise / (hi - lo))
    return slope, max(0.0, extra[lo] - slope * lo)


@torch.inference_mode()
def profile_model(
    pipe: Pipeline,
    *,
    batches: list[int],
    contexts: list[int],
    prompts: list[int],
    repeats: int = 10,
    warmup: int = 3,
    progress: Progress | None = None,
) -> ModelProfile:
    say = progress or (lambda _msg: None)
    device, cfg = pipe.device, pipe.cfg
    model = pipe.model
    dtype = next(model.gpt.parameters()).dtype
    elem = torch.finfo(dtype).bits // 8
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    fwd = SlotForward(model.gpt)
    gen = torch.Generator().manual_seed(0)

    kv_probe = kv_slots(pipe, 1, 1024)
    kv_per_token = kv_probe.nbytes / 1024
    del kv_probe

    steps, memory = _decode_points(pipe, fwd, gen, batches, contexts, repeats, warmup, weights, say)
    few = max(3, repeats // 2)
    prefill = _prefill_points(pipe, fwd, gen, prompts, batches, few, say)
    decode_rate, chunk_seconds, audio_calls = _audio_points(pipe, gen, batches, few, say)

    say("the engine's host work per row")
    host, host_step = host_per_row(pipe, batches, repeats)

    # Achieved bandwidth: bytes a step must read (weights + the KV it attends over) / its time,
    # best point. An upper bound on memory time, since it counts every step cost as memory.
    best = max(steps, key=lambda s: (weights + kv_per_token * s.batch * s.context) / s.seconds.value)
    bw = (weights + kv_per_token * best.batch * best.context) / best.seconds.value / 1e9
    bw_how = (
        f"(weights + KV read) / step time at batch {best.batch}, context {best.context}, the best point; "
        "it counts all step time as memory time"
    )
    return ModelProfile(
        fixed_step_overhead_s=fixed_overhead(steps),
        host_per_row_step_s=host,
        host_per_step_s=host_step,
        ttsperf_version=__version__,
        engine_revision=ENGINE_REVISION,
        device=device_info(device),
        model=ModelInfo(
            config=cfg.name,
            dtype=pipe.dtype_name,
            parameters=pipe.checkpoint_parameters,
            synthetic=pipe.synthetic,
        ),
        runtime={
            "inference_mode": True,
            "threads": torch.get_num_threads(),
            "dtype": pipe.dtype_name,
            "tf32": bool(device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32),
            "cudnn_benchmark": bool(device.type == "cuda" and torch.backends.cudnn.benchmark),
        },
        weights_bytes=Measured(value=weights, unit="B", how="sum of numel x element size of every parameter"),
        kv_bytes_per_token=Measured(
            value=kv_per_token, unit="B", how=f"nbytes of allocated KV slots / tokens ({elem}-byte elements)"
        ),
        memory=memory,
        steps=steps,
        prefill=prefill,
        decode_seconds_per_audio_second=decode_rate,
        vocoder_chunk_seconds=chunk_seconds,
        audio_calls=audio_calls,
        achieved_bandwidth_gbs=Measured(value=bw, unit="GB/s", how=bw_how),
    )


def _decode_points(
    pipe: Pipeline,
    fwd: SlotForward,
    gen: torch.Generator,
    batches: list[int],
    contexts: list[int],
    repeats: int,
    warmup: int,
    weights: int,
    say: Progress,
) -> tuple[list[StepPoint], list[MemoryPoint]]:
    """The engine's decode step timed at every (batch, context), and the memory it held."""
    device = pipe.device
    memory: list[MemoryPoint] = []
    steps: list[StepPoint] = []
    for batch in batches:
        for ctx in contexts:
            say(f"decode step, batch {batch}, context {ctx}")
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            slots, step = decode_step(pipe, fwd, batch, ctx, gen)
            t, spread = median_time(step, device, repeats, warmup)
            how = _how(
                repeats,
                warmup,
                device,
                "engine decode step (slot forward + code heads + batched per-row sampling)",
            )
            steps.append(StepPoint(batch=batch, context=ctx, seconds=_measured(t, spread, repeats, how)))
            if device.type == "cuda":
                used, how = (
                    torch.cuda.max_memory_allocated(device),
                    "torch.cuda.max_memory_allocated, timed steps",
                )
                rss = None
            else:
                used, how = (
                    weights + slots.nbytes,
                    "the engine's tensor bytes: weights + KV slots (no allocator peak)",
                )
                rss_now = psutil.Process().memory_info().rss
                rss = Measured(value=rss_now, unit="B", how="process RSS after the timed steps")
            peak = Measured(value=used, unit="B", how=how)
            memory.append(MemoryPoint(batch=batch, context=ctx, peak_bytes=peak, rss_bytes=rss))
            del slots

    return steps, memory


def _prefill_points(
    pipe: Pipeline,
    fwd: SlotForward,
    gen: torch.Generator,
    prompts: list[int],
    batches: list[int],
    few: int,
    say: Progress,
) -> list[PrefillPoint]:
    """One prompt's prefill per length, then the batched admission the engine makes."""
    device, g = pipe.device, pipe.cfg.gpt
    dtype = next(pipe.model.gpt.parameters()).dtype
    prefill: list[PrefillPoint] = []
    prefill: list[PrefillPoint] = []
    for n in prompts:
        say(f"prefill, {n} prompt tokens")
        slots = kv_slots(pipe, 1, n)
        e = torch.randn(1, n, g.hidden_size, generator=gen).to(device, dtype)
        t, spread = median_time(lambda: fwd.prefill(e, slots, 0), device, few, 1)  # noqa: B023
        how = _how(few, 1, device, "slot-forward prefill of one prompt")
        prefill.append(PrefillPoint(prompt_tokens=n, seconds=_measured(t, spread, few, how)))
    # the engine prefills everyone joining at a step in one call, up to its token budget: the
    # tokens plan's simulator will ask about at the batches it predicts
    n, budget = max(prompts), EngineConfig.prefill_tokens
    for rows in sorted({min(b, budget // n) for b in batches if b > 1} - {0, 1}):
        say(f"prefill, {rows} prompts of {n} tokens in one call")
        slots = kv_slots(pipe, rows, n)
        e = torch.randn(rows, n, g.hidden_size, generator=gen).to(device, dtype)
        t, spread = median_time(lambda: fwd.prefill_many(e, slots, 0), device, few, 1)  # noqa: B023
        how = _how(few, 1, device, f"slot-forward prefill of {rows} prompts in one call")
        prefill.append(PrefillPoint(prompt_tokens=n, rows=rows, seconds=_measured(t, spread, few, how)))

    return prefill


def _audio_points(
    pipe: Pipeline, gen: torch.Generator, batches: list[int], few: int, say: Progress
) -> tuple[Measured, Measured, list[AudioCallPoint]]:
    """Decoder + Vocos: the rate over 5 s of audio, one streamed chunk, the batched call per rows."""
    device, cfg, g, model = pipe.device, pipe.cfg, pipe.cfg.gpt, pipe.model
    say("decoder + vocoder")
    audio_steps = round(5 * cfg.steps_per_second)
    hidden = [torch.randn(g.hidden_size, generator=gen).to(device) for _ in range(audio_steps)]

    def whole() -> None:
        AudioDecoder(model, 0).emit(hidden, final=True)

    t, spread = median_time(whole, device, few, 1)
    seconds_of_audio = audio_steps / cfg.steps_per_second
    how = _how(few, 1, device, "Decoder + Vocos over 5 s of audio, divided by the audio seconds")
    decode_rate = _measured(t / seconds_of_audio, spread / seconds_of_audio, few, how, unit="s/s")
    chunk_steps = 24 + (AudioDecoder(model, 4).ctx_frames + 1) // 2

    def one_chunk() -> None:
        d = AudioDecoder(model, 4)
        d.emitted = d.ctx_frames * d.hop  # as deep into a stream as a full left context reaches
        d.emit(hidden[: chunk_steps + 24], final=False)

    t, spread = median_time(one_chunk, device, few, 1)
    how = _how(few, 1, device, "one streamed chunk (24 new steps + left context), Decoder + Vocos")
    chunk_seconds = _measured(t, spread, few, how)
    audio_calls = []
    for rows in batches:
        say(f"decoder + vocoder, {rows} rows' chunks in one call")
        t, spread = audio_call_seconds(pipe, rows, few, gen)
        what = f"the engine's batched Decoder + Vocos call over {rows} rows' streamed chunks"
        how = _how(few, 1, device, what)
        audio_calls.append(AudioCallPoint(rows=rows, seconds=_measured(t, spread, few, how)))

    return decode_rate, chunk_seconds, audio_calls
