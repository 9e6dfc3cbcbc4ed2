"""Scenarios, SLO search and the recommendation: cards + workload + load -> a Plan.

For each card: max batch from the memory model; the most load per GPU that meets the SLO, by
bisection over simulated loads; GPUs needed for the target load; latency at the target load per
GPU; $/hour and $/audio-hour. Then one sentence per scenario naming the cheapest card that
meets the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ttsperf.plan.cards import Card
from ttsperf.plan.catalog import Catalog
from ttsperf.plan.memory import Workload
from ttsperf.plan.scenarios import Scenario, meets, misses
from ttsperf.plan.schema import Basis, PlanRow, ScenarioPlan, Slo
from ttsperf.plan.simulate import Engine, Load, SimResult, simulate


@dataclass
class Capacity:
    value: float  # most streams (int) or req/s per GPU meeting the SLO; 0 = not even the least
    result: SimResult | None  # simulation at that load
    closest: SimResult | None  # at the least load, when even that misses


def find_capacity(
    engine: Engine, kind: str, slo: dict[str, float], sim: Callable[[Load], SimResult]
) -> Capacity:
    """Most load per GPU meeting the SLO: bisection on simulated runs (latency grows with load)."""
    maxb = engine.max_batch
    if kind == "streams":
        if not slo:  # no bound: more streams than slots only wait, so capacity is the batch
            return Capacity(maxb, sim(Load("streams", maxb)), None)
        lo_r = sim(Load("streams", 1))
        if not meets(lo_r, slo):
            return Capacity(0, None, lo_r)
        # Double from 1 until the SLO fails (capacities under a tight SLO are often far below the
        # batch), up to 4 x the batch (past it requests queue for a slot); then bisect.
        lo, best, hi = 1, lo_r, None
        while hi is None and lo < 4 * maxb:
            n = min(2 * lo, 4 * maxb)
            r = sim(Load("streams", n))
            if meets(r, slo):
                lo, best = n, r
            else:
                hi = n
        if hi is None:
            return Capacity(lo, best, None)
        return _bisect(lo, hi, best, lambda a, b: (a + b) // 2 if b - a > 1 else None, "streams", slo, sim)
    # Open loop: the saturated closed-loop throughput bounds any stable rate.
    saturated = sim(Load("streams", maxb))
    cap = saturated.throughput_rps
    if not slo:
        return Capacity(cap, saturated, None)
    lo_rate = cap / 256
    lo_r = sim(Load("rate", lo_rate))
    if not meets(lo_r, slo):
        return Capacity(0.0, None, lo_r)
    # to 1/256 of capacity
    return _bisect(
        lo_rate, cap, lo_r, lambda a, b: (a + b) / 2 if b - a > cap / 256 else None, "rate", slo, sim
    )


def _bisect(lo, hi, best: SimResult, midpoint, kind: str, slo, sim) -> Capacity:
    """Narrow [lo passes, hi fails] until midpoint() says stop; the SLO is monotone in load."""
    while (mid := midpoint(lo, hi)) is not None:
        r = sim(Load(kind, mid))
        if meets(r, slo):
            lo, best = mid, r
        else:
            hi = mid
    return Capacity(lo, best, None)


def plan_row(
    card: Card,
    catalog: Catalog,
    workload: Workload,
    scenario: Scenario,
    target: Load,
    n_requests: int,
    seed: int,
    memory_at: int | None = None,
    batch_cap: int | None = None,
    cache: dict | None = None,
) -> PlanRow:
    maxb = card.memory.max_batch(card.memory_bytes, workload, cap=batch_cap)
    mem_b = memory_at or max(maxb, 1)
    memory = card.memory.breakdown(mem_b, workload)
    memory["card"] = card.memory_bytes
    price = catalog.prices.get(card.name)
    basis = dict(card.basis)
    basis["max_batch"] = Basis(
        kind="projected",
        how=(
            "largest B with runtime + weights + frag x (KV/token x B x context + transients(B))"
            " <= card memory; "
            f"context = {workload.prompt_tokens} prompt + {workload.steps} steps; "
            + "; ".join(f"{k}: {v}" for k, v in card.memory.how.items())
        ),
    )
    basis.update(_input_bases(card))
    if price is not None:
        basis["usd_per_gpu_hour"] = Basis(kind="sourced", how=price.label())
    empty = dict(
        step_ms=None,
        p50_s=None,
        p99_s=None,
        ttfa_p99_s=None,
        max_streams=None,
        max_rate_rps=None,
        gpus_needed=None,
        usd_per_hour=None,
        usd_per_audio_hour=None,
    )
    if card.step is None or maxb == 0:
        note = (
            card.note or f"does not fit: one sequence needs {card.memory.total(1, workload) / 2**30:.2f} GiB"
        )
        return PlanRow(
            gpu=card.name,
            fits=False,
            max_batch=maxb,
            meets_slo=False,
            memory_bytes=memory,
            usd_per_gpu_hour=price.usd_per_gpu_hour if price else None,
            note=note,
            basis=basis,
            **empty,
        )
    engine = Engine(card.step, maxb, workload)

    cache = {} if cache is None else cache

    def sim(load: Load) -> SimResult:  # scenarios share loads (realtime/concurrency share the SLO)
        key = (card.name, load)
        if key not in cache:
            cache[key] = simulate(engine, load, n_requests=n_requests, seed=seed)
        return cache[key]

    cap = find_capacity(engine, target.kind if target.kind == "streams" else "rate", scenario.slo, sim)
    step_how = "; ".join(f"{k}: {v}" for k, v in card.step.how.items())
    formula = "t(B,L) = t_fixed + max(bytes(B,L)/(BW x MBU), flops(B,L)/(peak x MFU))"
    sim_how = (
        f"discrete-event simulation of continuous batching, {n_requests} requests, seed {seed}, "
        f"steps at {formula} [{step_how}]"
    )
    notes = [card.note] if card.note else []
    row = dict(empty)
    if cap.value > 0 and cap.result is not None:
        per_gpu_load, gpus = _per_gpu(target, cap.value)
        at = sim(per_gpu_load)
        row.update(
            step_ms=at.mean_step_s * 1e3,
            p50_s=at.p50_s,
            p99_s=at.p99_s,
            ttfa_p99_s=at.ttfa_p99_s,
            gpus_needed=gpus,
        )
        if target.kind == "streams":
            row["max_streams"] = int(cap.value)
        else:
            row["max_rate_rps"] = cap.value
        if price is not None:
            row["usd_per_hour"] = gpus * price.usd_per_gpu_hour
            row["usd_per_audio_hour"] = price.usd_per_gpu_hour / cap.result.audio_throughput
        if not at.p99_resolved:
            notes.append(f"P99 from {at.n} requests is not resolved (needs >= 1000)")
        if not meets(at, scenario.slo):  # rounding the per-GPU load up can cross the bound
            notes.append(f"at {per_gpu_load.label()} per GPU: {misses(at, scenario.slo)}")
        basis_load = f"at {per_gpu_load.label()} per GPU ({gpus} GPUs for {target.label()})"
        for key in ("step_ms", "p50_s", "p99_s", "ttfa_p99_s"):
            basis[key] = Basis(kind="projected", how=f"{basis_load}: {sim_how}")
        cap_key = "max_streams" if target.kind == "streams" else "max_rate_rps"
        basis[cap_key] = Basis(
            kind="projected",
            how=f"bisection on simulated load for SLO {scenario.slo or 'none'}"
            + ("" if scenario.slo else " (none: saturated throughput at max batch)"),
        )
        basis["gpus_needed"] = Basis(kind="projected", how=f"ceil(target {target.label()} / {cap_key})")
        if price is not None:
            basis["usd_per_audio_hour"] = Basis(
                kind="projected",
                how=f"usd_per_gpu_hour / audio hours per GPU-hour at {cap_key} "
                f"({cap.result.audio_throughput:.3g} audio-s per s)",
            )
    else:
        closest = cap.closest
        assert closest is not None
        row.update(
            step_ms=closest.mean_step_s * 1e3,
            p50_s=closest.p50_s,
            p99_s=closest.p99_s,
            ttfa_p99_s=closest.ttfa_p99_s,
            max_streams=0 if target.kind == "streams" else None,
            max_rate_rps=0.0 if target.kind != "streams" else None,
        )
        notes.append(
            f"misses the SLO even at the least load ({misses(closest, scenario.slo)}); "
            "latencies shown are at that least load"
        )
        for key in ("step_ms", "p50_s", "p99_s", "ttfa_p99_s"):
            basis[key] = Basis(kind="projected", how=f"at the least load: {sim_how}")
    if price is None:
        notes.append("no price: supply one with --price or --prices")
    return PlanRow(
        gpu=card.name,
        fits=True,
        max_batch=maxb,
        meets_slo=cap.value > 0,
        usd_per_gpu_hour=price.usd_per_gpu_hour if price else None,
        memory_bytes=memory,
        note="; ".join(notes),
        basis=basis,
        **row,
    )


# Inputs computed here from the architecture (the rest are defaults/quotes/catalog values: "sourced").
_COMPUTED = {"weights_bytes", "kv_bytes_per_token", "vocoder", "prefill"}


def _input_bases(card: Card) -> dict[str, Basis]:
    """The memory and step-model inputs of this card's row, each measured, computed or sourced."""
    out: dict[str, Basis] = {}
    models: list[tuple[str, dict[str, str], set[str]]] = [("memory", card.memory.how, card.memory.measured)]
    if card.step is not None:
        models.append(("step", card.step.how, card.step.measured))
    for prefix, how, measured in models:
        for key, text in how.items():
            kind = "measured" if key in measured else "projected" if key in _COMPUTED else "sourced"
            out[f"{prefix}.{key}"] = Basis(kind=kind, how=text)
    return out


