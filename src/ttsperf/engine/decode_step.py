"""The engine's decode step and prefill forward, each one callable: eager or torch.compile'd (CUDA
graphs of them: graphs.py).

    step(codes (B, num_vq), positions (B,), length) -> hidden (B, H), logits (B, num_vq, V) float32
    step.prefill(ids (n, P, num_vq), text (n, P), last (n,), slots (n,)) -> hidden (n, H), logits

The eager step is model/step.py's `Step` over the engine's KV slots — the step the one-batch
pipeline and the ONNX export run. Sampling and the batch-state update follow on the device
(`model.step.advance`); graphs.py's `GraphedStep` captures all of it.

compile: one `torch.compile(dynamic=True)` of the whole step. Under continuous batching the batch
and the context length change every step; symbolic shapes cover them all with two graphs (batch 1
is specialised by dynamo, batch >= 2 is one graph), compiled once at start. Padding to static
buckets instead costs one compile per (batch, context) bucket — tens of compiles of the full
model — for no measured gain on CPU (docs/PERFORMANCE.md). The prefill is compiled the same way:
its rows and prompt length symbolic, two graphs (one row, and rows >= 2), compiled at start too.
"""

from __future__ import annotations

import time

import torch

from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.step import Outputs, Step, StepFn
from ttsperf.model.weights import ChatTTSModel


class DecodeStep:
    """The plain step and prefill, optionally compiled. `compiles` counts the step's graphs inductor
    built (recompiles included), `prefill_compiles` the prefill's, so a test and /healthz can see
    that shapes did not force a recompile."""

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
        self.compiles = self.prefill_compiles = 0
        self.compile_seconds = 0.0
        self._fn: StepFn = self.eager
        self._prefill = self.eager_prefill
        if compile:
            self._fn = torch.compile(self.eager, dynamic=dynamic, backend=self._inductor("compiles"))
            self._prefill = torch.compile(
                self.eager_prefill, dynamic=dynamic, backend=self._inductor("prefill_compiles")
            )
            # Only the batch and the context length vary. Left symbolic, the slots' fixed sizes
            # would be "duck-sized" with them (batch 16 == head_dim 16 -> one symbol -> a guard ->
            # a recompile the day they differ), so pin them.
            for t in slots.tensors():
                torch._dynamo.mark_static(t)

    def _inductor(self, counter: str):
        """inductor, counting each graph it builds in `counter`."""

        def backend(gm: torch.fx.GraphModule, example_inputs):
            from torch._inductor.compile_fx import compile_fx

            compiled = compile_fx(gm, example_inputs)
            # after: dynamo may abandon a graph mid-compile and restart its analysis
            setattr(self, counter, getattr(self, counter) + 1)
            return compiled

        return backend

    def __call__(self, codes: torch.Tensor, positions: torch.Tensor, length: int) -> Outputs:
        if self.compiled:
            torch._dynamo.mark_static(codes, 1)  # num_vq, not a batch size
        return self._fn(codes, positions, length)

    def eager_prefill(
        self, ids: torch.Tensor, text: torch.Tensor, last: torch.Tensor, slots: torch.Tensor
    ) -> Outputs:
        """The prefill's device part, no host read: padded prompts on the device
        (model.step.pad_prompts) into their KV slots -> last hidden states, code logits."""
        hidden = self.step.prefill_padded(ids, text, last, slots)
        return hidden, self.embed.code_logits(hidden)

    def prefill(
        self, ids: torch.Tensor, text: torch.Tensor, last: torch.Tensor, slots: torch.Tensor
    ) -> Outputs:
        if self.compiled:
            torch._dynamo.mark_static(ids, 2)  # num_vq, not a prompt length
        return self._prefill(ids, text, last, slots)

    def compile_now(self, report: dict) -> None:
        """Warm up, noting the seconds in the switch's report; if compiling fails (no C compiler,
        an unsupported op), run eagerly and say why there instead of failing the server."""
        try:
            seconds = self.warm_up()
            report["note"] += f"; compiled in {seconds:.1f} s at start"
        except Exception as exc:  # noqa: BLE001 - any failure of the compiler stack
            self._fn, self._prefill, self.compiled = self.eager, self.eager_prefill, False
            why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
            report.update(applied=False, note=f"failed at start, running eagerly: {why}")

    def warm_up(self) -> float:
        """Compile now, not on the first request: the step and the prefill at batch (rows) 1 and 2
        (every batch >= 2 shares that graph), at a short context (prompt). Writes only free slots
        0..1 before any request. -> seconds."""
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
            # the prefill's inputs are made per call, in the worker's mode, as these are
            prompt = length + 4
            ids = torch.zeros(batch, prompt, num_vq, dtype=torch.long, device=device)
            text = torch.ones(batch, prompt, dtype=torch.bool, device=device)
            last = torch.full((batch,), prompt - 1, dtype=torch.long, device=device)
            self.prefill(ids, text, last, torch.arange(batch, device=device))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.compile_seconds = time.perf_counter() - t0
        return self.compile_seconds
