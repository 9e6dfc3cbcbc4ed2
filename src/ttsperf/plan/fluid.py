"""The fluid limit: the streams a card carries if every step cost its mean and nobody queued.

A start for the capacity search (search.py), never an answer: the simulator's waves, joins and
percentiles are what the plan reports. A good start saves the doubling from 8 streams and most of
the bisection (docs/PLANNING.md, "The settings search", its bullet "Where a search starts: the
fluid limit").

At batch B (rows desynchronised, each at the middle of its reply on average) one decode step
costs the step model's t(B, B x mean context) plus the engine's host work, plus each step's share
of the calls that do not come every step: B / chunk rows' Decoder+Vocos call and B / steps rows'
prefill. The SLO turns into a budget per step:
  - underrun: a row must decode faster than it plays, 1 / 46.875 s per step;
  - time to first audio: a prefill, the first chunk's steps and its audio call within the limit;
  - end to end (or RTF): every step of the reply within the limit.
The largest B within budget is the fluid batch; a listener is in flight only while its reply
decodes, and plays it (and thinks) for the rest of its cycle, so B rows serve B x cycle / reply
listeners.
"""

from __future__ import annotations

from ttsperf import facts as F
from ttsperf.plan.simulate import EngineModel, chunk_plan


def audio_call(engine: EngineModel, batch: int) -> float:
    """One Decoder+Vocos call for the rows that reach a chunk at one step (at least one)."""
    w = engine.workload
    chunk_audio = chunk_plan(w)[1]
    rows = max(1, round(batch / w.chunk_steps))
    return engine.step.vocoder(sum(chunk_audio) / len(chunk_audio) * rows, rows)


def step_cost(engine: EngineModel, batch: int) -> float:
    """Mean seconds per decode step at `batch` rows, with the step's share of audio and prefill calls."""
    w, sm = engine.workload, engine.step
    ctx = w.prompt_tokens + w.steps / 2
    step = float(sm.step(batch, batch * ctx)) + engine.host_per_step_s + engine.host_per_row_s * batch
    chunks = batch / w.chunk_steps  # chunks per step: one call of these rows, or one row some steps
    vocoder = audio_call(engine, batch) * chunks / max(1, round(chunks))
    prefill = sm.prefill(w.prompt_tokens, 1) * min(1.0, batch / w.steps)  # a row joins once a reply
    # the event loop's hand-offs and intake, on the engine's CPU (a row joins once a reply)
    loop = engine.handoff_s * chunks + engine.intake_s * batch / w.steps if engine.handoff_serial else 0.0
    return step + vocoder + prefill + loop


def budget(engine: EngineModel, slo: dict[str, float], batch: int) -> bool:
    """Whether `batch` rows keep every SLO limit in the fluid limit."""
    w, sm = engine.workload, engine.step
    t = step_cost(engine, batch)
    for k, limit in slo.items():
        if k.startswith("underrun") and t > 1.0 / F.STEPS_PER_AUDIO_SECOND:
            return False
        if k.startswith("ttfa"):  # at worst it waits for the step in progress and its audio call
            first = (
                engine.intake_s + sm.prefill(w.prompt_tokens, 1) + (w.first_chunk_steps + 1) * t
                + audio_call(engine, batch)
            )  # fmt: skip
            if first > limit:
                return False
        if k.startswith("e2e") and w.steps * t > limit:
            return False
        if k.startswith("rtf") and t * F.STEPS_PER_AUDIO_SECOND > limit:
            return False
    return True


def fluid_streams(engine: EngineModel, slo: dict[str, float], think_s: float | None) -> float | None:
    """Streams the engine carries in the fluid limit, or None when not even one row keeps the SLO."""
    if not budget(engine, slo, 1):
        return None
    lo, hi = 1, engine.max_batch
    if budget(engine, slo, hi):
        lo = hi
    while hi - lo > 1:  # the cost grows with the batch: bisect the last batch within budget
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if budget(engine, slo, mid) else (lo, mid)
    if think_s is None:  # back to back: every stream is a row
        return float(lo)
    # a listener is in flight while its reply decodes, and listens (and thinks) for the rest of
    # its cycle: N streams keep B rows busy when N = B x cycle / reply
    w, t = engine.workload, step_cost(engine, lo)
    prefill = engine.step.prefill(w.prompt_tokens, 1)
    reply = prefill + w.steps * t
    cycle = max(reply, prefill + w.first_chunk_steps * t + w.audio_seconds) + think_s
    return min(4.0 * engine.max_batch, lo * cycle / reply)


# Over the catalog's cards in the realtime scenario the simulated capacity came to 0.64-1.08 of
# the fluid streams (its p99s see queues and joins the mean does not): a search started here is
# within 1.35x of the answer either way (docs/PLANNING.md).
START_SHARE = 0.8


def fluid_start(engine: EngineModel, slo: dict[str, float], think_s: float | None) -> float | None:
    """Where a capacity search of streams starts: a share of the fluid limit (None: from 8)."""
    n = fluid_streams(engine, slo, think_s)
    return None if n is None else max(1.0, round(START_SHARE * n))
