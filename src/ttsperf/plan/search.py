"""The settings search: for one card and scenario, the engine setting (mode, first chunk, batch)
that carries the most load per GPU under the SLO, what binds there, and the load at the ends of
the mode's sourced overhead range.

A setting is a `Candidate`; `capacity_at` simulates the card at one (through a per-card cache of
runs, `Simulations`) and bisects its capacity (capacity.py); `search` walks the modes and the
first-chunk ladder.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ttsperf.errors import UserError
from ttsperf.plan.capacity import Capacity, Simulator, find_capacity
from ttsperf.plan.cards import Card, with_overheads
from ttsperf.plan.catalog import Catalog
from ttsperf.plan.cost import DEFAULT_GPUS_PER_MACHINE, Ownership
from ttsperf.plan.fluid import fluid_start, fluid_streams
from ttsperf.plan.memory import Workload
from ttsperf.plan.overhead import default_modes
from ttsperf.plan.scenarios import Scenario, meets
from ttsperf.plan.simulate import EngineModel, Load, SimResult, simulate
from ttsperf.plan.steptime import GRAPHS_MAX_BATCH, MODE_FLAGS, Mode


@dataclass
class PlanContext:
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
    modes: tuple[str, ...] = tuple(MODE_FLAGS)  # --mode: the engine modes searched
    text_set: str | None = None  # the workload is this bench text set's (None: --audio-seconds)
    # each mode's fixed costs, from a host profile (plan/overhead.py); and the prefill's host work
    mode_table: dict[str, Mode] = field(default_factory=default_modes)
    prefill_host: list[tuple[int, float]] = field(default_factory=list)
    first_chunk_fixed: bool = False  # --first-chunk-steps given: not searched
    step_overhead: float | None = None  # --step-overhead: one what-if overhead instead of the modes
    vocoder_overhead: float | None = None  # --vocoder-overhead
    device_flag: str = "cuda"


@dataclass
class Simulations:
    """Simulated runs by (engine, requests, load), shared by a card's scenarios (realtime and
    concurrency share an SLO, so their searches meet the same loads) and by cards whose engines
    are the same (a card sold under two names: A800 and A100, RTX 4090 D and RTX 4090)."""

    seed: int
    runs: dict[tuple, SimResult] = field(default_factory=dict)

    def simulator(self, engine: EngineModel, n_requests: int, think_s: float | None = None) -> Simulator:
        """A closed loop's streams are the scenario's: listeners when `think_s` is set."""
        engine_key = engine_signature(engine)

        def sim(load: Load) -> SimResult:
            if load.kind == "streams":
                load = replace(load, think_s=think_s)
            key = (engine_key, n_requests, load)
            if key not in self.runs:
                self.runs[key] = simulate(engine, load, n_requests=n_requests, seed=self.seed)
            return self.runs[key]

        return sim


def engine_signature(engine: EngineModel) -> bytes:
    """What a simulation depends on: the engine with its numbers, not where they came from."""
    return pickle.dumps(replace(engine, step=replace(engine.step, basis={})))


# A capacity is bisected to within this share of the load. The same card simulated on other
# seeds moves its capacity by up to ~4% (docs/PLANNING.md, "Ties"): a finer search would only
# resolve one seed's draw, and two capacities closer than this are reported as tied.
RESOLUTION = 0.05

# First-chunk sizes the search may move to, from the official 24 steps (docs/reference/chattts.md):
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


@dataclass
class Searched:
    """A card's capacity at one setting, and the simulator that found it."""

    candidate: Candidate
    engine: EngineModel
    cap: Capacity
    sim: Simulator


@dataclass
class Search:
    """One card in one scenario: what `capacity_at` needs besides the setting."""

    card: Card
    scenario: Scenario
    kind: str  # "streams" or "rate"
    ctx: PlanContext
    sims: Simulations


