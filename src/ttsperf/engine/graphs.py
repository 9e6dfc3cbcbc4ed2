"""CUDA graphs of the engine's three device calls, captured at start (ready means warm) and
replayed: the decode step (`GraphedStep`: decode + sampling + state update, per (batch bucket,
context bucket, candidates)), the prefill (`GraphedPrefill`: the joining prompts' forward into
their KV slots and their code logits, per (rows, prompt length) bucket) and the audio call
(`GraphedAudio`: Decoder+Vocos, per (rows, steps, frames) bucket). All pad to doubling size
buckets (`buckets`) and share one capture (`capture`).

The step's graphs are captured over the engine's preallocated KV slots and batch tensors. Neither
ever moves, so a graph reads and writes them in place, with no copies. Batches above the largest
captured bucket run eagerly (a large batch amortises the launches; its graphs would only cost
memory). Not `mode="reduce-overhead"`: its graph trees re-record for every new shape and copy
inputs whose address is not static, and our context length changes every step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ttsperf.engine.audio import SynthFn
from ttsperf.model.step import Outputs, pad_prompts
from ttsperf.model.transfer import pack, to_device, unpack

StepRun = Callable[[int, int, int], None]  # (batch, context length, candidates): the whole step


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
    run: Callable[[], object],
    pool,
    before: Callable[[], object] = lambda: None,
    stream: torch.cuda.Stream | None = None,
) -> tuple[torch.cuda.CUDAGraph, object]:
    """Warm `run` up twice on a side stream (cuBLAS workspaces, compile), then record it in a CUDA
    graph sharing memory `pool`; `before` runs ahead of each (puts state back). `stream`: warm up
    and capture on it (default: a new side stream, then PyTorch's one capture stream). Graphs
    captured on one stream share its cuBLAS workspace whatever their pools (pytorch#193402), so
    graphs that replay at the same time need capture streams of their own. -> (graph, output)."""
    side = stream or torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            before()
            run()
    torch.cuda.current_stream().wait_stream(side)
    before()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=stream):
        out = run()
    return graph, out


class GraphedStep:
    """CUDA graphs of the whole step — decode, sampling, state update — one per (batch bucket,
    context bucket, candidates), all captured at start (`warm`: ready means warm), any other on
    first use. `capture=False` runs each bucket's padded step eagerly instead (the padding and
    the bucket bookkeeping checked on a CPU). `run(b, length, top)` is the eager step
    (Runner.run_step); it reads and writes only the persistent batch tensors and the KV slots,
    whose addresses never change, so a replay needs no input copies and no output clones.

    Rows past the live batch are padding: free slots, as a row that left or a warm-up left them.
    Nothing resets them: each writes only its own slot, its position clamped inside it
    (`Rows.last_position`), and a free slot's next prefill overwrites what it holds; their
    outputs are never read."""

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


PrefillRun = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], Outputs]


class Joined(NamedTuple):
    """What a prefill graph of some rows left for the first codes' graph of as many rows: its
    rows' last hidden states, their code logits and their slots (static: one of each per rows)."""

    hidden: torch.Tensor
    logits: torch.Tensor
    slots: torch.Tensor


class GraphedPrefill:
    """CUDA graphs of the prefill: its device part (Runner.prefill_forward: the prompts'
    embedding, every layer writing its K/V into the rows' slots, the last hidden states and their
    code logits), one per (rows, prompt length) bucket, and the joining rows' first codes (the
    state's `accept` over their slots: sampling, the first hidden state, the rows' history), one
    per (rows, candidates) bucket; all captured at start (`warm`), any other on first use.
    Eagerly, a call of a few rows launches ~850 kernels on chattts (the H200's prefill took 31-46%
    of the engine's wall), ~90 of them the first codes'; `join` replays both graphs, with one
    input copy.

    The inputs (`pad_prompts`' ids, text mask, last positions, slots) are padded on the host to
    the bucket and go in one packed copy into the bucket's static buffer, which does not make the
    host wait (pinned, non-blocking, as model/transfer.py's). Each graph writes the KV slots its
    static `slots` names, so one graph serves any free slots; it leaves its outputs and slots in
    its rows' `Joined` buffers, which the first codes' graphs read. Padding rows are empty prompts
    written into the free slots after the real rows, sampled there too (a free slot's next prefill
    overwrites them); a call whose bucket would pass the last slot, or longer than the largest
    bucket, runs eagerly. `capture=False` runs the padded calls eagerly instead (the padding
    checked on a CPU)."""

    def __init__(
        self,
        run: PrefillRun,
        state,
        *,
        max_rows: int,
        max_prompt: int,
        max_batch: int,
        device: torch.device,
        capture: bool = True,
    ):
        self.run, self.state, self.device, self.capture = run, state, device, capture
        self.max_batch = max_batch
        self.row_sizes = buckets(min(max_rows, max_batch), 1)
        self.prompt_sizes = buckets(max_prompt, 32)
        self.graphs: dict[tuple[int, int], tuple[torch.Tensor, list[int], Callable[[], object] | None]] = {}
        self.first_codes: dict[tuple[int, int], Callable[[], object]] = {}  # (rows, candidates)
        self.joined: dict[int, Joined] = {}  # rows -> the last prefill graph's outputs and slots
        self.eager_calls = 0
        self._pool = None

    def reachable(self) -> list[tuple[int, int]]:
        return [(rows, length) for rows in self.row_sizes for length in self.prompt_sizes]

    def warm(self, num_vq: int, tops: list[int] = ()) -> int:
        """Capture every bucket now, into the first slots (before any request: all free), and the
        first codes' graphs for every rows bucket and candidates width in `tops`
        -> how many prefill graphs were new."""
        new = [key for key in self.reachable() if key not in self.graphs]
        for rows, length in new:
            empty = [(torch.zeros(1, 1, num_vq, dtype=torch.long), None, torch.zeros(1, 1, dtype=torch.bool))]
            self._call(empty, 0, rows, length)
        for key in [(rows, top) for rows in self.row_sizes for top in tops]:
            if key not in self.first_codes:
                self.first_codes[key] = self._record_first_codes(*key)
        return len(new)

    def key(self, n: int, longest: int, first: int) -> tuple[int, int] | None:
        """The graph a call of n prompts into slots first.. replays; None: it runs eagerly."""
        rows, length = pick(n, self.row_sizes), pick(longest, self.prompt_sizes)
        return None if rows is None or length is None or first + rows > self.max_batch else (rows, length)

    def __call__(self, prompts: list[tuple[torch.Tensor, ...]], first: int) -> Outputs:
        """Prompts (Pipeline.prompt's, on the host) into slots first..first+n-1 -> each one's last
        hidden state (n, H) and code logits (n, num_vq, V): views of its rows' static outputs,
        valid until the next call."""
        key = self.key(len(prompts), max(ids.shape[1] for ids, _, _ in prompts), first)
        if key is None:
            self.eager_calls += 1
            return self.run(*to_device(self.device, *pad_prompts(prompts, first)))
        self._call(prompts, first, *key)
        joined = self.joined[key[0]]
        return joined.hidden[: len(prompts)], joined.logits[: len(prompts)]

    def join(self, prompts: list[tuple[torch.Tensor, ...]], first: int, top: int) -> None:
        """The prefill and the first codes of rows that the state holds at slots first.. already
        (their settings written): two replays. `top`: the candidates width (sampling.width)."""
        n = len(prompts)
        key = self.key(n, max(ids.shape[1] for ids, _, _ in prompts), first)
        if key is None:
            hidden, logits = self(prompts, first)  # eager
            return self.state.accept(slice(first, first + n), hidden, logits, top)
        self._call(prompts, first, *key)
        replay = self.first_codes.get((key[0], top))
        if replay is None:
            replay = self.first_codes[(key[0], top)] = self._record_first_codes(key[0], top)
        replay()

    def _call(self, prompts, first: int, rows: int, length: int) -> None:
        host = pad_prompts(prompts, first, rows, length)
        packed, offsets = pack(host, pin=self.device.type == "cuda")
        if (rows, length) not in self.graphs:  # a static buffer; recorded below, with these inputs in it
            static = torch.empty(packed.numel(), dtype=torch.uint8, device=self.device)
            self.graphs[(rows, length)] = static, offsets, None
        static, offsets, replay = self.graphs[(rows, length)]
        static.copy_(packed, non_blocking=True)
        if replay is None:
            replay = self._record(rows, unpack(static, offsets, host))
            self.graphs[(rows, length)] = static, offsets, replay
        replay()

    def _record(self, rows: int, inputs: list[torch.Tensor]) -> Callable[[], object]:
        """Warm-up and recording run the call on the inputs in the static buffer: writes at the
        same slots with the same values as the replay that follows."""

        def run() -> None:
            hidden, logits = self.run(*inputs)
            if rows not in self.joined:  # made at the first warm-up run, outside the capture
                self.joined[rows] = Joined(
                    torch.empty_like(hidden), torch.empty_like(logits), inputs[3].clone()
                )
            joined = self.joined[rows]
            for out, value in zip(joined, (hidden, logits, inputs[3]), strict=True):
                out.copy_(value)

        if not self.capture:
            return run
        graph, _ = capture(run, self._pool)
        self._pool = graph.pool()
        return graph.replay

    def _record_first_codes(self, rows: int, top: int) -> Callable[[], object]:
        """The first codes' graph over the rows' `Joined` buffers. Its warm-up and recording each
        sample the rows at those slots, so the rows' state there is put back before each and after
        (rows joining now hold them, on first use)."""
        hidden, logits, slots = self.joined[rows]

        def run() -> None:
            self.state.accept(slots, hidden, logits, top)

        if not self.capture:
            return run
        restorable = [t for t in self.state.tensors() if t is not self.state.hidden]
        saved = [t[slots] for t in restorable]

        def restore() -> None:
            for t, copy in zip(restorable, saved, strict=True):
                t[slots] = copy

        graph, _ = capture(run, self._pool, restore)
        self._pool = graph.pool()
        restore()
        return graph.replay


class GraphedAudio:
    """The audio call's device part (BatchedAudio.device_part) replayed from CUDA graphs, one per
    (rows, steps, frames) bucket over the engine's persistent `hidden`, all captured at start
    (`warm`), any other on first use, with
    the decode step's mechanism (`capture`, above). Padding rows decode nothing (0 steps,
    0 frames: masked to silence); padding steps and frames are masked as a shorter row's are in a
    shared call, so each real row's samples are unchanged. Larger calls, or another `hidden`, run
    eagerly. `capture=False` runs the padded call eagerly instead (the padding checked on a CPU)."""

    def __init__(self, synthesize: SynthFn, max_rows: int, max_steps: int, *, capture: bool = True):
        self.synthesize, self.capture = synthesize, capture
        self.row_sizes, self.step_sizes = buckets(max_rows, 1), buckets(max_steps, 32)
        self.frame_sizes = buckets(2 * max_steps, 64)
        self.graphs: dict[tuple, tuple[torch.Tensor, Callable[[], torch.Tensor]]] = {}
        self.eager_calls = 0
        self._pool = None
        self._stream: torch.cuda.Stream | None = None  # where its graphs are captured (_record)

    def reachable(self) -> list[tuple[int, int, int]]:
        """Every (rows, steps, frames) bucket a call can use: a row's frames are at most twice
        its steps, so a call's frame bucket is at most the one of twice its step bucket."""
        return [
            (rows, steps, frames)
            for rows in self.row_sizes
            for steps in self.step_sizes
            for frames in self.frame_sizes
            if frames <= pick(2 * steps, self.frame_sizes)
        ]

    def warm(self, hidden: torch.Tensor) -> int:
        """Capture every reachable bucket over `hidden` now -> how many were new."""
        new = [sizes for sizes in self.reachable() if (hidden.data_ptr(), *sizes) not in self.graphs]
        for sizes in new:
            self.graphs[(hidden.data_ptr(), *sizes)] = self._record(hidden, *sizes)
        return len(new)

    def __call__(self, hidden: torch.Tensor, index: torch.Tensor, steps: int, frames: int) -> torch.Tensor:
        n = index.shape[1]
        sizes = pick(n, self.row_sizes), pick(steps, self.step_sizes), pick(frames, self.frame_sizes)
        if None in sizes:
            self.eager_calls += 1
            return self.synthesize(hidden, index, steps, frames)
        key = (hidden.data_ptr(), *sizes)
        if key not in self.graphs:
            self.graphs[key] = self._record(hidden, *sizes)
        static, replay = self.graphs[key]
        static.zero_()
        static[:, :n] = index
        return replay()[:n]

    def _record(self, hidden: torch.Tensor, rows: int, steps: int, frames: int):
        """-> the bucket's static index and its replay (which returns the static output)."""
        static = torch.zeros(5, rows, dtype=torch.long, device=hidden.device)

        def run() -> torch.Tensor:
            return self.synthesize(hidden, static, steps, frames)

        if not self.capture:
            return static, run
        # its own capture stream: an audio call replays beside a decode step (one step ahead)
        self._stream = self._stream or torch.cuda.Stream(hidden.device)
        graph, out = capture(run, self._pool, stream=self._stream)
        self._pool = graph.pool()
        return static, lambda: (graph.replay(), out)[1]
