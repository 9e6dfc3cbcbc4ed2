"""`ttsperf profile --host`: what each part of the engine's work costs the host, per size and mode,
and how many device kernels it launches — measured on a CPU, no GPU needed.

    ttsperf profile --host -o host.json

Host seconds: the engine's own code path (the runner's step, prefill and audio call:
engine/runner.py, engine/decode_step.py, engine/graphs.py, engine/audio.py) on the `skeleton` config
— chattts's op graph at widths where compute vanishes — one torch thread, median of repeats. What is
left is Python, the dispatcher and the ops' fixed cost: the work a GPU's host does per call.
Kernels: the same calls on `chattts` on the meta device (no compute), counted per
profile/kernels.py; compile counts Inductor's generated kernels for the skeleton's graph (the same
ops as chattts's).

Parts (the engine's device calls per step, engine/runner.py): decode = Runner.step (forward, code
heads, sampling, state update, the one device-to-host copy); prefill = Runner.prefill (the joining
rows in one forward and their first sample); audio = Runner.emit (one Decoder+Vocos call over
`rows` streamed chunks).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ttsperf import __version__
from ttsperf.engine.audio import BatchedAudio, Window
from ttsperf.engine.graphs import GraphedPrefill, GraphedStep
from ttsperf.engine.runner import Admission, Runner
from ttsperf.model.config import CHATTTS, SKELETON, ModelConfig
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import SamplingParams
from ttsperf.model.tokenizer import Tokenizer, build_synthetic_tokenizer
from ttsperf.model.weights import build_model
from ttsperf.profile import kernels as K
from ttsperf.profile.schema import (
    Counted,
    CPUInfo,
    HostPart,
    HostPoint,
    HostProfile,
    HostSection,
    Measured,
    ModeCost,
)

SIZES = (1, 4, 16, 64, 256)  # decode batch and audio rows
PREFILL_ROWS = (1, 4, 16, 64)  # 64 rows x ~25 tokens: the engine's 2048-token prefill budget
TEXT = "你好，这是一段测试文本。"  # a short prompt: prefill's host work, not its compute
MAX_PROMPT, MAX_NEW, CHUNK = 64, 160, 24
Progress = Callable[[str], None]


def cpu_info() -> CPUInfo:
    import os
    import platform

    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return CPUInfo(
        model=fields.get("model name") or platform.processor() or platform.machine(),
        flags=fields.get("flags", "").split(), cores=os.cpu_count(), threads=torch.get_num_threads(),
        torch=torch.__version__,
    )  # fmt: skip


# ---------------------------------------------------------------- the engine's runner, bare


def runner(cfg: ModelConfig, device: str, *, compile: bool = False, max_batch: int = max(SIZES)) -> Runner:
    """The engine's runner over synthetic weights (meta: no storage, for counting)."""
    meta = device == "meta"
    model = build_model(cfg, seed=None if meta else 0, device=device)
    pipe = Pipeline(
        model, Tokenizer(build_synthetic_tokenizer(cfg.gpt.num_text_tokens)), synthetic=True, device=device
    )
    report = {"compile": {"applied": compile, "note": ""}, "cuda_graphs": {"applied": False, "note": ""}}
    return Runner(
        pipe, max_batch=max_batch, max_prompt_tokens=MAX_PROMPT, max_new_tokens=MAX_NEW,
        lookahead_steps=4, switch_report=report, pcm=True,  # the call as serve's engine process runs it
    )  # fmt: skip


def admissions(n: int) -> list[Admission]:
    """n rows of a forced length: no row stops on a sampled EOS while it is timed."""
    params = [SamplingParams(seed=i) for i in range(n)]
    return [Admission(TEXT, "[speed_5]", p, i, MAX_NEW, True) for i, p in enumerate(params)]


def step_args(r: Runner) -> tuple[int, int, int]:
    """(batch, context, candidates) of the runner's next step, as Runner.step works them out."""
    s = r.state
    b = s.size
    return b, int(s.host.positions[:b].max()) + 1, r._top(slice(0, b))


def audio_windows(audio: BatchedAudio, rows: int) -> list[Window]:
    """`rows` rows emitting a mid-stream chunk at once (CHUNK new steps after a full left context),
    over hidden steps 0..audio_steps(audio)-1 of slots 0..rows-1."""
    steps = audio_steps(audio)
    emitted = (2 * (steps - CHUNK) - audio.lookahead_frames) * audio.hop
    return [audio.window(slot, steps, emitted, final=False) for slot in range(rows)]