def capacity_at(
    q: Search,
    c: Candidate,
    guess: float | None = None,
    n_requests: int | None = None,
    resolution: float = RESOLUTION,
    step: float = 1.25,
    down: float = 1.5,
) -> Searched:
    """The most load per GPU meeting the scenario's SLO with the card at setting `c`. Without a
    guess, a closed loop starts from its fluid limit, and a coarse search (a quarter of the
    requests, to 5%) finds one: its runs cost a quarter. `step`, `down`: how far the bracket moves
    up and down from the guess (less for a guess known to be close)."""
    n = n_requests or q.ctx.n_requests
    engine = engine_at(q.card, c, q.ctx)
    think = q.scenario.think_s
    sim = q.sims.simulator(engine, n, think)
    coarse = max(250, n // 4)
    slo = q.scenario.slo
    if guess is None and slo and q.kind == "streams":
        # from the fluid limit: over the catalog the answer lay within FLUID_STEP^2 of it either
        # way (fluid.START_SHARE); elsewhere the search just takes more steps to reach it
        guess, step, down = fluid_start(engine, slo, think), FLUID_STEP, FLUID_STEP
        if coarse < n and guess is not None:
            rough = q.sims.simulator(engine, coarse, think)
            guess = find_capacity(engine.max_batch, q.kind, slo, rough, guess, 0.05, step, down).value or None
            step, down = FINE_STEP, FINE_STEP
    if guess is None and slo and coarse < n:
        rough = q.sims.simulator(engine, coarse, think)
        guess = find_capacity(engine.max_batch, q.kind, slo, rough, None, 0.05).value or None
    return Searched(
        c, engine, find_capacity(engine.max_batch, q.kind, slo, sim, guess, resolution, step, down), sim
    )


def coarse(q: Search) -> int:
    """Requests per run while comparing settings: a quarter of the answer's (a coarse capacity
    falls within ~5% of the fine one; the chosen setting is then searched on every request)."""
    return min(q.ctx.n_requests, max(250, q.ctx.n_requests // 4))


COARSE_RESOLUTION = 0.08
# the chosen setting's fine search starts from its coarse capacity and moves by this much
FINE_STEP = 1 + RESOLUTION
# the overhead range's ends start from the centre moved as the fluid limit moves, in steps of this
END_STEP = 1 + COARSE_RESOLUTION
# a search from the fluid limit's start (fluid.START_SHARE) moves by this much either way
FLUID_STEP = 1.2


def what_if_mode(t_fixed: float) -> Mode:
    """--step-overhead: one overhead instead of the engine's modes."""
    return Mode("what-if", "", t_fixed, t_fixed, t_fixed, f"--step-overhead {t_fixed * 1e3:g}ms (what-if)")


def engine_at(card: Card, c: Candidate, ctx: PlanContext) -> EngineModel:
    """The simulated engine of `card` at setting `c` (a copy of its step model at the setting's
    overheads; a profiled card's step as measured)."""
    step = card.mode_steps.get(c.mode.name, card.step)  # a profile of every mode: the mode's own
    assert step is not None
    if c.t_fixed is not None:
        vocoder_how = None
        if c.vocoder_fixed is not None:
            vocoder_how = (
                f"; fixed cost {c.vocoder_fixed * 1e3:.3g} ms per call in {c.mode.name} (how: step.t_fixed)"
                if ctx.vocoder_overhead is None
                else f"; launch cost {c.vocoder_fixed * 1e3:g} ms from --vocoder-overhead (what-if)"
            )
        t_how = f"{c.t_fixed * 1e3:.3g} ms per step, {c.mode.name}: {c.mode.source}"
        step = with_overheads(step, c.t_fixed, t_how, c.vocoder_fixed, vocoder_how)
        if ctx.prefill_host and not step.prefill_points:  # measured on this card: as measured
            step = replace(step, prefill_host=ctx.prefill_host)
    w = replace(ctx.workload, first_chunk_steps=c.first_chunk_steps)
    return EngineModel.of(step, c.max_batch, w)


def search(q: Search, maxb: int) -> tuple[Searched, list[str]]:
    """The best setting for this card: the most load per GPU meeting the SLO, and what was tried."""
    w, ctx = q.ctx.workload, q.ctx
    batch_limit = "max batch" if ctx.batch_cap is not None and ctx.batch_cap <= maxb else "memory"

    def cand(mode: Mode, t_fixed: float | None, vocoder: float | None) -> Candidate:
        b, limit = maxb, batch_limit
        if mode.max_batch is not None and mode.max_batch < b:
            b, limit = mode.max_batch, "max batch"
        return Candidate(mode, w.first_chunk_steps, t_fixed, vocoder, b, limit)

    if q.card.mode_steps:  # measured in every mode: search the modes asked for, as measured
        return _search_measured(q, cand)
    if q.card.profiled:  # measured in one mode: plan that mode, as measured
        name = q.card.mode if q.card.mode in MODE_FLAGS else "eager"
        # a graphed card runs graphs only up to the rows serve captures: plan and print that batch
        cap = GRAPHS_MAX_BATCH if name == "cuda-graphs" else None
        mode = Mode(name, MODE_FLAGS[name], 0.0, 0.0, 0.0, "as profiled", max_batch=cap)
        return capacity_at(q, cand(mode, None, None)), [
            f"{mode.name} as profiled (first chunk {w.first_chunk_steps} steps)"
        ]
    if ctx.step_overhead is not None:
        modes = [what_if_mode(ctx.step_overhead)]
    else:
        modes = sorted((ctx.mode_table[m] for m in ctx.modes if m in ctx.mode_table), key=lambda m: m.t_fixed)
        if not modes:
            raise UserError(
                f"--mode {','.join(ctx.modes)}: the host profile measured only {', '.join(ctx.mode_table)} "
                "(profile --host without --no-host-compile measures compile too)"
            )
    cands = [cand(m, m.t_fixed, vocoder_fixed(m, "centre", ctx)) for m in modes]
    # settings compared on a quarter of the requests, the chosen one searched on all of them
    tried, skipped = _search_modes(q, cands)
    best = max(tried, key=lambda t: t.cap.value)  # the first of equals: the least overhead
    best, fcs = _search_first_chunk(q, best)
    if coarse(q) < ctx.n_requests:
        best = capacity_at(q, best.candidate, best.cap.value or None, step=FINE_STEP, down=FINE_STEP)
    how = ", ".join(t.candidate.mode.name for t in tried) + f" at first chunk {w.first_chunk_steps}"
    if fcs:
        how += "; first chunk " + ", ".join(map(str, fcs)) + f" with {best.candidate.mode.name}"
    if skipped:
        how += (
            f"; {', '.join(skipped)} not searched (more overhead per step: a larger batch would not "
            "help, or it misses the SLO above the best load)"
        )
    return best, [how]


def _search_measured(q: Search, cand: Callable[..., Candidate]) -> tuple[Searched, list[str]]:
    """A card profiled in every mode: the modes asked for that it measured, each as measured (the
    least fixed cost first, as projected modes are searched); a mode asked for that it did not
    measure is not guessed."""
    card, ctx, w = q.card, q.ctx, q.ctx.workload
    names = [m for m in ctx.modes if m in card.mode_steps]
    if not names:
        raise UserError(
            f"--mode {','.join(ctx.modes)}: {card.searched_in} measured {', '.join(card.mode_steps)} "
            "on this card; plan one of those, or profile the card with --modes"
        )
    names.sort(key=lambda m: card.mode_steps[m].t_fixed)
    caps = {"cuda-graphs": GRAPHS_MAX_BATCH}  # graphs cover the rows serve captures, no more
    modes = [Mode(m, MODE_FLAGS[m], 0.0, 0.0, 0.0, "as profiled", max_batch=caps.get(m)) for m in names]
    tried, skipped = _search_modes(q, [cand(m, None, None) for m in modes])
    best = max(tried, key=lambda t: t.cap.value)
    if coarse(q) < ctx.n_requests:
        best = capacity_at(q, best.candidate, best.cap.value or None, step=FINE_STEP, down=FINE_STEP)
    how = ", ".join(f"{t.candidate.mode.name} as profiled" for t in tried)
    how += f" (first chunk {w.first_chunk_steps} steps)"
    if skipped:
        how += f"; {', '.join(skipped)} not searched (it misses the SLO above the best load)"
    return best, [how]


def _beats(q: Search, c: Candidate, value: float) -> bool:
    """Whether setting `c` meets the SLO just above `value`, the best load so far: one run tells
    whether searching it could find more (meeting the SLO is monotone in load)."""
    if not value:
        return True
    sim = q.sims.simulator(engine_at(q.card, c, q.ctx), coarse(q), q.scenario.think_s)
    return meets(sim(Load(q.kind, _just_above(q.kind, value))), q.scenario.slo)


def _just_above(kind: str, value: float) -> float:
    """The load `_beats` tries: one stream more, or 1% more requests/s. A search of a setting that
    beat `value` starts there: its run is simulated already (Simulations caches it)."""
    return value + 1 if kind == "streams" else value * 1.01


def _search_modes(q: Search, cands: list[Candidate]) -> tuple[list[Searched], list[str]]:
    """Modes from the least overhead up; a mode is skipped when one with less overhead was tried
    and had at least its batch or was not stopped by its batch (the same step with more overhead
    carries no more load), or when it misses the SLO just above the best load so far."""
    tried: list[Searched] = []
    skipped: list[str] = []
    for c in cands:
        if any(
            t.candidate.t_fixed is not None
            and c.t_fixed is not None
            and t.candidate.t_fixed <= c.t_fixed
            and (t.candidate.max_batch >= c.max_batch or not _batch_bound(t, q.kind, q.scenario))
            for t in tried
        ):
            skipped.append(c.mode.name)
            continue
        # a start near the answer: the last mode's capacity on this card (never another card's:
        # a card's row must not depend on which cards are planned beside it)
        guess = max((t.cap.value for t in tried), default=None)
        start = None
        if guess and q.scenario.slo:
            if not _beats(q, c, guess):
                skipped.append(c.mode.name)
                continue
            start = _just_above(q.kind, guess)
        tried.append(capacity_at(q, c, start, coarse(q), COARSE_RESOLUTION))
    return tried, skipped


def _search_first_chunk(q: Search, best: Searched) -> tuple[Searched, list[int]]:
    """The first chunk moves from the official 24 steps (or --first-chunk-steps) in the direction
    that relieves what binds: smaller while TTFA binds, larger while underruns do."""
    w, slo = q.ctx.workload, q.scenario.slo
    fcs: list[int] = []
    if q.ctx.first_chunk_fixed or not slo:
        return best, fcs
    ladder = sorted(set(FIRST_CHUNK_LADDER) | {w.first_chunk_steps})
    i = ladder.index(w.first_chunk_steps)
    limit, _, fixed = _what_binds(best, q.scenario, q.kind)
    # a smaller first chunk relieves TTFA (and a latency the fixed overhead sets); a larger one
    # relieves underruns, whatever sets the step
    direction = 1 if limit == "underrun" else -1 if limit == "ttfa" or fixed else 0
    while direction and 0 <= i + direction < len(ladder):
        i += direction
        c = replace(best.candidate, first_chunk_steps=ladder[i])
        fcs.append(ladder[i])
        value = best.cap.value
        if not _beats(q, c, value):
            break
        t = capacity_at(q, c, _just_above(q.kind, value) if value else None, coarse(q), COARSE_RESOLUTION)
        if t.cap.value <= value:
            break
        best = t
    return best, fcs


def _batch_bound(t: Searched, kind: str, scenario: Scenario) -> bool:
    """Whether the batch, not the SLO, stopped this setting (a larger batch could carry more)."""
    if not scenario.slo:
        return True  # capacity is the saturated card at its max batch
    if kind == "streams":
        return t.cap.value >= t.candidate.max_batch
    return t.cap.result is not None and t.cap.result.mean_batch >= 0.9 * t.candidate.max_batch


def vocoder_fixed(mode: Mode, end: str, ctx: PlanContext) -> float | None:
    """A Decoder+Vocos call's fixed cost: --vocoder-overhead, else the mode's own (the engine runs
    the call in the step's mode), at the same end of the range as the step's overhead."""
    if ctx.vocoder_overhead is not None:
        return ctx.vocoder_overhead
    if mode.audio is None:
        return None  # follows the step's overhead, as --step-overhead always has
    return getattr(mode.audio, end)


def overhead_range(q: Search, best: Searched) -> list | None:
    """Load per GPU over the mode's sourced overhead range: [low, high], the capacities simulated at
    its high end, its centre (the answer) and its low end; the ends as settings are compared (a
    quarter of the requests, to 8%, from the centre). Load falls as overhead grows; where a
    simulation's noise inverts that by a few streams, the range still holds all three."""
    c, mode = best.candidate, best.candidate.mode
    if c.t_fixed is None or mode.low == mode.high:
        return None
    values = [best.cap.value]
    centre = _fluid(q, best.engine)
    for t_fixed, e in ((mode.high, "high"), (mode.low, "low")):
        end = replace(c, t_fixed=t_fixed, vocoder_fixed=vocoder_fixed(mode, e, q.ctx))
        guess = best.cap.value or None
        fluid_end = _fluid(q, engine_at(q.card, end, q.ctx))
        if guess and centre and fluid_end:  # moved as the fluid limit moves with the overhead
            guess = max(1.0, round(guess * fluid_end / centre))
        ends = capacity_at(q, end, guess, coarse(q), COARSE_RESOLUTION, END_STEP, END_STEP)
        values.append(ends.cap.value)
    return [min(values), max(values)]


def _fluid(q: Search, engine: EngineModel) -> float | None:
    return fluid_streams(engine, q.scenario.slo, q.scenario.think_s) if q.kind == "streams" else None


def binding(t: Searched, scenario: Scenario, kind: str) -> tuple[str | None, str]:
    """What stops more load per GPU at this setting, and how the plan knows: the batch (full), or
    the first SLO limit the least load that missed it breaks (`host` when most of a step is fixed
    overhead, whichever limit it breaks: the card's bandwidth and compute then barely move the
    load). None when no simulated load missed the SLO."""
    limit, how, fixed = _what_binds(t, scenario, kind)
    if fixed:
        return "host", how + ": the host's launches, not the card, bind"
    return limit, how


def _what_binds(t: Searched, scenario: Scenario, kind: str) -> tuple[str | None, str, bool]:
    """binding()'s limit before the host is named, how, and whether fixed overhead sets the step."""
    cap, engine, c = t.cap, t.engine, t.candidate
    if not scenario.slo:
        return "throughput", f"no latency bound: the card saturated at {engine.max_batch} rows", False
    if kind == "streams" and cap.value >= engine.max_batch:
        return (
            c.batch_limit,
            (f"{engine.max_batch} rows fill the batch ({c.batch_limit}); more streams queue for a slot"),
            False,
        )
    r, load = cap.above, cap.above_load
    if r is None or load is None:
        return None, "", False
    failing = [k for k, v in scenario.slo.items() if r.metric(k) > v]
    if not failing:
        return None, "", False
    k = failing[0]
    name = next((n for n in ("ttfa", "underrun", "rtf") if k.startswith(n)), "e2e")
    step = engine.step
    b = max(r.mean_batch, 1.0)
    ctx = engine.workload.prompt_tokens + engine.workload.steps / 2  # a row's mean context
    overhead = step.t_fixed + step.t_host + step.t_row * b
    device = float(step.roofline(b, b * ctx)) - step.t_fixed
    share = overhead / (overhead + device) if overhead + device > 0 else 0.0
    how = (
        f"{k} {r.metric(k):.3g} > {scenario.slo[k]:g} at {load.label()}; "
        f"{share:.0%} of a step at batch {b:.0f} is fixed overhead "
        f"({overhead * 1e3:.2f} of {(overhead + device) * 1e3:.2f} ms)"
    )
    return name, how, share >= 0.5
