"""make_plan(PlanSettings): the library function behind `ttsperf plan` (or keywords: the flags' names).

The pipeline: catalog + profiles -> cards (cards.py) -> for every card and scenario, the settings
search over simulated loads (search.py, capacity.py, simulate.py) -> its row (rows.py) -> the
answer per scenario (recommend.py). Cards are planned in parallel processes (`plan_scenarios`).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ttsperf import facts as F
from ttsperf.errors import UserError
from ttsperf.plan import memory as M
from ttsperf.plan import overhead as O
from ttsperf.plan import steptime as S
from ttsperf.plan.cards import Card, build_cards, plan_dtype, profile_mode, profiled_name
from ttsperf.plan.catalog import Catalog, load_catalog, split_names
from ttsperf.plan.cost import parse_own
from ttsperf.plan.memory import MemoryModel, Workload
from ttsperf.plan.money import load_rates
from ttsperf.plan.recommend import mark_ties, recommend, say_engine_changed
from ttsperf.plan.rows import plan_row
from ttsperf.plan.scenarios import SCENARIOS, Scenario, parse_duration, parse_slo
from ttsperf.plan.schema import Default, Plan, PlanInputs, PlanRow, ScenarioPlan, Slo
from ttsperf.plan.search import PlanContext, Simulations
from ttsperf.plan.settings import DEFAULT_TEXT_SET, PlanSettings, requests_flag
from ttsperf.plan.simulate import Load
from ttsperf.profile.schema import ModelProfile, load_profile, shipped_card_profiles


def _defaults(workload: Workload, text_set: str | None, calibrated: bool, host: str) -> dict[str, Default]:
    d = {
        "runtime_bytes": Default(value=M.DEFAULT_RUNTIME_BYTES, source=M.DEFAULT_RUNTIME_SOURCE),
        "fragmentation": Default(value=M.DEFAULT_FRAGMENTATION, source=M.DEFAULT_FRAGMENTATION_SOURCE),
        "memory_gb_unit": Default(value="GiB", source=M.CARD_GB_IS_GIB_SOURCE),
        "host_profile": Default(
            value=host, source="each mode's step and Decoder+Vocos fixed cost (docs/PLANNING.md)"
        ),
        "kernel_costs": Default(value="launch gap, graph node, graph replay", source=O.sources()),
        "t_host_s": Default(value=S.DEFAULT_T_HOST_S, source=S.DEFAULT_T_HOST_SOURCE),
        "mbu": Default(value=S.DEFAULT_MBU, source=S.DEFAULT_MBU_SOURCE),
        "mfu": Default(value=S.DEFAULT_MFU, source=S.DEFAULT_MFU_SOURCE),
        **(
            {
                "text_set": Default(
                    value=text_set,
                    source=(
                        "the guide's 8 s utterances as bench's zh-8s texts"
                        if text_set == DEFAULT_TEXT_SET
                        else f"bench's {text_set} texts (--text-set)"
                    )
                    + "; each request's audio from its text at the sourced speech rate, its prompt "
                    "from the text's characters (ttsperf/textsets.py)",
                )
            }
            if text_set
            else {
                "audio_seconds": Default(
                    value=workload.audio_seconds, source="the guide's 8 s clips (--audio-seconds)"
                ),
                "prompt_tokens": Default(
                    value=workload.prompt_tokens,
                    source="assumption: a sentence plus control tokens (--prompt-tokens)",
                ),
            }
        ),
        "first_chunk_steps": Default(
            value=workload.first_chunk_steps,
            source="official streaming yields every 24 steps (docs/reference/chattts.md)",
        ),
    }
    if calibrated:
        d["note"] = Default(
            value="", source="profiled cards replace t_fixed/MBU/MFU/runtime with fitted values"
        )
    return d


def _model_sizes(mem: MemoryModel, workload: Workload) -> dict[str, float | int | str]:
    """The numbers the guide's memory claims are checked against (docs/CLAIMS.md)."""
    return {
        "parameters": F.TOTAL_PARAMS,
        "parameters_how": "sum of the component counts in docs/reference/chattts.md",
        "weights_bytes": float(mem.weights_bytes),  # type: ignore[arg-type]
        "weights_how": mem.basis["weights_bytes"].how,
        "kv_bytes_per_token": float(mem.kv_bytes_per_token),  # type: ignore[arg-type]
        "kv_how": mem.basis["kv_bytes_per_token"].how,
        "kv_bytes_per_audio_second": float(mem.kv_bytes_per_token) * F.STEPS_PER_AUDIO_SECOND,  # type: ignore[arg-type]
        "bytes_per_audio_second_with_fragmentation": mem.per_audio_second(workload),
    }