def audio_steps(audio: BatchedAudio) -> int:
    return CHUNK + (audio.ctx_frames + 1) // 2 + CHUNK


@dataclass
class Timing:
    repeats: int
    warmup: int

    def __call__(self, fn: Callable[[], object], reset: Callable[[], object] = lambda: None) -> Measured:
        times = []
        for i in range(self.warmup + self.repeats):
            reset()
            t0 = time.perf_counter()
            fn()
            if i >= self.warmup:
                times.append(time.perf_counter() - t0)
        q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
        return Measured(
            value=statistics.median(times), unit="s", how=self.how, spread=q[2] - q[0], n=self.repeats
        )

    @property
    def how(self) -> str:
        return (
            f"median of {self.repeats} calls after {self.warmup} warm-up, {torch.get_num_threads()} torch "
            f"thread, {SKELETON.name} config (compute negligible: host work); spread = IQR"
        )


# ---------------------------------------------------------------- host seconds (skeleton, CPU)


def time_parts(r: Runner, timing: Timing, say: Progress) -> dict[str, dict[int, tuple[Measured, int | None]]]:
    """part -> size -> (host seconds, decode context) on runner `r`, every part at every size."""
    s, out = r.state, {"decode": {}, "prefill": {}, "audio": {}}
    for b in SIZES:
        say(f"host seconds: decode step, batch {b}")
        s.truncate(0)
        r.prefill(admissions(b))
        first = step_args(r)[1]
        seconds = timing(r.step)
        out["decode"][b] = seconds, first + timing.warmup + timing.repeats // 2
    for rows in PREFILL_ROWS:
        say(f"host seconds: prefill, {rows} rows")
        joining = admissions(rows)
        out["prefill"][rows] = timing(lambda: r.prefill(joining), reset=lambda: s.truncate(0)), None  # noqa: B023
    s.truncate(0)
    for rows in SIZES:
        say(f"host seconds: audio call, {rows} rows")
        windows = audio_windows(r.audio, rows)
        out["audio"][rows] = timing(lambda: r.emit(windows)), None  # noqa: B023
    return out


# ---------------------------------------------------------------- kernels (chattts on meta)


def count_until_host_read(r: Runner, fn: Callable[[], object]) -> int:
    """Kernels fn launches up to its first host read: on the meta device a read has no data to
    return and raises; what the device was asked to do before it is counted (the read's copy too)."""
    counter = K.OpCounter()
    try:
        with counter:
            fn()
    except (RuntimeError, NotImplementedError):
        if r.pipe.device.type != "meta":
            raise
    return sum(counter.kernels.values())


def kernels(fn: Callable[[], object]) -> int:
    return sum(K.count_ops(fn).kernels.values())


@dataclass
class Counts:
    """Kernels of one part at one size: the whole call in eager mode, the region compile compiles,
    the region CUDA graphs capture, and what a captured call still launches outside its graph."""

    eager: int
    compiled_region: int
    captured_region: int
    outside_graph: int


def count_decode(r: Runner, b: int) -> Counts:
    s = r.state
    s.truncate(0)
    r.prefill(admissions(b))
    batch, length, top = step_args(r)
    model = kernels(lambda: r.decode_step(s.codes[:b], s.positions[:b], length))
    captured = kernels(lambda: r.run_step(batch, length, top))
    eager = count_until_host_read(r, r.step)
    graphed = GraphedStep(r.run_step, s, MAX_PROMPT + MAX_NEW)
    _, length, top = step_args(r)
    graphed.graphs[graphed.key(b, length, top)] = lambda: None  # the replay itself: graph nodes
    r.graphed = graphed
    try:
        outside = count_until_host_read(r, r.step)  # the padding rows' writes, the host copy
    finally:
        r.graphed = None
    return Counts(eager, model, captured, outside)


