"""A card's row of a plan: what fits, the setting the search chose, latency at the target load per
GPU, GPUs and machines needed, price and power; every number with its basis (schema.Basis)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ttsperf import facts as F
from ttsperf.plan.capacity import Capacity, Simulator
from ttsperf.plan.cards import Card
from ttsperf.plan.cost import machines_needed
from ttsperf.plan.scenarios import Scenario, meets, misses
from ttsperf.plan.schema import Basis, PlanRow, RowSettings
from ttsperf.plan.search import (
    Candidate,
    PlanContext,
    Search,
    Searched,
    Simulations,
    binding,
    overhead_range,
    search,
)
from ttsperf.plan.simulate import ENGINES, Load, SimResult
from ttsperf.plan.steptime import StepModel


def latency(r: SimResult) -> dict[str, float]:
    """A simulation's latencies under the row's JSON names."""
    return {
        "step_ms": r.mean_step_s * 1e3,
        "p50_s": r.e2e_p50,
        "p99_s": r.e2e_p99,
        "ttfa_p99_s": r.ttfa_p99,
        "rtf_p99": r.rtf_p99,
        "underrun_p99_s": r.underrun_p99,
        "mean_batch": r.mean_batch,
    }


LATENCY_KEYS = ("step_ms", "p50_s", "p99_s", "ttfa_p99_s", "rtf_p99", "underrun_p99_s", "mean_batch")


@dataclass(frozen=True)
class Price:
    """A card's price per GPU-hour in the plan's currency, and where it comes from."""

    per_gpu_hour: float | None
    basis: Basis | None


def price(card: Card, ctx: PlanContext, at_capacity: SimResult | None) -> Price:
    """Per GPU-hour in the plan's currency: owned (amortised + electricity at capacity) or the
    cheapest rental price."""
    if ctx.own is not None and card.name in ctx.own.purchases:
        watts = card.tdp_w * at_capacity.busy_fraction if card.tdp_w and at_capacity else None
        usd, how = ctx.own.per_gpu_hour(card.name, watts)
        return Price(usd, Basis(kind="projected", how=f"owned: {how}"))
    p = ctx.catalog.prices.get(card.name)
    if p is None:
        return Price(None, None)
    return Price(p.per_gpu_hour, Basis(kind="sourced", how=p.label()))


def per_gpu(target: Load, capacity: float) -> tuple[Load, int]:
    """The load each GPU carries, and the GPUs needed, for `target` at `capacity` per GPU."""
    # at least one GPU, also when a card's capacity is unbounded (a degenerate, near-zero step time)
    if target.kind == "streams":
        gpus = max(1, math.ceil(target.value / capacity))
    else:
        gpus = max(1, math.ceil(target.value / capacity - 1e-9))
    return split(target, gpus), gpus


def split(target: Load, gpus: int) -> Load:
    """The load each of `gpus` GPUs carries (whole streams: the busiest GPU's)."""
    if target.kind == "streams":
        return Load("streams", math.ceil(target.value / gpus))
    return Load(target.kind, target.value / gpus)


# GPUs a plan adds, one at a time, when the load each GPU gets misses the SLO
EXTRA_GPUS = 3


def _meeting(
    target: Load, capacity: float, sim: Simulator, slo: dict[str, float], notes: list[str]
) -> tuple[Load, int, SimResult, bool]:
    """-> (load per GPU, GPUs, the run at that load, whether it meets the SLO). ceil(target /
    capacity) GPUs, one more while the load each gets misses the SLO (at most EXTRA_GPUS more):
    rounding the per-GPU load up, or the simulation's draw at a load below the capacity, can
    cross the bound, and a row must not both miss in its note and count as meeting."""
    load, gpus = per_gpu(target, capacity)
    at = sim(load)
    for _ in range(EXTRA_GPUS):
        if meets(at, slo):
            break
        notes.append(f"at {load.label()} per GPU: {misses(at, slo)}, so {gpus + 1} GPUs")
        gpus += 1
        load = split(target, gpus)
        at = sim(load)
    ok = meets(at, slo)
    if not ok:
        notes.append(f"at {load.label()} per GPU: {misses(at, slo)}")
    return load, gpus, at, ok


def gpus_range(target: Load, r: PlanRow) -> list[int] | None:
    """GPUs needed at the high and low ends of a row's capacity range (low capacity -> more GPUs),
    widened to hold the row's own count (which _meeting may have raised past the range's end)."""
    span = r.max_streams_range or r.max_rate_range
    if span is None:
        return None
    lo, hi = span
    if not lo:
        return None
    fewest, most = per_gpu(target, hi)[1], per_gpu(target, lo)[1]
    if r.gpus_needed is not None:
        fewest, most = min(fewest, r.gpus_needed), max(most, r.gpus_needed)
    return [fewest, most]


def serve_flags(c: Candidate, dtype: str, device: str, limits: tuple[int, int]) -> str:
    """The `ttsperf serve` command line for a setting; `limits` (Workload.serve_limits) size the
    slots the max batch was fitted with, so the command fits the card as plan's memory model does."""
    parts = ["ttsperf serve", f"--device {device}", f"--dtype {dtype}"]
    if c.mode.flag:
        parts.append(c.mode.flag)
    # the queue serve defaults to (a batch's worth), named: the check command's users never see 503
    queue = max(F.MIN_QUEUE, c.max_batch)
    parts += [
        f"--max-batch {c.max_batch}",
        f"--max-queue {queue}",
        f"--max-prompt-tokens {limits[0]}",
        f"--max-new-tokens {limits[1]}",
        f"--first-chunk-steps {c.first_chunk_steps}",
    ]
    return " ".join(parts)


def row_settings(card: Card, t: Searched, searched: list[str], ctx: PlanContext) -> RowSettings:
    c = t.candidate
    device = "cpu" if card.device == "other" else ctx.device_flag
    step = t.engine.step
    measured = c.t_fixed is None
    return RowSettings(
        dtype=step.dtype,
        mode=c.mode.name,
        step_overhead_s=step.t_fixed,
        step_overhead_range_s=None if measured or c.mode.low == c.mode.high else [c.mode.low, c.mode.high],
        first_chunk_steps=c.first_chunk_steps,
        max_batch=c.max_batch,
        serve_flags=serve_flags(c, step.dtype, device, ctx.workload.serve_limits()),
        searched="; ".join(searched),
    )


def input_bases(card: Card, step: StepModel | None) -> dict[str, Basis]:
    """The memory and step-model inputs of this card's row, each with its provenance record."""
    out = {f"memory.{k}": b for k, b in card.memory.basis.items()}
    if step is not None:
        out |= {f"step.{k}": b for k, b in step.basis.items()}
    return out


def plan_row(card: Card, scenario: Scenario, target: Load, ctx: PlanContext, sims: Simulations) -> PlanRow:
    """`card`'s row in `scenario` at `target` load: the best setting the search finds, then
    latency, GPUs, price and power there."""
    w = ctx.workload
    maxb, maxb_basis = card.max_batch(w, cap=ctx.batch_cap)
    memory = card.memory.breakdown(ctx.memory_at or max(maxb, 1), w)
    memory["card"] = card.memory_bytes
    basis = dict(card.basis)
    basis["max_batch"] = maxb_basis
    basis.update(input_bases(card, card.step))
    if card.step is None or maxb == 0:
        p = price(card, ctx, None)
        if p.basis:
            basis["usd_per_gpu_hour"] = p.basis
        note = card.note or f"does not fit: one sequence needs {card.memory.total(1, w) / 2**30:.2f} GiB"
        return PlanRow(
            gpu=card.name, fits=False, max_batch=maxb, meets_slo=False, memory_bytes=memory, note=note,
            basis=basis, device=card.device, usd_per_gpu_hour=p.per_gpu_hour, **_NO_LOAD,
            currency=ctx.catalog.currency,
        )  # fmt: skip
    q = Search(card, scenario, "streams" if target.kind == "streams" else "rate", ctx, sims)
    best, searched = search(q, maxb)
    basis.update(input_bases(card, best.engine.step))  # the step model of the setting chosen
    bound, bound_how = binding(best, scenario, q.kind)
    span = overhead_range(q, best)
    p = price(card, ctx, best.cap.result)
    if p.basis:
        basis["usd_per_gpu_hour"] = p.basis
    notes = [card.note] if card.note else []
    if best.cap.value > 0 and best.cap.result is not None:
        numbers = _at_capacity(card, best, scenario, target, ctx, p, basis, notes)
    else:
        numbers = _at_least_load(best.cap, scenario, target, ctx, best.engine.step, basis, notes)
    if p.per_gpu_hour is None:
        notes.append("no price: supply one with --price, --prices or --own")
    if span is not None:
        numbers["max_streams_range" if q.kind == "streams" else "max_rate_range"] = (
            [int(v) for v in span] if q.kind == "streams" else span
        )
    met = numbers.pop("meets_slo", False)
    return PlanRow(
        gpu=card.name, fits=True, max_batch=maxb, meets_slo=met, memory_bytes=memory,
        note="; ".join(notes), basis=basis, device=card.device, usd_per_gpu_hour=p.per_gpu_hour,
        currency=ctx.catalog.currency,
        settings=row_settings(card, best, searched, ctx), binding=bound, binding_how=bound_how,
        **numbers,
    )  # fmt: skip


_NO_LOAD: dict = dict.fromkeys(
    (*LATENCY_KEYS, "max_streams", "max_rate_rps", "gpus_needed", "usd_per_hour", "usd_per_audio_hour")
)


def _sim_how(ctx: PlanContext, step: StepModel) -> str:
    step_how = "; ".join(f"{k}: {b.how}" for k, b in step.basis.items())
    formula = "t(B,L) = t_fixed + max(bytes(B,L)/(BW x MBU), flops(B,L)/(peak x MFU))"
    return (
        f"discrete-event simulation of continuous batching ({ENGINES[ctx.engine]}), "
        f"{ctx.n_requests} requests, seed {ctx.seed}, steps at {formula} [{step_how}]"
    )


def _at_capacity(
    card: Card,
    best: Searched,
    scenario: Scenario,
    target: Load,
    ctx: PlanContext,
    p: Price,
    basis: dict[str, Basis],
    notes: list[str],
) -> dict:
    """The row's numbers when the card carries load: GPUs for the target, latency at the load
    each GPU gets, cost and energy at capacity (bases and notes added in place)."""
    cap = best.cap
    assert cap.result is not None
    per_gpu_load, gpus, at, ok = _meeting(target, cap.value, best.sim, scenario.slo, notes)
    cap_key = "max_streams" if target.kind == "streams" else "max_rate_rps"
    out = dict(_NO_LOAD, **latency(at), gpus_needed=gpus, replicas=gpus, meets_slo=ok)
    out["machines"] = machines_needed(gpus, ctx.gpus_per_machine)
    out[cap_key] = int(cap.value) if target.kind == "streams" else cap.value
    if not at.p99_resolved:
        notes.append(f"P99 from {at.n} requests is not resolved (needs >= 1000)")
    basis_load = f"at {per_gpu_load.label()} per GPU ({gpus} GPUs for {target.label()})"
    sim_how = _sim_how(ctx, best.engine.step)
    for key in LATENCY_KEYS:
        basis[key] = Basis(kind="projected", how=f"{basis_load}: {sim_how}")
    basis[cap_key] = Basis(
        kind="projected",
        how=f"bisection on simulated load for SLO {scenario.slo or 'none'}"
        + ("" if scenario.slo else " (none: saturated throughput at max batch)"),
    )
    more = f", one more while the load per GPU missed the SLO (at most {EXTRA_GPUS})" if scenario.slo else ""
    basis["gpus_needed"] = Basis(kind="projected", how=f"ceil(target {target.label()} / {cap_key}){more}")
    basis["replicas"] = Basis(kind="projected", how="gpus_needed: one engine per GPU (serve --ray)")
    basis["machines"] = Basis(
        kind="projected", how=f"ceil(gpus_needed / {ctx.gpus_per_machine} GPUs per machine)"
    )
    throughput = cap.result.audio_throughput
    usd = p.per_gpu_hour
    if usd is not None:
        out["usd_per_hour"] = gpus * usd
        out["usd_per_audio_hour"] = usd / throughput
        basis["usd_per_audio_hour"] = Basis(
            kind="projected",
            how=f"usd_per_gpu_hour / audio hours per GPU-hour at {cap_key} ({throughput:.3g} audio-s per s)",
        )
    if card.tdp_w:
        out.update(_power(card.tdp_w, at, cap.result, throughput, cap_key, basis_load, basis))
    return out


def _power(
    tdp_w: float,
    at: SimResult,
    at_cap: SimResult,
    throughput: float,
    cap_key: str,
    basis_load: str,
    basis: dict,
) -> dict[str, float]:
    power = (
        f"TDP {tdp_w:g} W (catalog) x simulated busy fraction; assumption: a busy card draws "
        "its TDP, an idle one nothing (no measured power)"
    )
    basis["watts"] = Basis(kind="projected", how=f"{basis_load}: {power}")
    basis["kwh_per_audio_hour"] = Basis(
        kind="projected", how=f"at {cap_key}: {power}, over {throughput:.3g} audio-s per s"
    )
    return {
        "watts": tdp_w * at.busy_fraction,
        "kwh_per_audio_hour": tdp_w * at_cap.busy_fraction / 1000 / throughput,
    }


def _at_least_load(
    cap: Capacity,
    scenario: Scenario,
    target: Load,
    ctx: PlanContext,
    step: StepModel,
    basis: dict[str, Basis],
    notes: list[str],
) -> dict:
    """The row's numbers when not even the least load meets the SLO: latency at that load."""
    closest = cap.closest
    assert closest is not None
    out = dict(_NO_LOAD, **latency(closest))
    out["max_streams" if target.kind == "streams" else "max_rate_rps"] = 0
    notes.append(
        f"misses the SLO even at the least load ({misses(closest, scenario.slo)}); "
        "latencies shown are at that least load"
    )
    sim_how = _sim_how(ctx, step)
    for key in LATENCY_KEYS:
        basis[key] = Basis(kind="projected", how=f"at the least load: {sim_how}")
    return out
