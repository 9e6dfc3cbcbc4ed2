"""The engine's decode step as one callable: eager, torch.compile'd, or replayed from CUDA graphs.

    step(codes (B, num_vq), positions (B,), length) -> hidden (B, H), logits (B, num_vq, V) float32

The eager step is model/step.py's `Step` over the engine's KV slots — the step the one-batch
pipeline and the ONNX export run. Sampling and the batch-state update follow on the device
(`model.step.advance`); `GraphedStep` captures all of it.

compile: one `torch.compile(dynamic=True)` of the whole step. Under continuous batching the batch
and the context length change every step; symbolic shapes cover them all with two graphs (batch 1
is specialised by dynamo, batch >= 2 is one graph), compiled once at start. Padding to static
buckets instead costs one compile per (batch, context) bucket — tens of compiles of the full
model — for no measured gain on CPU (docs/PERFORMANCE.md).

cuda_graphs: CUDA graphs of the whole step (decode + sampling + state update) captured per
(batch bucket, context bucket, candidates) over the engine's preallocated KV slots and batch
tensors. Neither ever moves, so a graph reads and writes them in place, with no copies. Batches
above the largest captured bucket run eagerly (a large batch amortises the launches; its graphs
would only cost memory). Not
`mode="reduce-overhead"`: its graph trees re-record for every new shape and copy inputs whose
address is not static, and our context length changes every step.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.step import Outputs, Step, StepFn
from ttsperf.model.weights import ChatTTSModel

StepRun = Callable[[int, int, int], None]  # (batch, context length, candidates): the whole step


class DecodeStep:
    """The plain step, optionally compiled. `compiles` counts graphs inductor built (recompiles
    included), so a test and /healthz can see that shapes did not force a recompile."""

    def __init__(
        self,
        model: ChatTTSModel,
        forward: SlotForward,
        slots: KVSlots,
        *,
        compile: bool = False,
        dynamic: bool = True,  # False: one graph per shape (benchmarks/compile_cpu.py compares)
    ):
        self.embed, self.forward, self.slots = model.embed, forward, slots
        self.step = Step(model.embed, forward, slots)  # also the runner's prefill
        self.eager: StepFn = self.step.__call__
        self.compiled = compile
        self.compiles = 0
        self.compile_seconds = 0.0
        self._fn: StepFn = self.eager
        if compile:
            self._fn = torch.compile(self.eager, dynamic=dynamic, backend=self._inductor)
            # Only the batch and the context length vary. Left symbolic, the slots' fixed sizes
            # would be "duck-sized" with them (batch 16 == head_dim 16 -> one symbol -> a guard ->
            # a recompile the day they differ), so pin them.
            for t in (*slots.k, *slots.v):
                torch._dynamo.mark_static(t)

    def _inductor(self, gm: torch.fx.GraphModule, example_inputs):
        from torch._inductor.compile_fx import compile_fx

        compiled = compile_fx(gm, example_inputs)
        self.compiles += 1  # after: dynamo may abandon a graph mid-compile and restart its analysis
        return compiled

    def __call__(self, codes: torch.Tensor, positions: torch.Tensor, length: int) -> Outputs:
        if self.compiled:
            torch._dynamo.mark_static(codes, 1)  # num_vq, not a batch size
        return self._fn(codes, positions, length)

    def compile_now(self, report: dict) -> None:
        """Warm up, noting the seconds in the switch's report; if compiling fails (no C compiler,
        an unsupported op), run eagerly and say why there instead of failing the server."""
        try:
            seconds = self.warm_up()
            report["note"] += f"; compiled in {seconds:.1f} s at start"
        except Exception as exc:  # noqa: BLE001 - any failure of the compiler stack
            self._fn, self.compiled = self.eager, False
            why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
            report.update(applied=False, note=f"failed at start, running eagerly: {why}")

    def warm_up(self) -> float:
        """Compile now, not on the first request: batch 1 and batch 2 (every batch >= 2 shares that
        graph) at a short context. Writes only free slots 0..1 before any request. -> seconds."""
        if not self.compiled:
            return 0.0
        t0 = time.perf_counter()
        device = self.slots.k[0].device
        num_vq = len(self.embed.emb_code)
        # distinct sizes: dynamo would tie equal sizes (batch == length) to one symbol and guard on it
        for batch, length in ((1, 3), (2, 5))[: min(2, self.slots.max_batch)]:
            # normal tensors, as the engine's batch state is: an inference tensor is a guard miss
            with torch.inference_mode(False):
                codes = torch.zeros(batch, num_vq, dtype=torch.long, device=device)
                positions = torch.full((batch,), length - 1, dtype=torch.long, device=device)
            self(codes, positions, length)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.compile_seconds = time.perf_counter() - t0
        return self.compile_seconds


def buckets(limit: int, first: int) -> list[int]:
    """first, 2*first, 4*first, ... below `limit`, then `limit` itself."""
    out, b = [], first
    while b < limit:
        out.append(b)
        b *= 2
    return [*out, limit]


def pick(value: int, sizes: list[int]) -> int | None:
    return next((s for s in sizes if s >= value), None)


def capture(
    run: Callable[[], object], pool, before: Callable[[], object] = lambda: None
) -> tuple[torch.cuda.CUDAGraph, object]:
    """Warm `run` up twice on a side stream (cuBLAS workspaces, compile), then record it in a CUDA
    graph sharing memory `pool`; `before` runs ahead of each (puts state back). -> (graph, output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            before()
            run()
    torch.cuda.current_stream().wait_stream(side)
    before()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = run()
    return graph, out


class GraphedStep:
    """CUDA graphs of the whole step — decode, sampling, state update — one per (batch bucket,
    context bucket, candidates), all captured at start (`warm`: ready means warm), any other on
    first use. `capture=False` runs each bucket's padded step eagerly instead (the padding and
    the bucket bookkeeping checked on a CPU). `run(b, length, top)` is the eager step
    (Runner.run_step); it reads and writes only the persistent batch tensors and the KV slots,
    whose addresses never change, so a replay needs no input copies and no output clones.

    Rows past the live batch are padding: free slots at position 0, marked done so they take
    nothing (a free slot's next prefill overwrites it); their outputs are never read."""

    # Up to 256 rows, as ChatTTS's own vLLM port captures: a 0.28 B model's step is launch-bound
    # well past batch 64 on a data-centre GPU, so eager steps there would give the overhead back.
    def __init__(
        self, run: StepRun, state, max_len: int, *, max_graph_batch: int = 256, capture: bool = True
    ):
        self.run, self.state, self.capture = run, state, capture
        max_batch = state.codes.shape[0]
        self.batch_sizes = buckets(min(max_batch, max_graph_batch), 1)
        self.context_sizes = buckets(max_len, 256)
        self.graphs: dict[tuple[int, int, int], Callable[[], None]] = {}
        self.eager_steps = 0
        self._pool = None

    def reachable(self, tops: list[int]) -> list[tuple[int, int, int]]:
        """Every graph a step can replay: each batch and context bucket, each candidates width."""
        return [(bb, lb, top) for bb in self.batch_sizes for lb in self.context_sizes for top in tops]

    def warm(self, tops: list[int]) -> int:
        """Capture every reachable graph now -> how many were new."""
        new = [key for key in self.reachable(tops) if key not in self.graphs]
        for key in new:
            self.graphs[key] = self._capture(*key)
        return len(new)

    def key(self, b: int, length: int, top: int) -> tuple[int, int, int] | None:
        """The graph a step replays: (batch bucket, context bucket, candidates); None: too large."""
        bb, lb = pick(b, self.batch_sizes), pick(length, self.context_sizes)
        return None if bb is None or lb is None else (bb, lb, top)

    def __call__(self, b: int, length: int, top: int) -> None:
        key = self.key(b, length, top)
        if key is None:
            self.eager_steps += 1
            return self.run(b, length, top)
        bb = key[0]
        self.state.positions[b:bb] = 0
        self.state.done[b:bb] = True
        replay = self.graphs.get(key)
        if replay is None:
            replay = self.graphs[key] = self._capture(*key)
        replay()

    def _capture(self, bb: int, lb: int, top: int) -> Callable[[], None]:
        """Warm up on a side stream (cuBLAS workspaces, compile), then record, then put the batch
        state back as it was: warm-up and recording each ran the step once. (Their K/V and kept
        hidden-state writes repeat at the same places with the same inputs: no restoring.)"""
        if not self.capture:
            return lambda: self.run(bb, lb, top)
        saved = [t[:bb].clone() for t in self._restorable()]
        graph, _ = capture(lambda: self.run(bb, lb, top), self._pool, lambda: self._restore(saved, bb))
        self._pool = graph.pool()
        self._restore(saved, bb)
        return graph.replay

    def _restorable(self) -> list[torch.Tensor]:
        return [t for t in self.state.tensors() if t is not self.state.hidden]

    def _restore(self, saved: list[torch.Tensor], bb: int) -> None:
        for t, copy in zip(self._restorable(), saved, strict=True):
            t[:bb].copy_(copy)