def _per_gpu(target: Load, capacity: float) -> tuple[Load, int]:
    if target.kind == "streams":
        gpus = math.ceil(target.value / capacity)
        return Load("streams", math.ceil(target.value / gpus)), gpus
    gpus = math.ceil(target.value / capacity - 1e-9)
    return Load(target.kind, target.value / gpus), gpus


def recommend(scenario: Scenario, target: Load, rows: list[PlanRow], basis_note: str) -> str:
    """One sentence: the cheapest card meeting the SLO for the target load, or why there is none."""
    slo = ", ".join(f"{k} <= {v:g}" for k, v in scenario.slo.items()) or "no latency bound"
    head = f"{scenario.name} ({slo}; {target.label()})"
    ok = [r for r in rows if r.meets_slo and r.gpus_needed]
    if not ok:
        fits = [r for r in rows if r.fits and r.ttfa_p99_s is not None]
        if not fits:
            return f"{head}: no card in the selection fits the workload."
        best = min(fits, key=lambda r: r.ttfa_p99_s or math.inf)
        return (
            f"{head}: no card meets the SLO; the closest is {best.gpu} "
            f"(TTFA P99 {best.ttfa_p99_s:.3f} s, E2E P99 {best.p99_s:.2f} s at the least load); {basis_note}."
        )
    key = scenario.objective
    priced = [r for r in ok if getattr(r, key) is not None]
    unpriced = [r.gpu for r in ok if getattr(r, key) is None]
    tail = f" (also meeting it but without a price: {', '.join(unpriced)})" if unpriced else ""
    if not priced:
        best = min(ok, key=lambda r: (r.gpus_needed, r.p99_s or math.inf))
        return (
            f"{head}: no card that meets the SLO has a price; fewest GPUs: {best.gpus_needed} x {best.gpu}; "
            f"{basis_note}."
        )
    best = min(priced, key=lambda r: (getattr(r, key), r.gpus_needed, r.p99_s or math.inf))
    return (
        f"{head}: {best.gpus_needed} x {best.gpu} at ${best.usd_per_hour:.2f}/h "
        f"(${best.usd_per_audio_hour:.4f} per audio hour) is the cheapest that meets it{tail}; {basis_note}."
    )


