"""What runs on the device: the KV slots, the persistent batch, the step, sampling and audio.

The scheduler (engine.py) decides who runs; the runner runs them and answers with a small
`StepOutput` (steps taken, EOS flags), never its batch state. It sizes the KV cache it allocates
(`auto_max_batch`: how many rows fit in memory). Per step it makes a fixed
number of device calls whatever the batch: at most one prefill forward for every row that joins
(right-padded prompts), one decode forward for every running row, one sampling pass, one state
update, one device-to-host copy of (steps done, EOS) per row, and one Decoder+Vocos call per
window-length bucket for the rows that emit audio. `launch` queues a step and `collect` reads the
oldest launched step's status, so the scheduler can read step N while step N+1 runs; the audio
call runs on a stream of its own (CUDA).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import psutil
import torch

from ttsperf import facts as F
from ttsperf.engine.audio import BatchedAudio, Decoding, Window
from ttsperf.engine.config import AUTO_BATCH_CAP
from ttsperf.engine.decode_step import DecodeStep
from ttsperf.engine.device_batch import BatchState
from ttsperf.engine.graphs import GraphedAudio, GraphedPrefill, GraphedStep
from ttsperf.engine.oom import is_oom
from ttsperf.model.forward import SlotForward
from ttsperf.model.kv import KVSlots
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import MIN_TOKENS_TO_KEEP, RowParams, SamplingParams, candidates, seed_key, width
from ttsperf.model.step import Outputs, advance, pad_prompts
from ttsperf.model.transfer import to_device


def auto_max_batch(
    pipe: Pipeline,
    max_prompt_tokens: int,
    max_new_tokens: int,
    *,
    headroom: float = 0.5,
    cap: int = AUTO_BATCH_CAP,
) -> int:
    """The largest batch whose slots fit in `headroom` of the free memory (device or host), each
    slot counted as serve's refusal and plan's memory model count it (facts.slot_bytes)."""
    g = pipe.cfg.gpt
    elem = next(pipe.model.gpt.parameters()).element_size()
    per_row = F.slot_bytes(max_prompt_tokens, max_new_tokens, g.kv_bytes_per_token(elem), g.hidden_size)
    if pipe.device.type == "cuda":
        free = torch.cuda.mem_get_info(pipe.device)[0]
    else:
        free = psutil.virtual_memory().available
    return int(max(1, min(cap, free * headroom // per_row)))


@dataclass(frozen=True)
class Admission:
    """One request's row, as the scheduler hands it to the runner: what the device needs."""

    text: str
    prompt: str
    params: SamplingParams
    seed: int
    limit: int  # steps it may take
    forced: bool  # its length is the limit (speech-rate model): EOS is not sampled
    ids: list[int] | None = None  # the decorated text's token ids, when the engine has them already


class StepOutput(NamedTuple):
    """What a step tells the scheduler, per live row (slot = index). The arrays are views of the
    runner's host mirror: read them before rows move (`remove`)."""

    steps: np.ndarray  # codes taken so far
    done: np.ndarray  # sampled EOS
    taken: int  # codes taken since the last output (a joining row's first, from its prefill, included)
    seconds: float | None = None  # the step on the device, between events around it (CUDA)


