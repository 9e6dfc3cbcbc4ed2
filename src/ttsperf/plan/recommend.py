"""Scenarios, SLO search and the recommendation: cards + workload + load -> a Plan.

For each card: max batch from the memory model; the most load per GPU that meets the SLO, by
bisection over simulated loads; GPUs needed for the target load; latency at the target load per
GPU; $/hour and $/audio-hour. Then one sentence per scenario naming the cheapest card that
meets the SLO.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from ttsperf.plan.cards import Card
from ttsperf.plan.catalog import Catalog
from ttsperf.plan.cost import DEFAULT_GPUS_PER_MACHINE, Ownership, machines_needed
from ttsperf.plan.memory import Workload
from ttsperf.plan.money import money
from ttsperf.plan.scenarios import SLO_METRICS, Scenario, meets, misses
from ttsperf.plan.schema import Basis, PlanRow, Recommended, RowSettings, ScenarioPlan, Slo
from ttsperf.plan.simulate import ENGINES, Engine, Load, SimResult, simulate
from ttsperf.plan.steptime import DEFAULT_T_FIXED_S, EAGER_RANGE_S, MODES, Mode, StepModel
from ttsperf.slo import spec_of


@dataclass
class Capacity:
    value: float  # most streams (int) or req/s per GPU meeting the SLO; 0 = not even the least
    result: SimResult | None  # simulation at that load
    closest: SimResult | None  # at the least load, when even that misses
    above: SimResult | None = None  # the least simulated load that missed the SLO (what binds)
    above_load: Load | None = None


def find_capacity(
    engine: Engine,
    kind: str,
    slo: dict[str, float],
    sim: Callable[[Load], SimResult],
    guess: float | None = None,
    resolution: float = 0.0,
) -> Capacity:
    """Most load per GPU meeting the SLO: bracket, then bisect on simulated runs (latency grows
    with load). Without a guess the bracket grows from the least load (streams double from 1, up
    to 4 x the batch: past it requests queue for a slot; a rate bisects up to the saturated
    throughput); a guess (a neighbouring setting's capacity) brackets in steps of 1.25x from it.
    `resolution`: stop bisecting when the bracket is within this fraction of the load (0: to one
    stream, or 1/256 of the saturated rate)."""
    maxb = engine.max_batch
    if kind == "streams":
        if not slo:  # no bound: more streams than slots only wait, so capacity is the batch
            return Capacity(maxb, sim(Load("streams", maxb)), None)
        least, top = 1, 4 * maxb
        up = (
            (lambda n: min(top, 2 * n))
            if guess is None
            else (lambda n: min(top, max(n + 1, round(n * 1.25))))
        )
        down = lambda n: max(least, min(n - 1, round(n / 1.5)))  # noqa: E731
        mid = lambda a, b: (a + b) // 2 if b - a > max(1, resolution * a) else None  # noqa: E731
        start = least if guess is None else max(least, min(top, int(guess)))
    else:
        saturated = sim(Load("streams", maxb))  # the closed-loop throughput bounds any stable rate
        top = saturated.throughput_rps
        if not slo:
            return Capacity(top, saturated, None)
        least = top / 256
        up = lambda x: min(top, x * 1.25)  # noqa: E731
        down = lambda x: max(least, x / 1.5)  # noqa: E731
        mid = lambda a, b: (a + b) / 2 if b - a > max(top / 256, resolution * a) else None  # noqa: E731
        start = least if guess is None else max(least, min(top, guess))
    r = sim(Load(kind, start))
    above: tuple[float, SimResult] | None = None
    if meets(r, slo):
        lo, best = start, r
        if kind == "rate" and guess is None:
            hi = top  # bisect straight to 1/256 of capacity
        else:
            hi = None
            while hi is None and lo < top:
                n = up(lo)
                r = sim(Load(kind, n))
                if meets(r, slo):
                    lo, best = n, r
                else:
                    hi, above = n, (n, r)
            if hi is None:
                return Capacity(lo, best, None)
    else:
        hi, above = start, (start, r)
        while True:
            if hi <= least:  # not even the least load meets it
                return Capacity(0, None, r, r, Load(kind, hi))
            n = down(hi)
            r = sim(Load(kind, n))
            if meets(r, slo):
                lo, best = n, r
                break
            hi, above = n, (n, r)
    while (m := mid(lo, hi)) is not None:  # the SLO is monotone in load
        r = sim(Load(kind, m))
        if meets(r, slo):
            lo, best = m, r
        else:
            hi, above = m, (m, r)
    value = int(lo) if kind == "streams" else lo
    if above is None:
        return Capacity(value, best, None)
    return Capacity(value, best, None, above[1], Load(kind, above[0]))


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
    cache: dict = field(default_factory=dict)  # (card, setting, load) -> SimResult, across scenarios
    modes: tuple[str, ...] = tuple(MODES)  # --mode: the engine modes searched
    first_chunk_fixed: bool = False  # --first-chunk-steps given: not searched
    step_overhead: float | None = None  # --step-overhead: one what-if overhead instead of the modes
    vocoder_overhead: float | None = None  # --vocoder-overhead
    device_flag: str = "cuda"


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
    """Per GPU-hour, in the plan's currency: owned (amortised + electricity) or the cheapest rental."""
    if s.own is not None and card.name in s.own.purchases:
        watts = card.tdp_w * at_capacity.busy_fraction if card.tdp_w and at_capacity else None
        usd, how = s.own.per_gpu_hour(card.name, watts)
        return usd, Basis(kind="projected", how=f"owned: {how}")
    price = s.catalog.prices.get(card.name)
    if price is None:
        return None, None
    return price.per_gpu_hour, Basis(kind="sourced", how=price.label())


# First-chunk sizes the search may move to, from the official 24 steps (reference/chattts.md):
# smaller ones bring the first audio forward, larger ones buffer more against underruns.
FIRST_CHUNK_LADDER = (8, 12, 16, 24, 32, 48)


@dataclass(frozen=True)
class Candidate:
    """One setting a card is simulated at."""

    mode: Mode
    first_chunk_steps: int
    t_fixed: float | None  # None: the card's own (measured) step
    vocoder_fixed: float | None
    max_batch: int
    batch_limit: str  # "memory" or "max batch": what sets max_batch

    def key(self) -> tuple:
        return (self.mode.name, self.first_chunk_steps, self.t_fixed, self.vocoder_fixed, self.max_batch)


@dataclass
class Searched:
    candidate: Candidate
    engine: Engine
    cap: Capacity
    sim: Callable[[Load], SimResult]


def _simulator(card: Card, c: Candidate, s: Settings, n_requests: int) -> tuple[Engine, Callable]:
    engine = _engine(card, c, s)

    def sim(load: Load) -> SimResult:  # scenarios share loads (realtime/concurrency share the SLO)
        key = (card.name, c.key(), n_requests, load)
        if key not in s.cache:
            s.cache[key] = simulate(engine, load, n_requests=n_requests, seed=s.seed)
        return s.cache[key]

    return engine, sim


def _capacity(
    card: Card,
    c: Candidate,
    scenario: Scenario,
    kind: str,
    s: Settings,
    guess=None,
    n_requests=None,
    resolution: float = 0.0,
) -> Searched:
    """The most load per GPU meeting the scenario's SLO with `card` at setting `c`. Without a
    guess, a coarse search (a quarter of the requests, to 5%) finds one: its runs cost a quarter."""
    n = n_requests or s.n_requests
    engine, sim = _simulator(card, c, s, n)
    coarse = max(250, n // 4)
    if guess is None and scenario.slo and coarse < n:
        _, rough = _simulator(card, c, s, coarse)
        guess = find_capacity(engine, kind, scenario.slo, rough, None, 0.05).value or None
    return Searched(c, engine, find_capacity(engine, kind, scenario.slo, sim, guess, resolution), sim)


def _what_if_mode(t_fixed: float) -> Mode:
    return Mode("what-if", "", t_fixed, t_fixed, t_fixed, f"--step-overhead {t_fixed * 1e3:g}ms (what-if)")


def _engine(card: Card, c: Candidate, s: Settings) -> Engine:
    """The simulated engine of `card` at setting `c` (a copy of its step model, re-set)."""
    step = card.step
    assert step is not None
    if c.t_fixed is not None:
        step = replace(step, t_fixed=c.t_fixed, vocoder_fixed=c.vocoder_fixed, how=dict(step.how))
        step.how["t_fixed"] = f"{c.t_fixed * 1e3:.3g} ms per step, {c.mode.name}: {c.mode.source}"
        if c.vocoder_fixed is not None:
            step.how["vocoder"] += (
                f"; launch cost {c.vocoder_fixed * 1e3:.3g} ms (the call runs eagerly in every mode)"
                if s.vocoder_overhead is None
                else f"; launch cost {c.vocoder_fixed * 1e3:g} ms from --vocoder-overhead (what-if)"
            )
    w = replace(s.workload, first_chunk_steps=c.first_chunk_steps)
    return Engine.kind(s.engine, step, c.max_batch, w)


def _search(
    card: Card, scenario: Scenario, target: Load, s: Settings, maxb: int
) -> tuple[Searched, list[str]]:
    """The best setting for this card: the most load per GPU meeting the SLO, and what was tried.

    Modes are tried from the least overhead up; a mode is skipped when one with less overhead was
    tried and had at least its batch or was not stopped by its batch (the same step with more
    overhead carries no more load). The
    first chunk moves from the official 24 steps (or --first-chunk-steps) in the direction that
    relieves what binds: smaller while TTFA binds, larger while underruns do.
    """
    kind = "streams" if target.kind == "streams" else "rate"
    w = s.workload
    batch_limit = "max batch" if s.batch_cap is not None and s.batch_cap <= maxb else "memory"

    def cand(mode: Mode, fc: int, t_fixed: float | None, vocoder: float | None) -> Candidate:
        b, limit = maxb, batch_limit
        if mode.max_batch is not None and mode.max_batch < b:
            b, limit = mode.max_batch, "max batch"
        return Candidate(mode, fc, t_fixed, vocoder, b, limit)

    def run(c: Candidate, guess: float | None) -> Searched:
        return _capacity(card, c, scenario, kind, s, guess)

    if card.profiled:  # measured in one mode: plan that mode, as measured
        mode = MODES.get(card.mode, MODES["eager"])
        c = cand(mode, w.first_chunk_steps, None, None)
        return run(c, None), [f"{mode.name} as profiled (first chunk {w.first_chunk_steps} steps)"]
    if s.step_overhead is not None:
        modes = [_what_if_mode(s.step_overhead)]
    else:
        modes = sorted((MODES[m] for m in s.modes), key=lambda m: m.t_fixed)
    tried: list[Searched] = []
    skipped: list[str] = []
    for mode in modes:
        c = cand(mode, w.first_chunk_steps, mode.t_fixed, _vocoder(mode, DEFAULT_T_FIXED_S, s))
        if any(  # a mode with less overhead whose batch was not what stopped it carries more
            t.candidate.t_fixed is not None
            and t.candidate.t_fixed <= mode.t_fixed
            and (t.candidate.max_batch >= c.max_batch or not _batch_bound(t, kind, scenario))
            for t in tried
        ):
            skipped.append(mode.name)
            continue
        # a start near the answer: the last mode's capacity on this card (never another card's:
        # a card's row must not depend on which cards are planned beside it)
        guess = max((t.cap.value for t in tried), default=None)
        tried.append(run(c, guess or None))
    best = max(tried, key=lambda t: t.cap.value)  # the first of equals: the least overhead
    fcs: list[int] = []
    if not s.first_chunk_fixed and scenario.slo:
        ladder = sorted(set(FIRST_CHUNK_LADDER) | {w.first_chunk_steps})
        i = ladder.index(w.first_chunk_steps)
        b0 = _binding(best, scenario, kind)[0]
        direction = -1 if b0 in ("ttfa", "host") else 1 if b0 == "underrun" else 0
        while direction and 0 <= i + direction < len(ladder):
            i += direction
            c = replace(best.candidate, first_chunk_steps=ladder[i])
            fcs.append(ladder[i])
            # better only if it meets the SLO just above the best load so far: one run tells
            step_up = Load(kind, best.cap.value + 1 if kind == "streams" else best.cap.value * 1.01)
            if best.cap.value and not meets(_simulator(card, c, s, s.n_requests)[1](step_up), scenario.slo):
                break
            t = run(c, best.cap.value or None)
            if t.cap.value <= best.cap.value:
                break
            best = t
    how = ", ".join(t.candidate.mode.name for t in tried) + f" at first chunk {w.first_chunk_steps}"
    if fcs:
        how += "; first chunk " + ", ".join(map(str, fcs)) + f" with {best.candidate.mode.name}"
    if skipped:
        how += f"; {', '.join(skipped)} not simulated (more overhead per step; a larger batch would not help)"
    return best, [how]


def _batch_bound(t: Searched, kind: str, scenario: Scenario) -> bool:
    """Whether the batch, not the SLO, stopped this setting (a larger batch could carry more)."""
    if not scenario.slo:
        return True  # capacity is the saturated card at its max batch
    if kind == "streams":
        return t.cap.value >= t.candidate.max_batch
    return t.cap.result is not None and t.cap.result.mean_batch >= 0.9 * t.candidate.max_batch


def _vocoder(mode: Mode, eager_end: float, s: Settings) -> float | None:
    """A Decoder+Vocos call's launch cost: --vocoder-overhead, else the eager figure (the call is
    eager in every mode), the same end of the range as the step's overhead."""
    if s.vocoder_overhead is not None:
        return s.vocoder_overhead
    if mode.name == "what-if":
        return None  # follows the what-if overhead, as --step-overhead always has
    return eager_end


def _range(card: Card, best: Searched, scenario: Scenario, kind: str, s: Settings) -> list | None:
    """Load per GPU at the high and low ends of the mode's sourced overhead: [low, high]. A range
    end bounds, it is not the answer: a quarter of the requests (at least 250), to within 5%."""
    c, mode = best.candidate, best.candidate.mode
    if c.t_fixed is None or mode.low == mode.high:
        return None
    out = []
    for t_fixed, eager in ((mode.high, EAGER_RANGE_S[1]), (mode.low, EAGER_RANGE_S[0])):
        end = replace(c, t_fixed=t_fixed, vocoder_fixed=_vocoder(mode, eager, s))
        n = max(250, s.n_requests // 4)
        out.append(_capacity(card, end, scenario, kind, s, best.cap.value or None, n, 0.05).cap.value)
    return out


def _binding(t: Searched, scenario: Scenario, kind: str) -> tuple[str | None, str]:
    """What stops more load per GPU at this setting, and how the plan knows."""
    cap, engine, c = t.cap, t.engine, t.candidate
    if not scenario.slo:
        return "throughput", f"no latency bound: the card saturated at {engine.max_batch} rows"
    if kind == "streams" and cap.value >= engine.max_batch:
        return c.batch_limit, (
            f"{engine.max_batch} rows fill the batch ({c.batch_limit}); more streams queue for a slot"
        )
    r, load = (cap.above, cap.above_load) if cap.above is not None else (cap.closest, None)
    if r is None or load is None:
        return None, ""
    failing = [k for k, v in scenario.slo.items() if r.metric(SLO_METRICS[k]) > v]
    if not failing:
        return None, ""
    k = failing[0]
    name = next((n for n in ("ttfa", "underrun", "rtf") if k.startswith(n)), "e2e")
    step = engine.step
    b = max(r.mean_batch, 1.0)
    ctx = engine.workload.prompt_tokens + engine.workload.steps / 2  # a row's mean context
    overhead = step.t_fixed + step.t_host + step.t_row * b
    device = float(step.roofline(b, b * ctx)) - step.t_fixed
    share = overhead / (overhead + device) if overhead + device > 0 else 0.0
    how = (
        f"{k} {r.metric(SLO_METRICS[k]):.3g} > {scenario.slo[k]:g} at {load.label()}; "
        f"{share:.0%} of a step at batch {b:.0f} is fixed overhead "
        f"({overhead * 1e3:.2f} of {(overhead + device) * 1e3:.2f} ms)"
    )
    if name in ("ttfa", "e2e", "rtf") and share >= 0.5:
        return "host", how + ": the host's launches, not the card, bind"
    return name, how


def serve_flags(c: Candidate, dtype: str, device: str) -> str:
    """The `ttsperf serve` command line for a setting."""
    parts = ["ttsperf serve", f"--device {device}", f"--dtype {dtype}"]
    if c.mode.flag:
        parts.append(c.mode.flag)
    parts += [f"--max-batch {c.max_batch}", f"--first-chunk-steps {c.first_chunk_steps}"]
    return " ".join(parts)


def _row_settings(card: Card, t: Searched, searched: list[str], s: Settings) -> RowSettings:
    c = t.candidate
    device = "cpu" if card.device == "other" else s.device_flag
    step = t.engine.step
    measured = c.t_fixed is None
    return RowSettings(
        dtype=step.dtype,
        mode=c.mode.name,
        step_overhead_s=step.t_fixed,
        step_overhead_range_s=None if measured or c.mode.low == c.mode.high else [c.mode.low, c.mode.high],
        first_chunk_steps=c.first_chunk_steps,
        max_batch=c.max_batch,
        serve_flags=serve_flags(c, step.dtype, device),
        searched="; ".join(searched),
    )


def plan_row(card: Card, scenario: Scenario, target: Load, s: Settings) -> PlanRow:
    w = s.workload
    maxb, maxb_basis = card.max_batch(w, cap=s.batch_cap)
    memory = card.memory.breakdown(s.memory_at or max(maxb, 1), w)
    memory["card"] = card.memory_bytes
    basis = dict(card.basis)
    basis["max_batch"] = maxb_basis
    basis.update(_input_bases(card, card.step))
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
            device=card.device,  # type: ignore[arg-type]
            currency=s.catalog.currency,
            **row,
        )
    kind = "streams" if target.kind == "streams" else "rate"
    best, searched = _search(card, scenario, target, s, maxb)
    engine, cap, sim = best.engine, best.cap, best.sim
    basis.update(_input_bases(card, engine.step))  # the step model of the setting chosen
    binding, binding_how = _binding(best, scenario, kind)
    span = _range(card, best, scenario, kind, s)
    row["settings"] = _row_settings(card, best, searched, s)
    row["binding"], row["binding_how"] = binding, binding_how
    if span is not None:
        row["max_streams_range" if kind == "streams" else "max_rate_range"] = (
            [int(v) for v in span] if kind == "streams" else span
        )
    step_how = "; ".join(f"{k}: {v}" for k, v in engine.step.how.items())
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
        device=card.device,  # type: ignore[arg-type]
        currency=s.catalog.currency,
        **row,
    )


# Inputs computed here from the architecture (the rest are defaults/quotes/catalog values: "sourced").
_COMPUTED = {"weights_bytes", "kv_bytes_per_token", "vocoder", "prefill"}


def _input_bases(card: Card, step: StepModel | None) -> dict[str, Basis]:
    """The memory and step-model inputs of this card's row, each measured, computed or sourced."""
    out: dict[str, Basis] = {}
    models: list[tuple[str, dict[str, str], set[str]]] = [("memory", card.memory.how, card.memory.measured)]
    if step is not None:
        models.append(("step", step.how, step.measured))
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


def _measured(r: PlanRow) -> bool:
    return "step.t_fixed" in r.basis and r.basis["step.t_fixed"].kind == "measured"


def gpus_range(target: Load, r: PlanRow) -> list[int] | None:
    """GPUs needed at the high and low ends of a row's capacity range (low capacity -> more GPUs)."""
    span = r.max_streams_range or r.max_rate_range
    if span is None:
        return None
    lo, hi = span
    if not lo:
        return None
    return [_per_gpu(target, hi)[1], _per_gpu(target, lo)[1]]


def setting_words(r: PlanRow) -> str:
    """'cuda-graphs, fp16, first chunk 24 steps' for a row."""
    st = r.settings
    if st is None:
        return ""
    return f"{st.mode}, {st.dtype}, first chunk {st.first_chunk_steps} steps"


def recommend(
    scenario: Scenario, target: Load, rows: list[PlanRow], basis_note: str
) -> tuple[str, Recommended | None]:
    """One sentence, and its numbers: the cheapest GPU meeting the SLO for the target load, at
    which setting, what binds and over what range; or why there is none."""
    slo = spec_of(scenario.slo) if scenario.slo else "no latency bound"  # as bench --slo takes it
    head = f"{scenario.name} ({slo}; {target.label()})"
    gpus = [r for r in rows if r.device == "gpu"]
    ok = [r for r in gpus if r.meets_slo and r.gpus_needed]
    if not ok:
        fits = [r for r in gpus if r.fits and r.ttfa_p99_s is not None]
        if not fits:
            return f"{head}: no card in the selection fits the workload.", None
        best = min(fits, key=lambda r: r.ttfa_p99_s or math.inf)
        return (
            f"{head}: no card meets the SLO; the closest is {best.gpu} "
            f"(TTFA P99 {best.ttfa_p99_s:.3f} s, E2E P99 {best.p99_s:.2f} s at the least load"
            f"{', ' + setting_words(best) if best.settings else ''}); {basis_note}.",
            None,
        )
    key = scenario.objective
    priced = [r for r in ok if getattr(r, key) is not None]
    unpriced = [r.gpu for r in ok if getattr(r, key) is None]
    tail = f" (also meeting it but without a price: {', '.join(unpriced)})" if unpriced else ""
    if priced:
        best = min(priced, key=lambda r: (getattr(r, key), r.gpus_needed, r.p99_s or math.inf))
        cur = best.currency
        what = (
            f"{best.gpus_needed} x {best.gpu} at {money(best.usd_per_hour, cur)}/h "
            f"({money(best.usd_per_audio_hour, cur)} per audio hour) is the cheapest that meets it{tail}; "
            f"price: {best.basis['usd_per_gpu_hour'].how}"
        )
    else:
        best = min(ok, key=lambda r: (r.gpus_needed, r.p99_s or math.inf))
        what = f"no card that meets the SLO has a price; fewest GPUs: {best.gpus_needed} x {best.gpu}"
    assert best.gpus_needed is not None
    span = best.max_streams_range or best.max_rate_range
    n_range = gpus_range(target, best)
    streams = target.kind == "streams"
    unit, fmt = ("streams", "d") if streams else ("req/s", ".3g")
    parts = []
    if best.settings is not None:
        parts.append(f"with {setting_words(best)} (`{best.settings.serve_flags}`)")
    if best.binding:
        parts.append(f"bound by {best.binding}")
    centre = best.max_streams if streams else best.max_rate_rps
    if centre is not None:  # the centre, then the range over the overhead's sourced ends
        cap = f"{format(centre, fmt)} {unit} per GPU"
        if span is not None:
            cap += f" ({format(span[0], fmt)}-{format(span[1], fmt)} over the overhead's sourced range"
            if n_range is not None and n_range[0] != n_range[1]:
                cap += f", so {n_range[0]}-{n_range[1]} GPUs"
            cap += ")"
        parts.append(cap)
    measured = _measured(best)
    parts.append(
        "its step times measured by a profile of this card"
        if measured
        else "projected, not measured on this card: run `ttsperf profile` on it"
    )
    if scenario.slo:  # the plan's own check: bench takes its SLO text unchanged
        load_flag = (
            f"--concurrency {best.max_streams}"
            if target.kind == "streams"
            else f"--rate {best.max_rate_rps:.3g}"
        )
        # streamed: TTFA and underruns exist only for a stream; 400 requests: enough for a P99's
        # interval to have its high end (bench: n >= 368 at 95%)
        stream = " --stream" if any(k.startswith(("ttfa", "underrun")) for k in scenario.slo) else ""
        spec = spec_of(scenario.slo)
        parts.append(f"check it with `ttsperf bench URL{stream} {load_flag} --requests 400 --slo {spec}`")
    sentence = f"{head}: {what}; " + "; ".join(parts) + f"; {basis_note}."
    rec = Recommended(
        gpu=best.gpu,
        gpus_needed=best.gpus_needed,
        gpus_needed_range=n_range,
        settings=best.settings,
        binding=best.binding,
        max_streams=best.max_streams,
        max_streams_range=best.max_streams_range,
        max_rate_rps=best.max_rate_rps,
        max_rate_range=best.max_rate_range,
        currency=best.currency,
        usd_per_gpu_hour=best.usd_per_gpu_hour,
        usd_per_hour=best.usd_per_hour,
        usd_per_audio_hour=best.usd_per_audio_hour,
        measured=measured,
    )
    return sentence, rec


def _with_slo(scenario: Scenario, slo: dict[str, float] | None) -> Scenario:
    if slo is None:
        return scenario
    return Scenario(
        scenario.name,
        scenario.description,
        slo,
        "user --slo",
        scenario.load,
        scenario.load_how,
        scenario.objective,
    )


def _card_rows(card: Card, work: list[tuple[Scenario, Load]], settings: Settings) -> list[PlanRow]:
    """One card's row in every scenario (they share its simulations: one process per card)."""
    return [plan_row(card, scenario, load, settings) for scenario, load in work]


def _workers(cards: int) -> int:
    """Processes to plan cards in: one per CPU this process may run on, when there are enough
    cards to pay for starting them (a fresh interpreter each, ~1 s)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, cards) if cards >= 6 else 1


def plan_scenarios(
    scenarios: list[Scenario],
    cards: list[Card],
    target: Load | None,
    slo: dict[str, float] | None,
    settings: Settings,
    basis_note: str,
    progress: Callable[[str], None] | None = None,
) -> list[ScenarioPlan]:
    """Every card in every scenario, cards in parallel processes (each card's rows depend on that
    card alone, so the result is the same whatever the split), then one recommendation each."""
    resolved = [_with_slo(sc, slo) for sc in scenarios]
    work = [(sc, target or sc.load) for sc in resolved]
    rows_of: list[list[PlanRow]] = []
    workers = _workers(len(cards))
    if workers == 1:
        for card in cards:
            if progress:
                progress(card.name)
            rows_of.append(_card_rows(card, work, settings))
    else:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process whose threads hold locks
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            futures = [pool.submit(_card_rows, card, work, settings) for card in cards]
            done = 0
            for card, fut in zip(cards, futures, strict=True):
                rows_of.append(fut.result())
                done += 1
                if progress:
                    progress(f"{card.name} ({done}/{len(cards)}, {workers} processes)")
    plans = []
    for j, (scenario, load) in enumerate(work):
        rows = [r[j] for r in rows_of]
        sentence, rec = recommend(scenario, load, rows, basis_note)
        plans.append(
            ScenarioPlan(
                scenario=scenario.name,
                description=scenario.description,
                slo=Slo(limits=scenario.slo, how=scenario.slo_how),
                load={
                    "kind": load.kind,
                    "value": load.value,
                    "how": "user flag" if target else scenario.load_how,
                },
                objective=scenario.objective,
                rows=rows,
                recommendation=sentence,
                recommended=rec,
            )
        )
    return plans
