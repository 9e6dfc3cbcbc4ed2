"""The decode step's switches: torch.compile (real, inductor on this CPU) and CUDA graphs (bucketing
and padding checked here with the capture replaced; the capture itself needs a GPU and is checked by
benchmarks/gpu_check.py).

Tokens are compared exactly: every sampled code of every request, greedy, under continuous batching
(requests of different lengths join and leave, so the batch and context change every step), and
the engine's against the one-batch pipeline's (the same step, model/step.py).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from ttsperf.engine.decode_step import DecodeStep
from ttsperf.engine.engine import Engine, EngineConfig
from ttsperf.engine.graphs import GraphedStep, buckets, pick
from ttsperf.engine.switches import Switches
from ttsperf.engine.types import SynthRequest, SynthResult
from ttsperf.model.config import TINY
from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import SamplingParams

GREEDY = SamplingParams(top_k=1)
TEXTS = [
    "你好，这是一段用于压测的文本。",
    "Hello world, this is a test.",
    "今天天气很好。",
    "A longer English sentence about weather and GPUs, long enough to outlive the others.",
    "好。",
]


def record_tokens(engine: Engine) -> dict[str, list[list[int]]]:
    """Every code the engine takes, per request text, in order (wraps the runner's and the batch
    state's own calls)."""
    runner, state = engine.runner, engine.runner.state
    seen: dict[str, list[list[int]]] = {}
    text_of: dict[int, str] = {}  # slot -> request text
    prefill, accept, remove = runner.prefill, state.accept, runner.remove

    def prefilling(rows):
        first = state.size
        text_of.update({first + i: r.text for i, r in enumerate(rows)})
        return prefill(rows)

    def accepting(sl, hidden, logits, top):
        # a slice of rows, or (the graphed prefill's first codes) their slots, padding rows after them
        slots = list(range(sl.start, sl.stop)) if isinstance(sl, slice) else sl.tolist()
        before = state.steps[sl].clone()
        accept(sl, hidden, logits, top)
        took = (state.steps[sl] > before).tolist()
        for slot, codes, took_one in zip(slots, state.codes[sl].tolist(), took, strict=True):
            if took_one and slot < state.size:  # past the live rows: a padding row, a free slot
                seen.setdefault(text_of[slot], []).append(codes)

    def removing(slots):
        moves = remove(slots)
        for src, dst in moves:
            text_of[dst] = text_of[src]
        return moves

    runner.prefill, state.accept, runner.remove = prefilling, accepting, removing
    return seen


def serve_all(engine: Engine, sampling=lambda i: GREEDY) -> dict[str, list[list[int]]]:
    seen = record_tokens(engine)
    engine.start()
    try:
        handles = [engine.submit(SynthRequest(t, sampling(i))) for i, t in enumerate(TEXTS)]
        finals = [h.collect(timeout=600)[1] for h in handles]
    finally:
        engine.stop(drain=False, timeout=30)
    assert all(isinstance(f, SynthResult) for f in finals), finals
    assert engine.stats.batch_size.counts[0] < engine.stats.batch_size.n  # steps ran batch > 1
    return seen


def new_engine(switches: Switches | None = None, max_batch: int = 4) -> Engine:
    # a fresh model per engine: compile must not leak into the eager reference
    return Engine(Pipeline.synthetic_model(TINY, seed=0), EngineConfig(max_batch=max_batch), switches)


@pytest.fixture(scope="module")
def eager_tokens() -> dict[str, list[list[int]]]:
    return serve_all(new_engine())


@pytest.mark.parametrize("seed", [3, 2**40 + 1])
def test_the_engine_takes_the_pipelines_codes(seed):
    """One decode step (model/step.py) under both: every seeded, sampled request takes exactly the
    codes the one-batch pipeline samples for it alone, though the engine prefills it padded with
    others and decodes it beside rows that join and leave."""
    engine = new_engine()
    seen = serve_all(engine, lambda i: SamplingParams(seed=seed + i))
    for i, text in enumerate(TEXTS):
        gen = engine.pipe.generate([text], SamplingParams(seed=seed + i))[0]
        assert seen[text] == gen.codes.tolist(), text


@pytest.mark.slow
def test_compiled_step_gives_the_same_tokens_without_recompiling(eager_tokens):
    engine = new_engine(Switches(compile=True))
    compiled = serve_all(engine)
    assert compiled == eager_tokens  # exact, every code of every request
    info = engine.describe()
    report = info["switches"]["compile"]
    assert report["applied"] is True and "compiled in" in report["note"]
    # batch 1 and batch >= 2, compiled at start; varying batch and context compiled nothing more;
    # the prefill's too, rows joining together and alone, with prompts of several lengths
    assert info["decode_step"]["compiled_graphs"] == 2
    assert info["prefill_compiled_graphs"] == 2
    assert info["decode_step"]["compile_seconds"] > 0


@pytest.mark.slow
def test_compiled_step_and_prefill_write_the_kv_slots_in_place_and_compile_once():
    """Written through a layer's view (k[layer][rows, :, positions]), the compiled step and prefill
    copied that layer's whole K and V out and back every call: chattts on this CPU, 1,062 ms a
    compiled step against 42.5 eager (benchmarks/compile_cpu.py). What inductor generates must
    allocate nothing of the slots' length (a prime, so no other size matches it). And a layer's
    index, were it a view, would have its storage offset tied to an equal prompt length (here
    layer 7 and 7 tokens), so the next prompt length would recompile."""
    cfg = replace(TINY, gpt=replace(TINY.gpt, num_hidden_layers=8))
    g, slot_tokens = cfg.gpt, 1031
    pipe = Pipeline.synthetic_model(cfg, seed=0)
    slots = KVSlots(
        g.num_hidden_layers, 4, g.num_key_value_heads, slot_tokens, g.hidden_size // g.num_attention_heads,
        dtype=torch.float32, device=pipe.device,
    )  # fmt: skip
    step = DecodeStep(pipe.model, SlotForward(pipe.model.gpt), slots, compile=True)

    def prompts(rows: int, length: int) -> tuple[torch.Tensor, ...]:
        ids, text = (
            torch.zeros(rows, length, g.num_vq, dtype=torch.long),
            torch.ones(rows, length, dtype=torch.bool),
        )
        return ids, text, torch.full((rows,), length - 1), torch.arange(rows)

    with torch.inference_mode():
        codes = torch.zeros(4, g.num_vq, dtype=torch.long)
        # one call: run_and_get_code resets dynamo's caches first
        _, code = run_and_get_code(
            lambda: (step(codes[:3], torch.tensor([4, 6, 9]), 10), step.prefill(*prompts(2, 7)))
        )
        for rows, length in ((2, 8), (3, 12), (4, 5)):
            step.prefill(*prompts(rows, length))
        step(codes[:2], torch.tensor([3, 7]), 8)
        step(codes, torch.tensor([1, 2, 3, 29]), 30)
    assert len(code) == 2  # both compiled here
    allocations = re.findall(r"empty_strided\w*\(\(([^)]*)\)", "\n".join(code))
    assert allocations and not [a for a in allocations if str(slot_tokens) in a.replace(" ", "").split(",")]
    assert (step.compiles, step.prefill_compiles) == (1, 1)  # rows >= 2: one graph each, whatever the lengths


def test_cuda_graphs_on_cpu_say_why_and_the_engine_runs(eager_tokens):
    engine = new_engine(Switches(cuda_graphs=True))
    report = engine.describe()["switches"]["cuda_graphs"]
    assert report == {
        "value": True,
        "applied": False,
        "note": "not applicable on cpu: CUDA graphs need a CUDA device",
    }
    assert engine.runner.graphed is None
    assert serve_all(engine) == eager_tokens


@pytest.mark.parametrize("max_graph_batch", [4, 2])
def test_graph_buckets_pad_without_changing_tokens(eager_tokens, max_graph_batch):
    engine = new_engine(max_batch=4)
    runner = engine.runner
    # the one CUDA-only part, record and replay, replaced by running the whole step on the same
    # persistent tensors at the same bucketed shapes: the rest is the real code
    graphed = GraphedStep(
        runner.run_step, runner.state, runner.slots.max_len, max_graph_batch=max_graph_batch, capture=False
    )
    runner.graphed = graphed
    assert serve_all(engine) == eager_tokens
    assert graphed.batch_sizes == ([1, 2, 4] if max_graph_batch == 4 else [1, 2])
    assert any(b == 4 for b, _, _ in graphed.graphs) == (max_graph_batch == 4)
    assert all(length in graphed.context_sizes for _, length, _ in graphed.graphs)
    # batches of 3 and 4 are above the largest bucket of 2: they ran eagerly
    assert (graphed.eager_steps > 0) == (max_graph_batch == 2)


def test_the_whole_graphed_path_takes_the_eager_tokens(eager_tokens):
    """Step, prefill and audio through their buckets (each padded call run eagerly on a CPU)."""
    engine = Engine(
        Pipeline.synthetic_model(TINY, seed=0), EngineConfig(max_batch=4, graphs_without_capture=True)
    )
    assert serve_all(engine) == eager_tokens
    prefill = engine.runner.graphed_prefill
    assert len(prefill.graphs) == 15  # warmed at start, then replayed: some calls' buckets would
    assert prefill.eager_calls < engine.stats.prefill_seconds.n  # pass slot 3 and run eagerly


def test_buckets():
    assert buckets(16, 1) == [1, 2, 4, 8, 16]
    assert buckets(12, 1) == [1, 2, 4, 8, 12]
    assert buckets(2560, 256) == [256, 512, 1024, 2048, 2560]
    assert buckets(100, 256) == [100]
    assert pick(3, [1, 2, 4]) == 4 and pick(4, [1, 2, 4]) == 4 and pick(5, [1, 2, 4]) is None


def test_compile_applies_with_int8():
    """torchao's int8 weights are tensor subclasses dynamo traces (by hand: 2 graphs, requests
    served; the compile takes over a minute here, so tests only check what the switches report)."""
    engine = new_engine(Switches(compile=True, int8=True), max_batch=2)
    switches = engine.describe()["switches"]
    assert switches["compile"]["applied"] is True and switches["int8"]["applied"] is True
    assert engine.decode_step.compiled is True


def test_a_compile_that_fails_at_start_serves_eagerly_and_says_why(monkeypatch, eager_tokens):
    engine = new_engine(Switches(compile=True))

    def no_compiler():
        raise RuntimeError("InductorError: CppCompileError: C++ compile error\nmore lines")

    monkeypatch.setattr(engine.decode_step, "warm_up", no_compiler)
    assert serve_all(engine) == eager_tokens
    report = engine.describe()["switches"]["compile"]
    assert report["applied"] is False
    assert report["note"] == (
        "failed at start, running eagerly: RuntimeError: InductorError: CppCompileError: C++ compile error"
    )
    assert engine.describe()["decode_step"]["compiled_graphs"] == 0