def parse_modes(text: str) -> tuple[str, ...]:
    """--mode: best (every engine mode ttsperf serve offers) or one or more of them."""
    if text.strip().lower() == "best":
        return tuple(S.MODE_FLAGS)
    names = tuple(dict.fromkeys(m.strip().lower() for m in text.split(",") if m.strip()))
    bad = [m for m in names if m not in S.MODE_FLAGS]
    if bad or not names:
        raise UserError(f"--mode: expected best or any of {', '.join(S.MODE_FLAGS)}, found {text!r}")
    return names


def shipped_cards(modes: tuple[str, ...]) -> list[tuple[str, ModelProfile]]:
    """ttsperf's measured cards whose engine mode is among the ones planned."""
    return [(w, p) for w, p in shipped_card_profiles() if profile_mode(p) in modes]


def _calibration(s: PlanSettings, profiles: list[str], calibrated: bool, host: str) -> str:
    """What the plan's step models rest on: profiles or the host profile and defaults, and the what-ifs."""
    base = f"the host profile ({host}) and documented defaults"
    if calibrated:
        note = "profiled cards fitted to " + ", ".join(profiles) + f"; other cards projected from {base}"
    else:
        note = f"projected from {base}, no card profile given"
    if s.step_overhead is not None:
        note += f"; per-step overhead {s.step_overhead} set by --step-overhead (what-if)"
    if s.vocoder_overhead is not None:
        note += f"; vocoder call overhead {s.vocoder_overhead} set by --vocoder-overhead (what-if)"
    return note


def _duration(text: str | None, flag: str) -> float | None:
    return None if text is None else parse_duration(text, flag)


