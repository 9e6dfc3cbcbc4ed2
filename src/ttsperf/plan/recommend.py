"""Scenarios, SLO search and the recommendation: cards + workload + load -> a Plan.

For each card: max batch from the memory model; the most load per GPU that meets the SLO, by
bisection over simulated loads; GPUs needed for the target load; latency at the target load per
GPU; $/hour and $/audio-hour. Then one sentence per scenario naming the cheapest card that
meets the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ttsperf.plan.cards import Card
from ttsperf.plan.catalog import Catalog
from ttsperf.plan.cost import DEFAULT_GPUS_PER_MACHINE, Ownership, machines_needed
from ttsperf.plan.memory import Workload
from ttsperf.plan.scenarios import Scenario, meets, misses
from ttsperf.plan.schema import Basis, PlanRow, ScenarioPlan, Slo
from ttsperf.plan.simulate import ENGINES, Engine, Load, SimResult, simulate


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


@dataclass
class Settings:
    """What every row of a plan shares."""

    catalog: Catalog
    workload: Workload
    n_requests: int = 1000
    seed: int = 0
    memory_at: int | None = None  # memory breakdown at this batch (default: at max batch)
    batch_cap: int | None = None  # the engine's slot limit, below what memory allows
    own: Ownership | None = None
    engine: str = "ttsperf"  # simulate.ENGINES
    gpus_per_machine: int = DEFAULT_GPUS_PER_MACHINE
    cache: dict = field(default_factory=dict)  # (card, load) -> SimResult, shared across scenarios


LATENCY_KEYS = ("step_ms", "p50_s", "p99_s", "ttfa_p99_s", "rtf_p99", "underrun_p99_s", "mean_batch")
_EMPTY = dict.fromkeys(
    (
        *LATENCY_KEYS,
        "max_streams",
        "max_rate_rps",
        "gpus_needed",
        "replicas",
        "machines",
        "usd_per_hour",
        "usd_per_audio_hour",
        "watts",
        "kwh_per_audio_hour",
        "usd_per_gpu_hour",
    )
)


def _latency(r: SimResult) -> dict[str, float]:
    return dict(
        zip(
            LATENCY_KEYS,
            (r.mean_step_s * 1e3, r.p50_s, r.p99_s, r.ttfa_p99_s, r.rtf_p99, r.underrun_p99_s, r.mean_batch),
            strict=True,
        )
    )


def _hourly(card: Card, s: Settings, at_capacity: SimResult | None) -> tuple[float | None, Basis | None]:
    """USD per GPU-hour: owned (amortised + electricity at capacity) or the cheapest rental price."""
    if s.own is not None and card.name in s.own.purchases:
        watts = card.tdp_w * at_capacity.busy_fraction if card.tdp_w and at_capacity else None
        usd, how = s.own.usd_per_gpu_hour(card.name, watts)
        return usd, Basis(kind="projected", how=f"owned: {how}")
    price = s.catalog.prices.get(card.name)
    if price is None:
        return None, None
    return price.usd_per_gpu_hour, Basis(kind="sourced", how=price.label())


def plan_row(card: Card, scenario: Scenario, target: Load, s: Settings) -> PlanRow:
    w = s.workload
    maxb, maxb_basis = card.max_batch(w, cap=s.batch_cap)
    memory = card.memory.breakdown(s.memory_at or max(maxb, 1), w)
    memory["card"] = card.memory_bytes
    basis = dict(card.basis)
    basis["max_batch"] = maxb_basis
    basis.update(_input_bases(card))
    row = dict(_EMPTY)
    if card.step is None or maxb == 0:
        usd, price_basis = _hourly(card, s, None)
        if price_basis:
            basis["usd_per_gpu_hour"] = price_basis
        note = card.note or f"does not fit: one sequence needs {card.memory.total(1, w) / 2**30:.2f} GiB"
        row["usd_per_gpu_hour"] = usd
        return PlanRow(
            gpu=card.name,
            fits=False,
            max_batch=maxb,
            meets_slo=False,
            memory_bytes=memory,
            note=note,
            basis=basis,
            **row,
        )
    engine = Engine.kind(s.engine, card.step, maxb, w)

    def sim(load: Load) -> SimResult:  # scenarios share loads (realtime/concurrency share the SLO)
        key = (card.name, load)
        if key not in s.cache:
            s.cache[key] = simulate(engine, load, n_requests=s.n_requests, seed=s.seed)
        return s.cache[key]

    cap = find_capacity(engine, target.kind if target.kind == "streams" else "rate", scenario.slo, sim)
    step_how = "; ".join(f"{k}: {v}" for k, v in card.step.how.items())
    formula = "t(B,L) = t_fixed + max(bytes(B,L)/(BW x MBU), flops(B,L)/(peak x MFU))"
    sim_how = (
        f"discrete-event simulation of continuous batching ({ENGINES[s.engine]}), {s.n_requests} requests, "
        f"seed {s.seed}, "
        f"steps at {formula} [{step_how}]"
    )
    notes = [card.note] if card.note else []
    usd, price_basis = _hourly(card, s, cap.result)
    row["usd_per_gpu_hour"] = usd
    if price_basis:
        basis["usd_per_gpu_hour"] = price_basis
    if cap.value > 0 and cap.result is not None:
        per_gpu_load, gpus = _per_gpu(target, cap.value)
        at = sim(per_gpu_load)
        row.update(_latency(at), gpus_needed=gpus, replicas=gpus)
        row["machines"] = machines_needed(gpus, s.gpus_per_machine)
        cap_key = "max_streams" if target.kind == "streams" else "max_rate_rps"
        row[cap_key] = int(cap.value) if target.kind == "streams" else cap.value
        if not at.p99_resolved:
            notes.append(f"P99 from {at.n} requests is not resolved (needs >= 1000)")
        if not meets(at, scenario.slo):  # rounding the per-GPU load up can cross the bound
            notes.append(f"at {per_gpu_load.label()} per GPU: {misses(at, scenario.slo)}")
        basis_load = f"at {per_gpu_load.label()} per GPU ({gpus} GPUs for {target.label()})"
        for key in LATENCY_KEYS:
            basis[key] = Basis(kind="projected", how=f"{basis_load}: {sim_how}")
        basis[cap_key] = Basis(
            kind="projected",
            how=f"bisection on simulated load for SLO {scenario.slo or 'none'}"
            + ("" if scenario.slo else " (none: saturated throughput at max batch)"),
        )
        basis["gpus_needed"] = Basis(kind="projected", how=f"ceil(target {target.label()} / {cap_key})")
        basis["replicas"] = Basis(kind="projected", how="gpus_needed: one engine per GPU (serve --ray)")
        basis["machines"] = Basis(
            kind="projected", how=f"ceil(gpus_needed / {s.gpus_per_machine} GPUs per machine)"
        )
        throughput = cap.result.audio_throughput
        if usd is not None:
            row["usd_per_hour"] = gpus * usd
            row["usd_per_audio_hour"] = usd / throughput
            basis["usd_per_audio_hour"] = Basis(
                kind="projected",
                how=f"usd_per_gpu_hour / audio hours per GPU-hour at {cap_key} "
                f"({throughput:.3g} audio-s per s)",
            )
        if card.tdp_w:
            row["watts"] = card.tdp_w * at.busy_fraction
            row["kwh_per_audio_hour"] = card.tdp_w * cap.result.busy_fraction / 1000 / throughput
            power = (
                f"TDP {card.tdp_w:g} W (catalog) x simulated busy fraction; assumption: a busy card draws "
                "its TDP, an idle one nothing (no measured power)"
            )
            basis["watts"] = Basis(kind="projected", how=f"{basis_load}: {power}")
            basis["kwh_per_audio_hour"] = Basis(
                kind="projected", how=f"at {cap_key}: {power}, over {throughput:.3g} audio-s per s"
            )
    else:
        closest = cap.closest
        assert closest is not None
        row.update(_latency(closest))
        row["max_streams" if target.kind == "streams" else "max_rate_rps"] = 0
        notes.append(
            f"misses the SLO even at the least load ({misses(closest, scenario.slo)}); "
            "latencies shown are at that least load"
        )
        for key in LATENCY_KEYS:
            basis[key] = Basis(kind="projected", how=f"at the least load: {sim_how}")
    if usd is None:
        notes.append("no price: supply one with --price, --prices or --own")
    return PlanRow(
        gpu=card.name,
        fits=True,
        max_batch=maxb,
        meets_slo=cap.value > 0,
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
    # at least one GPU, also when a card's capacity is unbounded (a degenerate, near-zero step time)
    if target.kind == "streams":
        gpus = max(1, math.ceil(target.value / capacity))
        return Load("streams", math.ceil(target.value / gpus)), gpus
    gpus = max(1, math.ceil(target.value / capacity - 1e-9))
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
    target: Load | None,
    slo: dict[str, float] | None,
    settings: Settings,
    basis_note: str,
    progress: Callable[[str], None] | None = None,
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
        rows.append(plan_row(card, scenario, load, settings))
    return ScenarioPlan(
        scenario=scenario.name,
        description=scenario.description,
        slo=Slo(limits=scenario.slo, how=scenario.slo_how),
        load={"kind": load.kind, "value": load.value, "how": load_how},
        objective=scenario.objective,
        rows=rows,
        recommendation=recommend(scenario, load, rows, basis_note),
    )
