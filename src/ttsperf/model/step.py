"""The decode step, the one the engine, the one-batch pipeline and the ONNX export all run.

    Step(embed, forward, kv)(codes (B, num_vq), positions (B,), length) -> hidden (B, H), logits

embeds the rows' last codes, runs the slot forward (each row writes its K/V at its own position in
`kv` and attends over positions 0..length-1, masked per row) and applies the 4 code heads.
`Rows` holds a batch's decode state in tensors (vLLM v1's persistent batch) and `Rows.accept`
samples and takes the next codes; `advance` is the whole step — forward, accept, move on — with
no host read, so the engine can compile it or capture it in a CUDA graph.

It lives in `model`, not `engine`: data flows model -> engine (docs/ARCHITECTURE.md), and the pipeline and
the export are model-level users of the same step. The engine adds what serving needs around it
(engine/decode_step.py: compile; engine/graphs.py: CUDA graphs; engine/device_batch.py: the host's
mirror, rows joining and leaving).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

import torch

from ttsperf.model.forward import SlotForward
from ttsperf.model.gpt import Embed
from ttsperf.model.kv import KV
from ttsperf.model.sampling import PENALTY_WINDOW, RowParams, sample, uniforms
from ttsperf.model.transfer import ALIGN, to_device

Outputs = tuple[torch.Tensor, torch.Tensor]
StepFn = Callable[[torch.Tensor, torch.Tensor, int], Outputs]  # (codes, positions, length)


class Step:
    """logits (B, num_vq, V) are float32; `length` defaults to the longest row's (a device read)."""

    def __init__(self, embed: Embed, forward: SlotForward, kv: KV):
        self.embed, self.forward, self.kv = embed, forward, kv

    def __call__(self, codes: torch.Tensor, positions: torch.Tensor, length: int | None = None) -> Outputs:
        embeds = self.embed.embed_codes(codes).to(self.kv.dtype)
        hidden = self.forward.decode(embeds, self.kv, positions, length)
        return hidden, self.embed.code_logits(hidden)

    def prefill(self, prompts: list[tuple[torch.Tensor, ...]], first: int) -> torch.Tensor:
        """Prompts (Pipeline.prompt's ids, attention, text mask, each of one text, on the host) in
        one forward into KV slots first..first+n-1 -> each prompt's last hidden state (n, H).
        Right-padded: causal attention never sees the padding (SlotForward.prefill_many). The
        padded inputs go to the device in one copy that does not wait for it (model/transfer.py)."""
        return self.prefill_padded(*to_device(self.kv.device, *pad_prompts(prompts, first)))

    def prefill_padded(
        self, ids: torch.Tensor, text: torch.Tensor, last: torch.Tensor, slots: torch.Tensor
    ) -> torch.Tensor:
        """The prefill's device part over `pad_prompts`' inputs on the device, with no host read
        (what engine/graphs.py's GraphedPrefill captures) -> last hidden states (rows, H)."""
        return self.forward.prefill_many(self.embed.embed_prompt(ids, text), self.kv, slots, last)


def pad_prompts(
    prompts: list[tuple[torch.Tensor, ...]], first: int, rows: int | None = None, length: int | None = None
) -> list[torch.Tensor]:
    """Prompts right-padded on the host to `rows` x `length` (default: as many rows as prompts,
    the longest prompt) -> ids (rows, length, num_vq), text mask (rows, length), each row's last
    position (rows,) and its KV slot (rows,): first, first+1, ... Padding rows are empty prompts
    (position 0) into the slots after the real ones."""
    lengths = [ids.shape[1] for ids, _, _ in prompts]
    rows, length = rows or len(prompts), length or max(lengths)
    ids = torch.zeros(rows, length, prompts[0][0].shape[-1], dtype=torch.long)
    text = torch.zeros(rows, length, dtype=torch.bool)
    for r, (i, _, m) in enumerate(prompts):
        ids[r, : i.shape[1]], text[r, : m.shape[1]] = i[0], m[0]
    last = torch.zeros(rows, dtype=torch.long)
    last[: len(prompts)] = torch.tensor(lengths) - 1
    return [ids, text, last, torch.arange(first, first + rows)]


Layout = dict[str, tuple[tuple[int, ...], torch.dtype]]  # a column's name -> its shape per row, dtype