def make_plan(
    settings: PlanSettings | None = None, progress: Callable[[str], None] | None = None, **fields: Any
) -> Plan:
    """The plan for `settings`, or for keyword arguments named as its fields (the flags' names)."""
    if settings is not None and fields:
        raise TypeError(f"make_plan: give settings or keyword arguments, not both ({', '.join(fields)})")
    s = (settings or PlanSettings.build(**fields)).check()
    predict_only = [f for f, v in (("--like", s.like), ("--ramp-up", s.ramp_up)) if v is not None]
    if predict_only:
        raise UserError(f"{', '.join(predict_only)}: a bench run's load, used with --predict only")
    if s.max_queue is not None:  # plan prints the queue its check command needs (rows.serve_flags)
        raise UserError("--max-queue: a server's queue to predict, used with --predict only")
    first_chunk_steps = s.first_chunk()
    names = [s.scenario] if s.scenario else list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            raise UserError(f"--scenario: expected one of {', '.join(SCENARIOS)}, found {n!r}")
    profiles = [(p, load_profile(p)) for p in s.profile]
    rates = load_rates(flags=s.fx)
    cat = load_catalog(
        Path(s.catalog) if s.catalog else None,
        s.prices,
        s.price,
        split_names(s.gpus) if s.gpus is not None else None,
        others=[profiled_name(p) for _, p in profiles],
        currency=s.currency,
        rates=rates,
    )
    dt = plan_dtype(profiles, s.dtype)
    lengths, text_set = s.lengths()
    workload = s.with_limits(Workload.mixed(lengths, first_chunk_steps=first_chunk_steps))
    modes = parse_modes(s.mode)
    cards = build_cards(cat, profiles, dt, shipped=shipped_cards(modes))
    calibrated = any(c.profiled for c in cards)
    host_profile, host = O.host_profile(s.host_profile, profiles)
    note = _calibration(s, sorted({c.searched_in for c in cards if c.profiled}), calibrated, host)
    target = Load("streams", s.streams) if s.streams else Load("rate", s.rate) if s.rate else None
    slo_limits = parse_slo(s.slo) if s.slo is not None else None
    own_cards = parse_own(s.own, cat.known, s.amortize, s.electricity, s.currency, rates)
    ctx = PlanContext(
        cat, workload, s.requests, s.seed, s.memory_at, s.max_batch, own_cards, s.engine, s.gpus_per_machine,
        modes=modes,
        text_set=text_set,
        mode_table=O.modes_from_host(host_profile, host, factor := O.op_factor(profiles)),
        prefill_host=O.prefill_host(host_profile, factor),
        first_chunk_fixed=s.first_chunk_steps is not None,
        step_overhead=_duration(s.step_overhead, "--step-overhead"),
        vocoder_overhead=_duration(s.vocoder_overhead, "--vocoder-overhead"),
    )  # fmt: skip
    chosen = [_with_think(SCENARIOS[n], s.think_time) for n in names]
    scenarios = plan_scenarios(chosen, cards, target, slo_limits, ctx, note, progress)
    owned = own_cards.purchases if own_cards else {}
    missing = [c.name for c in cards if c.name not in cat.prices and c.name not in owned]
    notes = []
    if missing:
        notes.append(
            "no price for " + ", ".join(missing) + f": supply with --price NAME={s.currency}_PER_GPU_HOUR, "
            "--prices FILE or a price set (ttsperf plan --list-prices)"
        )
    inputs = _inputs(
        s, [p for p, _ in profiles], note, dt, workload, text_set, cards, cat,
        _defaults(workload, text_set, calibrated, host),
    )  # fmt: skip
    return Plan(inputs=inputs, scenarios=scenarios, notes=notes)


def _inputs(
    s: PlanSettings,
    profiles: list[str],
    note: str,
    dt: str,
    workload: Workload,
    text_set: str | None,
    cards: list[Card],
    cat: Catalog,
    defaults: dict[str, Default],
) -> PlanInputs:
    """What the plan was made from, as plan.json records it."""
    return PlanInputs(
        profiles=profiles,
        calibration=note,
        workload={
            "dtype": dt,
            "requests": requests_flag(text_set),  # a text set's lengths, or one length
            **({"text_set": text_set} if text_set else {}),
            "audio_seconds": round(workload.audio_seconds, 3),  # the mean, of several lengths
            "audio_min_s": round(min(a for a, _ in workload.classes()), 3),
            "audio_max_s": round(max(a for a, _ in workload.classes()), 3),
            "steps": workload.steps,
            "prompt_tokens": workload.prompt_tokens,
            "context_tokens": workload.context_tokens,
            "kv_tokens_per_sequence": workload.kv_tokens,  # serve's slot: the two limits below
            "max_prompt_tokens": workload.serve_limits()[0],
            "max_new_tokens": workload.serve_limits()[1],
            "first_chunk_steps": workload.first_chunk_steps,
            "chunk_steps": workload.chunk_steps,
            "engine": s.engine,
        },
        model=_model_sizes(cards[0].memory if cards else MemoryModel(dt), workload),
        catalog=cat.gpus_file,
        prices=cat.prices_file,
        currency=s.currency,
        fx=sorted({p.fx.label() for p in cat.prices.values() if p.fx}),
        defaults=defaults,
        seed=s.seed,
        requests_per_simulation=s.requests,
        gpus_per_machine=s.gpus_per_machine,
        settings=s.model_dump(mode="json"),
    )  # fmt: skip