class Runner:
    def __init__(
        self,
        pipe: Pipeline,
        *,
        max_batch: int | None,
        max_prompt_tokens: int,
        max_new_tokens: int,
        lookahead_steps: int,
        switch_report: dict,
        graphs_without_capture: bool = False,
        memory_share: float = 1.0,
        prefill_rows: int = 8,
        pcm: bool = False,
    ):
        self.pipe = pipe
        g = pipe.cfg.gpt
        self.num_vq, self.vocab = g.num_vq, g.num_audio_tokens
        dtype = next(pipe.model.gpt.parameters()).dtype  # int8 weight-only: the activations' dtype
        compile = switch_report["compile"]["applied"]
        # None: as many rows as fit (the KV slots are this runner's to allocate)
        self.max_batch = max_batch = max_batch or auto_max_batch(
            pipe, max_prompt_tokens, max_new_tokens, headroom=0.5 * memory_share
        )
        # One spare position, in every mode (facts.slot_bytes counts it): compiled, no step's KV
        # view is the whole (contiguous) buffer, a shape of its own to compile; one step ahead, a
        # row that finished at its prefill runs two steps more before the host reads that it did.
        capacity = max_prompt_tokens + max_new_tokens + 1
        self.slots = KVSlots(
            g.num_hidden_layers, max_batch, g.num_key_value_heads, capacity,
            g.hidden_size // g.num_attention_heads, dtype=dtype, device=pipe.device,
        )  # fmt: skip
        self.forward = SlotForward(pipe.model.gpt)
        self.decode_step = DecodeStep(pipe.model, self.forward, self.slots, compile=compile)
        self.state = BatchState(
            max_batch, g.num_vq, g.hidden_size, max_new_tokens, g.eos_token, pipe.device,
            last_position=capacity - 1,
        )  # fmt: skip
        self.audio = BatchedAudio(pipe.model, lookahead_steps, compile=compile, pcm=pcm)
        # the audio call's own stream (CUDA): it runs beside the next decode step (emit)
        self.audio_stream = torch.cuda.Stream(pipe.device) if pipe.device.type == "cuda" else None
        self.graphed: GraphedStep | None = None
        self.graphed_prefill: GraphedPrefill | None = None
        self.graphed_audio: GraphedAudio | None = None
        # graphs_without_capture: the graphed path's buckets run eagerly (tests, on a CPU)
        if switch_report["cuda_graphs"]["applied"] or graphs_without_capture:
            capture = not graphs_without_capture
            self.graphed = GraphedStep(self.run_step, self.state, capacity, capture=capture)
            self.graphed_prefill = GraphedPrefill(
                self.prefill_forward, self.state, max_rows=prefill_rows, max_prompt=max_prompt_tokens,
                max_batch=max_batch, device=pipe.device, capture=capture,
            )  # fmt: skip
            self.graphed_audio = GraphedAudio(
                self.audio.device_part, max_batch, max_new_tokens + 1, capture=capture
            )
            self.audio.call = self.graphed_audio
            self.audio.compiled = False  # the graphs replay its eager part, padded to their buckets

    def warm(self) -> dict:
        """Ready means warm: capture every decode, prefill and audio graph the max batch can reach, so that
        no request pays for a capture (on an H200, captures inside requests took plan's check to a
        TTFA P99 of 15 s). -> what was built and how long it took."""
        if self.graphed is None or self.graphed_audio is None or self.graphed_prefill is None:
            built = ("decode_graphs", "prefill_graphs", "first_code_graphs", "audio_graphs")
            return {**dict.fromkeys(built, 0), "seconds": 0.0}
        t0 = time.perf_counter()
        tops = sorted({width(kept, self.vocab) for kept in range(MIN_TOKENS_TO_KEEP, self.vocab + 1)})
        stopped = None
        try:
            self.graphed.warm(tops)
            self.graphed_prefill.warm(self.num_vq, tops)
            self.graphed_audio.warm(self.state.hidden)
        except Exception as exc:  # out of memory: serve with what fits, the rest on first use
            if not is_oom(exc):
                raise
            stopped = f"out of memory: the larger buckets are captured on first use ({exc})"[:300]
            torch.cuda.empty_cache()
        if self.pipe.device.type == "cuda":
            torch.cuda.synchronize(self.pipe.device)
        return {
            "decode_graphs": len(self.graphed.graphs),
            "prefill_graphs": len(self.graphed_prefill.graphs),
            "first_code_graphs": len(self.graphed_prefill.first_codes),
            "audio_graphs": len(self.graphed_audio.graphs),
            "seconds": round(time.perf_counter() - t0, 3),
            **({"stopped": stopped} if stopped else {}),
        }

    # ------------------------------------------------------------------ rows in

    def prefill(self, rows: list[Admission]) -> slice:
        """Prefill every joining row in one forward and sample its first codes -> its slice.
        Nothing is kept if it fails (an out-of-memory leaves the batch as it was)."""
        pipe, s = self.pipe, self.state
        # tokenized once, at submission (Engine.submit), where the engine has the ids
        prompts = [
            pipe.prompt([r.text], r.prompt) if r.ids is None else pipe.prompt_of_ids(r.ids) for r in rows
        ]
        lengths = [ids.shape[1] for ids, _, _ in prompts]
        first = s.size
        params = RowParams.of([r.params for r in rows], self.vocab)
        keys = seed_key(torch.tensor([r.seed for r in rows]))
        kept = [candidates(r.params, self.vocab) for r in rows]
        sl = s.add(lengths, [r.limit for r in rows], [r.forced for r in rows], keys, params, kept)
        try:  # the rows' settings are on their way: forward, then their first codes
            if self.graphed_prefill is not None:
                self.graphed_prefill.join(prompts, first, self._top(sl))
            else:
                hidden, logits = self.prefill_forward(*to_device(pipe.device, *pad_prompts(prompts, first)))
                s.accept(sl, hidden, logits, self._top(sl))
        except BaseException:
            s.truncate(first)
            raise
        return sl

    def prefill_forward(
        self, ids: torch.Tensor, text: torch.Tensor, last: torch.Tensor, slots: torch.Tensor
    ) -> Outputs:
        """The prefill's device part, no host read (compiled, or graphed per bucket): padded prompts
        on the device (model.step.pad_prompts) into their KV slots -> last hidden states, code logits."""
        return self.decode_step.prefill(ids, text, last, slots)

    # ------------------------------------------------------------------ the step

    def step(self) -> StepOutput:
        """One decode step for every row (graphed where captured), then its status on the host."""
        self.launch()
        return self.collect()

    def launch(self, steps: int = 1) -> None:
        """Queue `steps` decode steps for every row (graphed where captured) and the copy of the
        last one's status to the host, with no host read: on a GPU the call returns while they
        run. Every row moves one position a step (a finished row too, at most to the slot's last)."""
        s, h = self.state, self.state.host
        b, last = s.size, self.slots.max_len - 1  # the slots' last position (state.last_position)
        longest = int(h.positions[:b].max())  # from the host's mirror: no device sync
        top = self._top(slice(0, b))
        before = s.before_step()
        run = self.graphed or self.run_step
        ran = 0
        try:
            for i in range(steps):
                run(b, min(longest + i, last) + 1, top)
                ran += 1
        finally:  # a step that failed (out of memory) left the steps before it run: the mirror counts them
            positions = h.positions[:b]
            positions += ran
            np.minimum(positions, last, out=positions)
        s.send(before)

    def collect(self) -> StepOutput:
        """The oldest launched step's status, waiting for that step alone (a step launched after
        it goes on running) -> what it tells the scheduler about every live row. A row that joined
        after that step shows no steps yet."""
        s, h = self.state, self.state.host
        taken, seconds = s.receive()
        return StepOutput(h.steps[: s.size], h.done[: s.size], taken, seconds)

    def abandon(self) -> None:
        """Forget the steps launched and not collected (after a failure: nothing will read them)."""
        self.state.sent.clear()

    @property
    def launched(self) -> int:
        """Steps launched whose status is not collected yet."""
        return len(self.state.sent)

    def run_step(self, b: int, length: int, top: int) -> None:
        """The whole step on the device, no host read: decode, sample, update the batch state."""
        advance(self.decode_step, self.state, b, length, top)

    def _top(self, sl: slice) -> int:
        return width(int(self.state.host.kept[sl].max()), self.vocab)

    # ------------------------------------------------------------------ rows out

    def window(self, slot: int, steps: int, emitted: int, final: bool) -> Window | None:
        """What row `slot` emits now, with `steps` taken and `emitted` samples out (None: nothing)."""
        return self.audio.window(slot, steps, emitted, final)

    def emit(self, windows: list[Window]) -> list[np.ndarray]:
        """Decode the windows' audio now -> each window's new samples, in order."""
        return self.launch_audio(windows).samples()

    def launch_audio(self, windows: list[Window]) -> Decoding:
        """Queue the windows' audio call; nothing waits (a CPU computes it here). On CUDA on a
        stream of its own that waits for the rows as the host last saw them, not for a step still
        running (decode steps and the audio call overlap on the device); what the decode stream
        runs after this (rows moving or joining, the next steps) waits for the call on the device,
        since it may write the states the call reads. The samples' copy back waits for the audio's
        stream alone, when the host asks for them (`Decoding.samples`)."""
        if not windows or self.audio_stream is None:
            return self.audio.launch(self.state.hidden, windows)
        settled = self.state.settled()
        if settled is not None:
            self.audio_stream.wait_event(settled)
        with torch.cuda.stream(self.audio_stream):
            decoding = self.audio.launch(self.state.hidden, windows)
        torch.cuda.current_stream(self.pipe.device).wait_event(decoding.done)
        return decoding

    def remove(self, leaving: list[int]) -> list[tuple[int, int]]:
        """Drop rows, keeping slots 0..B-1 dense -> the (src, dst) moves made. No host read: the
        moves' index tensors go in one copy that does not wait for the device, and the KV slots
        move with the batch's tensors, each as far as the movers have written."""
        return self.state.compact(np.asarray(leaving, dtype=np.int64), self.slots.move_many)

    def truncate(self, size: int) -> None:
        """Keep rows 0..size-1 (out of memory, or a failure that answered every row)."""
        self.state.truncate(size)
