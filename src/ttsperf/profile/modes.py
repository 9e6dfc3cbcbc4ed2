"""`ttsperf profile --modes`: every engine mode as serve runs it, in one profile.

Per mode, an engine built with serve's switches for it (eager; --compile; --cuda-graphs) and
driven in this thread: its whole step per batch, and its Decoder+Vocos call per rows (compiled or
graphed as the mode makes it). Prefill is eager under eager and --compile (the engine does not
compile it), so it is measured once and those modes carry the same points; --cuda-graphs measures
the engine's graphed prefill (GraphedPrefill) at the same rows and prompt tokens. Beside them, the host's
seconds per eager op on the device against a CPU tensor: the factor plan scales the host
profile's CPU ops by on a card (docs/PLANNING.md, "The host model").
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from ttsperf.engine.config import Switches
from ttsperf.model.pipeline import Pipeline
from ttsperf.profile.host import audio_steps, audio_windows
from ttsperf.profile.measure import engine_config, engine_for, engine_step_times, median_time
from ttsperf.profile.schema import (
    AudioCallPoint,
    Measured,
    ModeMeasurement,
    PerOpHost,
    PrefillPoint,
    StepPoint,
)

Progress = Callable[[str], None]
SWITCHES = {"eager": {}, "compile": {"compile": True}, "cuda-graphs": {"cuda_graphs": True}}
NEEDS_CUDA = "needs CUDA (serve captures graphs on a CUDA device only)"


def measure_modes(
    pipe: Pipeline,
    modes: list[str],
    batches: list[int],
    prefill: list[PrefillPoint],
    repeats: int,
    say: Progress,
) -> dict[str, ModeMeasurement]:
    """Each mode asked for, measured; a mode this device cannot run is marked skipped, with why."""
    out: dict[str, ModeMeasurement] = {}
    shared = [_eager_prefill(p) for p in prefill]
    for mode in modes:
        if mode == "cuda-graphs" and pipe.device.type != "cuda":
            out[mode] = ModeMeasurement(skipped=NEEDS_CUDA)
            continue
        out[mode] = measure_mode(pipe, mode, batches, shared, repeats, say)
        if pipe.device.type == "cuda":  # the mode's engine (KV slots, graphs) is gone: free it for the next
            torch.cuda.empty_cache()
    return out


def _eager_prefill(p: PrefillPoint) -> PrefillPoint:
    how = f"eager (the engine does not compile its prefill; --cuda-graphs replays it): {p.seconds.how}"
    return p.model_copy(update={"seconds": p.seconds.model_copy(update={"how": how})})


def graphed_prefill(engine, points: list[PrefillPoint], repeats: int, say: Progress) -> list[PrefillPoint]:
    """The engine's prefill call under --cuda-graphs (GraphedPrefill: the inputs padded to their
    (rows, prompt) bucket, one packed copy, one replay; eager past the largest bucket) at each
    point's rows and prompt tokens, into the first slots: what serve's prefill costs in this mode."""
    runner, device = engine.runner, engine.pipe.device
    out = []
    with engine._contexts():
        for p in points:
            say(f"cuda-graphs: the prefill of {p.rows} prompt(s) of {p.prompt_tokens} tokens")
            ids = torch.zeros(1, p.prompt_tokens, runner.num_vq, dtype=torch.long)
            prompts = [(ids, None, torch.ones(1, p.prompt_tokens, dtype=torch.bool))] * p.rows
            n = max(3, repeats)
            t, spread = median_time(lambda: runner.graphed_prefill(prompts, 0), device, n, 1)  # noqa: B023
            how = (
                f"the engine's prefill in cuda-graphs over {p.rows} prompt(s) of {p.prompt_tokens} tokens "
                f"(forward and code logits, replayed from its bucket's graph; eager past the largest): "
                f"median of {n} after 1 warm-up (it captures the graph), synchronised before each clock read"
            )
            seconds = Measured(value=t, unit="s", how=how, spread=spread, n=n)
            out.append(PrefillPoint(prompt_tokens=p.prompt_tokens, rows=p.rows, seconds=seconds))
    return out


def measure_mode(
    pipe: Pipeline, mode: str, batches: list[int], prefill: list[PrefillPoint], repeats: int, say: Progress
) -> ModeMeasurement:
    """One mode: an engine with serve's switches for it; compiled first (what serve's start does),
    graphs captured on first use in the warm-up steps; then its step per batch and audio call per
    rows."""
    engine = engine_for(pipe, engine_config(max(batches)), Switches(dtype=pipe.dtype_name, **SWITCHES[mode]))
    report = engine.switch_report
    setup = None
    if engine.decode_step.compiled:
        say(f"{mode}: compiling the step and the audio call")
        t0 = time.perf_counter()
        with engine._contexts():
            engine.decode_step.compile_now(report["compile"])
            engine.runner.audio.compile_now(engine.runner.state.hidden, report["compile"])
        setup = time.perf_counter() - t0
    for name in SWITCHES[mode]:  # compiling failed (no C compiler), or no graphs: not this mode
        if not report[name]["applied"]:
            return ModeMeasurement(skipped=f"--{name.replace('_', '-')} not applied: {report[name]['note']}")
    steps = []
    for b in batches:
        say(f"{mode}: the engine's step at batch {b}")
        times, context = engine_step_times(engine, b, warm=2, measured=max(3, repeats))
        q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
        how = (
            f"the engine's whole step in {mode} (decode, sampling, state update, its one host read, the "
            f"scheduler's bookkeeping): median of {len(times)} after 2 warm-up (graphs captured there)"
        )
        seconds = Measured(
            value=statistics.median(times), unit="s", how=how, spread=q[2] - q[0], n=len(times)
        )
        steps.append(StepPoint(batch=b, context=max(1, context), seconds=seconds))
    if engine.runner.graphed_prefill is not None:
        prefill = graphed_prefill(engine, prefill, repeats, say)
    return ModeMeasurement(
        steps=steps, prefill=prefill, audio_calls=_audio_calls(engine, mode, batches, repeats, say),
        setup_seconds=setup,
    )  # fmt: skip


def _audio_calls(
    engine, mode: str, rows_list: list[int], repeats: int, say: Progress
) -> list[AudioCallPoint]:
    """The engine's own Decoder+Vocos call (compiled or graphed as its mode makes it) over `rows`
    rows' mid-stream chunks, read from the engine's hidden states."""
    runner, device = engine.runner, engine.pipe.device
    audio, hidden = runner.audio, runner.state.hidden
    assert hidden.shape[1] >= audio_steps(audio)  # the windows read that many steps
    out = []
    with engine._contexts():
        for rows in rows_list:
            say(f"{mode}: the audio call over {rows} rows")
            windows = audio_windows(audio, rows)
            n = max(3, repeats)
            t, spread = median_time(lambda: audio.decode(hidden, windows), device, n, 1)  # noqa: B023
            how = (
                f"the engine's Decoder+Vocos call in {mode} over {rows} rows' streamed chunks: median of "
                f"{n} after 1 warm-up (it captures the graph), synchronised before each clock read"
            )
            out.append(
                AudioCallPoint(rows=rows, seconds=Measured(value=t, unit="s", how=how, spread=spread, n=n))
            )
    return out


def per_op_host(device: torch.device, ops: int = 20_000, rounds: int = 5) -> PerOpHost:
    """Host seconds per `x.add_(1)` on a 16-element tensor on `device` and on the CPU: the loop's
    wall without a synchronize inside it, so on a card it is the host's launch cost while the
    device keeps up (the H200's box: 9.96 against 3.29 us, docs/measurements/h200-2026-12-04)."""
    cpu = _per_op(torch.device("cpu"), ops, rounds)
    how = (
        f"a loop of {ops:,} x.add_(1) on a 16-element tensor, wall / ops, median of {rounds} rounds "
        "after one, no synchronize inside the loop"
    )
    if device.type == "cpu":  # the same op on the same tensors: 1 by definition, not measured twice
        return PerOpHost(
            device_op=cpu, cpu_op=cpu, factor=1.0, how=f"{how}; on a CPU the factor is 1 by definition"
        )
    dev = _per_op(device, ops, rounds)
    return PerOpHost(device_op=dev, cpu_op=cpu, factor=dev.value / cpu.value, how=how)


def _per_op(device: torch.device, ops: int, rounds: int) -> Measured:
    x = torch.zeros(16, device=device)
    times = []
    for _ in range(rounds + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(ops):
            x.add_(1)
        times.append((time.perf_counter() - t0) / ops)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    times = times[1:]  # the first round warms the allocator and the launch path
    q = statistics.quantiles(times, n=4)
    how = f"{device.type} tensor: host seconds per x.add_(1), median of {rounds} rounds of {ops:,}"
    return Measured(value=statistics.median(times), unit="s", how=how, spread=q[2] - q[0], n=rounds)