def _with_think(scenario: Scenario, think_s: float | None) -> Scenario:
    """--think-time: the listeners of a dialogue scenario think this long (offline has none)."""
    if think_s is None or scenario.think_s is None:
        return scenario
    if not think_s >= 0:
        raise UserError(f"--think-time {think_s:g}s: expected seconds >= 0")
    return replace(scenario, think_s=think_s, think_how=f"user --think-time {think_s:g}s")


def _with_slo(scenario: Scenario, slo: dict[str, float] | None) -> Scenario:
    if slo is None:
        return scenario
    return replace(scenario, slo=slo, slo_how="user --slo")


def _group_rows(
    group: list[Card], work: list[tuple[Scenario, Load]], ctx: PlanContext
) -> list[list[PlanRow]]:
    """Each card's row in every scenario; the cards of a group share their simulations (one
    process per group)."""
    sims = Simulations(ctx.seed)
    return [[plan_row(card, scenario, load, ctx, sims) for scenario, load in work] for card in group]


def _same_engine(cards: list[Card]) -> list[list[Card]]:
    """Cards whose step models are equal but for where the numbers come from (A800 and A100,
    H800 and H100, RTX 4090 D and RTX 4090) simulate alike: one group each, so one process runs
    their simulations once."""
    groups: dict[bytes, list[Card]] = {}
    for card in cards:
        key = pickle.dumps(replace(card.step, basis={})) if card.step is not None else card.name.encode()
        groups.setdefault(key, []).append(card)
    return list(groups.values())


def _cost_hint(card: Card) -> float:
    """A card's relative planning cost: its runs hold more streams the faster its steps."""
    if card.step is None or card.step.inv_bw <= 0:  # a profiled CPU's fit may carry no bandwidth term
        return 0.0
    return 1.0 / card.step.inv_bw