def count_prefill(r: Runner, rows: int) -> Counts:
    """Eager: the whole call. Captured (GraphedPrefill): the regions its two graphs hold — the
    prompts' forward and code logits, and the rows' first codes, at the bucket's padded size —
    and what a replayed call still launches around them (the inputs' copy into the static
    buffer, the rows' settings). Not compiled (the engine does not compile its prefill)."""
    s, joining = r.state, admissions(rows)
    s.truncate(0)
    eager = kernels(lambda: r.prefill(joining))
    s.truncate(0)
    graphed = GraphedPrefill(
        r.prefill_forward, s, max_rows=rows, max_prompt=MAX_PROMPT, max_batch=r.max_batch,
        device=r.pipe.device, capture=False,
    )  # fmt: skip
    r.graphed_prefill = graphed
    try:
        r.prefill(joining)  # records its buckets: without capture, each is its padded call, eager
        s.truncate(0)
        bodies = [replay for _, _, replay in graphed.graphs.values()] + list(graphed.first_codes.values())
        assert len(bodies) == 2, "the profile's prompts fit one bucket"
        region = kernels(lambda: [body() for body in bodies])
        # the replays: their nodes are the regions', counted above
        graphed.graphs = {key: (static, at, lambda: None) for key, (static, at, _) in graphed.graphs.items()}
        graphed.first_codes = {key: lambda: None for key in graphed.first_codes}
        outside = kernels(lambda: r.prefill(joining))
    finally:
        r.graphed_prefill = None
        s.truncate(0)
    return Counts(eager, 0, region, outside)


def count_audio(r: Runner, rows: int) -> Counts:
    windows = audio_windows(r.audio, rows)
    eager = count_until_host_read(r, lambda: r.emit(windows))
    _, args = r.audio.inputs(windows, r.state.hidden)
    region = kernels(lambda: r.audio.device_part(*args))
    return Counts(eager, region, region, eager - region)


# ---------------------------------------------------------------- compile (skeleton, CPU)


def first_call_kernels(fn: Callable[[], object], last: int | None) -> int | None:
    """Run fn; if it made Inductor compile (or load from its cache), the kernels in the code, else
    `last` (the call reused the graph compiled before: dynamic shapes, one graph for batch >= 2).
    Not torch._inductor.utils.run_and_get_code: it resets dynamo, so every size would recompile."""
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    codes: list[str] = []
    with mock.patch.object(GraphLowering, "save_output_code", codes.append):
        fn()
    if not codes:
        return last
    return sum(sum(K.compiled_kernels(code).values()) for code in codes)


def time_compiled(
    r: Runner, timing: Timing, say: Progress
) -> dict[str, dict[int, tuple[Measured, int | None, int | None]]]:
    """part -> size -> (host seconds, decode context, Inductor kernels) on a compiled runner."""
    s, out = r.state, {"decode": {}, "audio": {}}
    last = None
    for b in SIZES:
        say(f"compile: decode step, batch {b}")
        s.truncate(0)
        r.prefill(admissions(b))
        last = first_call_kernels(r.step, last)
        first = step_args(r)[1]
        out["decode"][b] = timing(r.step), first + timing.warmup + timing.repeats // 2, last
    s.truncate(0)
    last = None
    for rows in SIZES:
        say(f"compile: audio call, {rows} rows")
        windows = audio_windows(r.audio, rows)
        last = first_call_kernels(lambda: r.emit(windows), last)  # noqa: B023
        out["audio"][rows] = timing(lambda: r.emit(windows)), None, last  # noqa: B023
    return out


# ---------------------------------------------------------------- the host section


EAGER_HOW = f"chattts on the meta device, aten ops per call (TorchDispatchMode): {K.EXCLUDED_HOW}"
GRAPHS_HOW = (
    "graph_nodes: the eager kernels of the region the engine captures (decode: the whole step, "
    "GraphedStep; prefill: the prompts' forward and code logits, GraphedPrefill; audio: the "
    "Decoder+Vocos device call); kernels: what is still launched outside it (padding rows' writes, "
    "the inputs' copy in, the prefill's first sample, the device-to-host copy out)"
)
NO_CUDA = "host seconds need a CUDA device (a captured call's host work is its replay)"


def compile_how() -> str:
    try:
        import triton  # noqa: F401

        where = "triton is importable, but Inductor targets the device it compiles for"
    except ImportError:
        where = "no triton here: Inductor cannot write CUDA/Triton code without it"
    return (
        f"Inductor's CPU kernels for the skeleton's graph ({where}; the CPU backend fuses much as "
        "Triton does, the count is an estimate of the GPU's): the calls in the generated code's "
        "call() - fused kernels plus extern kernels (mm, convolution, fft) - plus the eager kernels "
        "of chattts outside the compiled region"
    )


def _cost(
    seconds: Measured | None, kernels: int, how: str, note: str = "", nodes: int | None = None
) -> ModeCost:
    counted = Counted(value=kernels, counted_on=CHATTTS.name, how=how)
    graph = None if nodes is None else Counted(value=nodes, counted_on=CHATTTS.name, how=GRAPHS_HOW)
    return ModeCost(host_seconds=seconds, kernels=counted, graph_nodes=graph, note=note)