def packed_columns(max_batch: int, layout: Layout, device: torch.device) -> tuple[torch.Tensor, dict]:
    """Per-row columns of any dtype and shape -> one zeroed (max_batch, bytes) buffer and each
    column by name as a view of it, (max_batch, *shape): a row's columns move in one indexed copy
    of the buffer, not one per column. Each column starts aligned (model/transfer.py's ALIGN)."""
    starts, end = {}, 0
    for name, (shape, dtype) in layout.items():
        starts[name] = end
        end += -(-torch.Size(shape).numel() * dtype.itemsize // ALIGN) * ALIGN
    buffer = torch.zeros(max_batch, end, dtype=torch.uint8, device=device)
    views = {}
    for name, (shape, dtype) in layout.items():
        size = torch.Size(shape).numel() * dtype.itemsize
        views[name] = buffer[:, starts[name] : starts[name] + size].view(dtype).view(max_batch, *shape)
    return buffer, views


PARAMS = [f.name for f in fields(RowParams)]  # the sampling settings' columns, in RowParams' order


class Rows:
    """Rows 0..B-1 of a decoding batch as (B, ...) tensors on one device. The small per-row
    tensors the step does not take as inputs are views of one buffer (`packed_columns`), so rows
    move (`move`) in four indexed copies: that buffer, the codes and positions (contiguous, as a
    compiled step was traced with) and the kept hidden states."""

    def __init__(
        self,
        max_batch: int,
        num_vq: int,
        hidden_size: int,
        max_new_tokens: int,
        eos_token: int,
        device: torch.device,
        last_position: int | None = None,
    ):
        self.device, self.num_vq, self.eos = device, num_vq, eos_token
        # the KV slots' last position: a row that finished and still runs (a turn of several
        # steps, or one step ahead) writes its ignored K/V there, never past the slot. None: no
        # row runs past its limit (the pipeline)
        self.last_position = last_position
        i64, f32, b8 = torch.long, torch.float32, torch.bool
        self.codes = torch.zeros(max_batch, num_vq, dtype=i64, device=device)  # the next input
        self.positions = torch.zeros(max_batch, dtype=i64, device=device)  # next token's KV position
        self._layout: Layout = {
            "steps": ((), i64),  # codes accepted so far (= hidden states kept)
            "limits": ((), i64),
            "forced": ((), b8),  # length from the speech-rate model
            "done": ((), b8),  # sampled EOS
            "keys": ((), i64),  # stateless sampling: seed_key of the row's seed
            "history": ((num_vq, PENALTY_WINDOW), i64),
            "temperature": ((), f32), "top_p": ((), f32), "kept": ((), i64), "penalty": ((), f32),
            "greedy": ((), b8),
        }  # fmt: skip
        self._row_bytes, columns = packed_columns(max_batch, self._layout, device)
        self.steps, self.limits, self.forced = columns["steps"], columns["limits"], columns["forced"]
        self.done, self.keys, self.history = columns["done"], columns["keys"], columns["history"].fill_(-1)
        self.params = RowParams(*(columns[n] for n in PARAMS))
        # one spare step: a row that is no longer live writes its (ignored) state there
        self.hidden = torch.zeros(max_batch, max_new_tokens + 1, hidden_size, dtype=f32, device=device)
        self._arange = torch.arange(max_batch, device=device)

    def tensors(self) -> list[torch.Tensor]:
        """Every per-row tensor (first dimension = slot)."""
        p = self.params
        return [
            self.codes, self.positions, self.steps, self.limits, self.forced, self.done, self.keys,
            self.history, *p.fields(), self.hidden,
        ]  # fmt: skip

    def move(self, src: torch.Tensor, dst: torch.Tensor, positions: int) -> None:
        """Rows src[i] into slots dst[i], every per-row tensor at once (src and dst disjoint).
        `positions`: the movers' furthest position; their hidden states move only that far. A row
        keeps one state per step, and each step moves it one position past its prompt, so it has
        written none beyond (a whole row's are 6.3 MB on chattts at the default max new tokens)."""
        for t in (self._row_bytes, self.codes, self.positions):
            t[dst] = t[src]
        kept = self.hidden[:, :positions]
        kept[dst] = kept[src]

    def rows(self, sl: slice) -> RowParams:
        return RowParams(*(t[sl] for t in self.params.fields()))

    def put(
        self,
        sl: slice,
        positions: list[int],
        limits: list[int],
        forced: list[bool],
        keys: torch.Tensor,
        params: RowParams,
    ) -> None:
        """Start rows `sl`: prompt lengths, length limits, forced lengths, seed keys, settings.
        Their packed columns are built on the host, no step taken, no EOS, an empty history, and
        go with the positions in one copy that does not wait for the device."""
        record, columns = packed_columns(sl.stop - sl.start, self._layout, torch.device("cpu"))
        given = {
            "limits": limits,
            "forced": forced,
            "keys": keys,
            **dict(zip(PARAMS, params.fields(), strict=True)),
        }
        for name, values in given.items():
            columns[name].copy_(torch.as_tensor(values))
        columns["history"].fill_(-1)
        record, at = to_device(self.device, record, torch.as_tensor(positions, dtype=torch.long))
        self._row_bytes[sl] = record
        self.positions[sl] = at

    def accept(self, sl: slice | torch.Tensor, hidden: torch.Tensor, logits: torch.Tensor, top: int) -> None:
        """Sample each live row's next codes and take them; a row that samples EOS (and is not
        length-forced) is done and keeps nothing of this step. `top`: see sampling.width.
        `sl`: the rows, a slice (views, updated in place) or their slots as a tensor (gathered and
        written back: the same values, for a graph whose rows' slots are an input)."""
        steps, forced = self.steps[sl], self.forced[sl]
        live = ~self.done[sl] & (steps < self.limits[sl])
        u = uniforms(self.keys[sl], steps, self.num_vq)
        new = sample(logits, self.history[sl], self.rows(sl), ~forced, self.eos, u, top)
        eos = live & ~forced & (new == self.eos).any(dim=-1)
        take = live & ~eos
        self.done[sl] |= eos
        # a row that takes nothing writes at its `steps`, past what it keeps (the spare step at most)
        slots = sl if isinstance(sl, torch.Tensor) else self._arange[sl]
        self.hidden[slots, steps] = hidden.float()
        self.codes[sl] = torch.where(take.unsqueeze(1), new, self.codes[sl])
        shifted = torch.cat([self.history[sl, :, 1:], new.unsqueeze(-1)], dim=-1)
        self.history[sl] = torch.where(take.view(-1, 1, 1), shifted, self.history[sl])
        self.steps[sl] += take.long()


def advance(step: StepFn, rows: Rows, b: int, length: int, top: int) -> None:
    """One decode step of rows 0..b-1 on the device, no host read: forward, accept, move on."""
    hidden, logits = step(rows.codes[:b], rows.positions[:b], length)
    rows.accept(slice(0, b), hidden, logits, top)
    positions = rows.positions[:b]
    positions += 1
    if rows.last_position is not None:
        positions.clamp_(max=rows.last_position)