def plan_scenario(
    scenario: Scenario,
    cards: list[Card],
    catalog: Catalog,
    workload: Workload,
    target: Load | None,
    slo: dict[str, float] | None,
    n_requests: int,
    seed: int,
    basis_note: str,
    memory_at: int | None = None,
    batch_cap: int | None = None,
    progress: Callable[[str], None] | None = None,
    cache: dict | None = None,
) -> ScenarioPlan:
    if slo is not None:
        scenario = Scenario(
            scenario.name,
            scenario.description,
            slo,
            "user --slo",
            scenario.load,
            scenario.load_how,
            scenario.objective,
        )
    load = target or scenario.load
    load_how = "user flag" if target else scenario.load_how
    rows = []
    for card in cards:
        if progress:
            progress(f"{scenario.name}: {card.name}")
        rows.append(
            plan_row(card, catalog, workload, scenario, load, n_requests, seed, memory_at, batch_cap, cache)
        )
    return ScenarioPlan(
        scenario=scenario.name,
        description=scenario.description,
        slo=Slo(limits=scenario.slo, how=scenario.slo_how),
        load={"kind": load.kind, "value": load.value, "how": load_how},
        objective=scenario.objective,
        rows=rows,
        recommendation=recommend(scenario, load, rows, basis_note),
    )
