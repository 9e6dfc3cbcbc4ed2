"""The engine's decode step as one callable: eager or torch.compile'd (CUDA graphs of it: graphs.py).

    step(codes (B, num_vq), positions (B,), length) -> hidden (B, H), logits (B, num_vq, V) float32

The eager step is model/step.py's `Step` over the engine's KV slots — the step the one-batch
pipeline and the ONNX export run. Sampling and the batch-state update follow on the device
(`model.step.advance`); graphs.py's `GraphedStep` captures all of it.

compile: one `torch.compile(dynamic=True)` of the whole step. Under continuous batching the batch
and the context length change every step; symbolic shapes cover them all with two graphs (batch 1
is specialised by dynamo, batch >= 2 is one graph), compiled once at start. Padding to static
buckets instead costs one compile per (batch, context) bucket — tens of compiles of the full
model — for no measured gain on CPU (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import time

import torch

from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.step import Outputs, Step, StepFn
from ttsperf.model.weights import ChatTTSModel


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
            for t in (slots.k, slots.v):
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