def point(part: str, size: int, eager, compiled, counts: Counts) -> HostPoint:
    seconds, context = eager
    modes = {"eager": _cost(seconds, counts.eager, EAGER_HOW)}
    if part == "prefill":  # the engine does not compile it
        note = "prefill is not compiled: it runs eagerly under --compile"
        modes["compile"] = _cost(seconds, counts.eager, EAGER_HOW, note)
    elif compiled is not None:
        c_seconds, _, inductor = compiled
        outside = counts.eager - counts.compiled_region
        modes["compile"] = _cost(c_seconds, inductor + outside, compile_how())
    captured = counts.captured_region
    modes["cuda_graphs"] = _cost(None, counts.outside_graph, GRAPHS_HOW, NO_CUDA, nodes=captured)
    return HostPoint(size=size, context=context, modes=modes)


PARTS = {
    "decode": (
        "batch",
        "Runner.step: decode forward, code heads, sampling, state update, one device-to-host copy",
    ),
    "prefill": (
        "rows",
        f"Runner.prefill: the joining rows' prompts ('{TEXT}') in one forward, their first sample",
    ),
    "audio": ("rows", f"Runner.emit: one Decoder+Vocos call over `rows` rows' {CHUNK}-step streamed chunks"),
}


def measure_host(
    *, repeats: int = 10, warmup: int = 3, compile: bool = True, progress: Progress | None = None
) -> HostProfile:
    """Every part, size and mode: host seconds on the skeleton, kernels of chattts."""
    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the engine's worker is one thread
    try:
        with torch.inference_mode():
            timing = Timing(repeats, warmup)
            eager = time_parts(runner(SKELETON, "cpu"), timing, say)
            say("kernels: chattts on the meta device")
            meta = runner(CHATTTS, "meta")
            counts = {
                "decode": {b: count_decode(meta, b) for b in SIZES},
                "prefill": {n: count_prefill(meta, n) for n in PREFILL_ROWS},
                "audio": {n: count_audio(meta, n) for n in SIZES},
            }
            compiled = time_compiled(runner(SKELETON, "cpu", compile=True), timing, say) if compile else {}
        cpu, how = cpu_info(), timing.how
    finally:
        torch.set_num_threads(threads)
    parts = {
        name: HostPart(
            what=what,
            size_name=size_name,
            points=[
                point(name, n, eager[name][n], compiled.get(name, {}).get(n), counts[name][n])
                for n in eager[name]
            ],
        )  # fmt: skip
        for name, (size_name, what) in PARTS.items()
    }
    section = HostSection(
        cpu=cpu.model_copy(update={"threads": 1}), timed_config=SKELETON.name, counted_config=CHATTTS.name,
        dtype="fp32", modes=["eager", "compile", "cuda_graphs"] if compile else ["eager", "cuda_graphs"],
        parts=parts, seconds_total=time.perf_counter() - t0,
        how=(
            f"host seconds: the engine's runner, {how}; kernels: {EAGER_HOW}; compile: {compile_how()}; "
            f"cuda_graphs: {GRAPHS_HOW}"
        ),
    )  # fmt: skip
    return HostProfile(ttsperf_version=__version__, host=section)


def render_host(h: HostSection):
    """The host section as one table that fits 80 columns: ms and kernels per part, size and mode."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"host work per call on {h.cpu.model[:40]} (1 thread)", box=box.SIMPLE_HEAD)
    table.add_column("part")
    table.add_column("size", justify="right", no_wrap=True)
    for mode in h.modes:
        label = {"eager": "eager", "compile": "compile", "cuda_graphs": "graphs"}[mode]
        table.add_column(f"{label}\nms", justify="right")
        table.add_column("kernels" if mode != "cuda_graphs" else "kernels\n+nodes", justify="right")
    for name, part in h.parts.items():
        for p in part.points:
            cells = [name, f"{part.size_name} {p.size}"]
            for mode in h.modes:
                c = p.modes.get(mode)
                if c is None:
                    cells += ["-", "-"]
                    continue
                ms = "-" if c.host_seconds is None else f"{1e3 * c.host_seconds.value:.1f}"
                k = f"{c.kernels.value}" + ("" if c.graph_nodes is None else f"+{c.graph_nodes.value}")
                cells += [ms, k]
            table.add_row(*cells)
    table.caption = (
        f"kernels counted on {h.counted_config}; ms timed on {h.timed_config}; {h.seconds_total:.0f} s"
    )
    return table