def _workers(groups: int) -> int:
    """Processes to plan cards in, this one included: one per CPU this process may run on, when
    there are enough groups of cards to pay for starting the others (a fresh interpreter each,
    ~0.3 s)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, groups) if groups >= 6 else 1


_GroupRows = dict[int, list[list[PlanRow]]]  # each group's rows, by the group's index


def _rows_per_card(
    cards: list[Card],
    work: list[tuple[Scenario, Load]],
    ctx: PlanContext,
    progress: Callable[[str], None] | None,
) -> list[list[PlanRow]]:
    """Every card's rows, groups of cards in parallel processes (each card's rows depend on that
    card alone, so the result is the same whatever the split)."""
    groups = _same_engine(cards)
    groups.sort(key=lambda g: -_cost_hint(g[0]))  # the costliest first, so none ends alone
    workers = _workers(len(groups))

    def say(what: str, done: int) -> None:
        if progress:
            procs = f", {workers} processes" if workers > 1 else ""
            progress(f"{what} ({done}/{len(groups)} done{procs})")

    if workers == 1:
        rows_of: _GroupRows = {}
        for i, group in enumerate(groups):
            say(", ".join(c.name for c in group), i)
            rows_of[i] = _group_rows(group, work, ctx)
    else:
        rows_of = _in_processes(groups, work, ctx, workers, say)
    rows: dict[int, list[PlanRow]] = {}  # by id(card): names may repeat across profiles
    for i, group in enumerate(groups):
        rows.update(zip(map(id, group), rows_of[i], strict=True))
    return [rows[id(c)] for c in cards]


@dataclass
class _Counts:
    """Groups taken and finished, shared by every process planning them."""

    taken: Any  # multiprocessing Values (synchronized ints)
    finished: Any

    def take(self) -> int:
        with self.taken.get_lock():
            self.taken.value += 1
            return self.taken.value - 1

    def finish(self) -> None:
        with self.finished.get_lock():
            self.finished.value += 1

    def stop(self, groups: int) -> None:
        """Every group counts as taken: no process starts another."""
        with self.taken.get_lock():
            self.taken.value = groups


def _in_processes(
    groups: list[list[Card]],
    work: list[tuple[Scenario, Load]],
    ctx: PlanContext,
    workers: int,
    say: Callable[[str, int], None],
) -> _GroupRows:
    """The groups shared out among `workers` processes, this one included: each takes the next
    group nobody has taken until none is left. This one starts at once, the others once their
    interpreter has (~0.3 s each). Spawned: no fork of a process whose threads hold locks."""
    spawn = multiprocessing.get_context("spawn")
    counts = _Counts(spawn.Value("i", 0), spawn.Value("i", 0))
    with ProcessPoolExecutor(
        workers - 1, mp_context=spawn, initializer=_share_counts, initargs=(counts,)
    ) as pool:
        others = [pool.submit(_take_groups, groups, work, ctx) for _ in range(workers - 1)]
        try:
            rows_of = _take_groups(groups, work, ctx, counts, say)
        except BaseException:
            counts.stop(len(groups))  # the others take no more
            raise
        while wait(others, timeout=0.2).not_done:
            say("the other processes' cards", counts.finished.value)
        for f in others:
            rows_of.update(f.result())
    return rows_of


_counts: _Counts | None = None  # in a pool's process: set once by its initializer


def _share_counts(counts: _Counts) -> None:
    global _counts
    _counts = counts


def _take_groups(
    groups: list[list[Card]],
    work: list[tuple[Scenario, Load]],
    ctx: PlanContext,
    counts: _Counts | None = None,
    say: Callable[[str, int], None] | None = None,
) -> _GroupRows:
    """The rows of every group this process takes, the next untaken one until none is left."""
    counts = counts or _counts
    assert counts is not None
    out: _GroupRows = {}
    while (i := counts.take()) < len(groups):
        if say:
            say(", ".join(c.name for c in groups[i]), counts.finished.value)
        out[i] = _group_rows(groups[i], work, ctx)
        counts.finish()
    return out


def plan_scenarios(
    scenarios: list[Scenario],
    cards: list[Card],
    target: Load | None,
    slo: dict[str, float] | None,
    ctx: PlanContext,
    basis_note: str,
    progress: Callable[[str], None] | None = None,
) -> list[ScenarioPlan]:
    """Every card in every scenario, then one recommendation each."""
    resolved = [_with_slo(sc, slo) for sc in scenarios]
    work = [(sc, target or sc.load) for sc in resolved]
    twins = [c.projected_now for c in cards if c.projected_now is not None]
    rows_of = _rows_per_card(cards + twins, work, ctx, progress)
    rows_of, twin_rows = rows_of[: len(cards)], iter(rows_of[len(cards) :])
    for card, rows in zip(cards, rows_of, strict=True):
        if card.projected_now is not None:
            for row, projected in zip(rows, next(twin_rows), strict=True):
                say_engine_changed(row, card.engine_changes, projected)
    plans = []
    for j, (scenario, load) in enumerate(work):
        rows = [r[j] for r in rows_of]
        mark_ties(rows)
        sentence, rec = recommend(
            scenario, load, rows, basis_note, (ctx.workload.audio_seconds, ctx.text_set), ctx.catalog.prices
        )
        plans.append(
            ScenarioPlan(
                scenario=scenario.name,
                description=scenario.description,
                slo=Slo(limits=scenario.slo, how=scenario.slo_how),
                load={
                    "kind": load.kind,
                    "value": load.value,
                    "how": "user flag" if target else scenario.load_how,
                    **(
                        {"think_s": scenario.think_s, "stream": scenario.think_how}
                        if load.kind == "streams" and scenario.think_s is not None
                        else {}
                    ),
                },
                objective=scenario.objective,
                rows=rows,
                recommendation=sentence,
                recommended=rec,
            )
        )
    return plans
