"""The answer per scenario: the cheapest card that meets the SLO for the target load, at which
setting, what binds and over what range; one sentence and its numbers (schema.Recommended)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ttsperf.plan.catalog import Price
from ttsperf.plan.like import bench_flags
from ttsperf.plan.money import money
from ttsperf.plan.rows import gpus_range
from ttsperf.plan.scenarios import Scenario
from ttsperf.plan.schema import PlanRow, Recommended
from ttsperf.plan.search import RESOLUTION
from ttsperf.plan.simulate import Load
from ttsperf.slo import spec_of


def measured(r: PlanRow) -> bool:
    """Whether the row's step times were measured by a profile of its card."""
    return "step.t_fixed" in r.basis and r.basis["step.t_fixed"].kind == "measured"


def setting_words(r: PlanRow) -> str:
    """'cuda-graphs, fp16, first chunk 24 steps' for a row ('' without settings)."""
    return r.settings.words() if r.settings is not None else ""


def capacity(r: PlanRow) -> float | None:
    return r.max_streams if r.max_streams is not None else r.max_rate_rps


# Why two cards are tied, as the answer and the table's legend say it.
TIE_RULE = f"capacities within the search's {RESOLUTION:.0%}, or both bound by the host within their ranges"


def _span(r: PlanRow) -> tuple[float, float] | None:
    """A row's capacity range over its overhead's sources ([c, c] for a card measured as it is)."""
    c = capacity(r)
    low_high = r.max_streams_range or r.max_rate_range
    if c is None:
        return None
    return (min(low_high[0], c), max(low_high[1], c)) if low_high else (c, c)


def _tied(a: PlanRow, b: PlanRow) -> bool:
    """The simulation cannot order the two: their capacities are within the search's resolution,
    or the host core binds both and their ranges overlap. Where the host binds, the card's own
    speed barely moves the load it carries, so what separates two such cards is the host's
    range, not the cards (docs/PLANNING.md, "Ties")."""
    ca, cb = capacity(a), capacity(b)
    if not ca or not cb:
        return False
    if abs(ca - cb) <= RESOLUTION * max(ca, cb):
        return True
    sa, sb = _span(a), _span(b)
    host = a.binding == "host" and b.binding == "host"
    return bool(host and sa and sb and sa[0] <= sb[1] and sb[0] <= sa[1])


def say_engine_changed(row: PlanRow, changes: list[str], projected: PlanRow) -> None:
    """A row measured with an engine that has changed since: what changed, and what the same card
    projects for today's engine, beside the measurement (neither replaces the other: the
    measurement is of the engine that ran, the projection is not measured)."""
    c = capacity(projected)
    if c is None:
        return
    span = projected.max_streams_range or projected.max_rate_range or [c, c]
    row.projected_now = [c, span[0], span[1]]
    unit = "streams" if row.max_streams is not None else "req/s"
    low_high = f" ({span[0]:g}-{span[1]:g})" if span[0] != span[1] else ""
    said = (
        f"measured with an earlier engine; changed since: {'; '.join(changes)}. "
        f"Projected for today's engine: {c:.3g}{low_high} {unit} per GPU"
    )
    row.note = f"{row.note}; {said}" if row.note else said


def mark_ties(rows: list[PlanRow]) -> None:
    """Each row's `tied_with`: the other cards the simulation cannot order it against (_tied)."""
    for r in rows:
        r.tied_with = [o.gpu for o in rows if o is not r and _tied(r, o)]


def tie_groups(rows: list[PlanRow]) -> list[list[str]]:
    """Cards tied with one another (rows' `tied_with`, joined transitively), in table order."""
    seen: set[str] = set()
    groups = []
    by_name = {r.gpu: r for r in rows}
    for r in rows:
        if r.gpu in seen or not r.tied_with:
            continue
        group, todo = [], [r.gpu]
        while todo:
            name = todo.pop()
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            group.append(name)
            todo += by_name[name].tied_with
        groups.append(sorted(group, key=[x.gpu for x in rows].index))
    return groups


def recommend(
    scenario: Scenario,
    target: Load,
    rows: list[PlanRow],
    basis_note: str,
    work: tuple[float, str | None],
    prices: Mapping[str, Price] = {},
) -> tuple[str, Recommended | None]:
    """One sentence, and its numbers: the cheapest GPU meeting the SLO for the target load, at
    which setting, what binds and over what range (and whose price, from `prices`); or why there
    is none."""
    slo = spec_of(scenario.slo) if scenario.slo else "no latency bound"  # as bench --slo takes it
    head = f"{scenario.name} ({slo}; {target.label()})"
    gpus = [r for r in rows if r.device == "gpu"]
    ok = [r for r in gpus if r.meets_slo and r.gpus_needed]
    if not ok:
        return f"{head}: {_none_meets(gpus, basis_note)}.", None
    best, what = _cheapest(ok, scenario.objective, prices)
    assert best.gpus_needed is not None
    n_range = gpus_range(target, best)
    parts = _details(best, target, n_range)
    check = bench_command(scenario, target, best, *work) if scenario.slo else None
    if check:
        parts.append(f"check it with `{check}`")
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
        measured=measured(best),
        projected_now=best.projected_now,
        tied_with=tied_priced(best, [r for r in ok if getattr(r, scenario.objective) is not None]),
        check=check,
        price=price_source(best, prices),
        unpriced=[r.gpu for r in ok if getattr(r, scenario.objective) is None and r is not best],
    )
    return sentence, rec


def _none_meets(gpus: list[PlanRow], basis_note: str) -> str:
    fits = [r for r in gpus if r.fits and r.ttfa_p99_s is not None]
    if not fits:
        return "no card in the selection fits the workload"
    best = min(fits, key=lambda r: r.ttfa_p99_s or math.inf)
    return (
        f"no card meets the SLO; the closest is {best.gpu} "
        f"(TTFA P99 {best.ttfa_p99_s:.3f} s, E2E P99 {best.p99_s:.2f} s at the least load"
        f"{', ' + setting_words(best) if best.settings else ''}); {basis_note}"
    )


def _cheapest(ok: list[PlanRow], key: str, prices: Mapping[str, Price]) -> tuple[PlanRow, str]:
    """The row that meets the SLO at the least `key` (usd_per_hour or usd_per_audio_hour), fewer
    GPUs and a lower E2E P99 breaking ties; without prices, the fewest GPUs."""
    priced = [r for r in ok if getattr(r, key) is not None]
    unpriced = [r.gpu for r in ok if getattr(r, key) is None]
    tail = f" (also meeting it but without a price: {', '.join(unpriced)})" if unpriced else ""
    if priced:
        best = min(priced, key=lambda r: (getattr(r, key), r.gpus_needed, r.p99_s or math.inf))
        cur, source = best.currency, price_source(best, prices)
        tied = tied_priced(best, priced)
        ties = f" (tied with {', '.join(tied)}: {TIE_RULE}; picked by cost)" if tied else ""
        return best, (
            f"{best.gpus_needed} x {best.gpu} at {money(best.usd_per_hour, cur)}/h "
            f"({money(best.usd_per_audio_hour, cur)} per audio hour) is the cheapest that meets it"
            f"{ties}{tail}" + (f"; price: {source}" if source else "")
        )
    best = min(ok, key=lambda r: (r.gpus_needed, r.p99_s or math.inf))
    return best, f"no card that meets the SLO has a price; fewest GPUs: {best.gpus_needed} x {best.gpu}"


def price_source(row: PlanRow, prices: Mapping[str, Price]) -> str | None:
    """Whose price a row's cost rests on (provider, offer, date), when it is a catalog's rented
    price; None for a price the user gave or a card without one."""
    basis = row.basis.get("usd_per_gpu_hour")
    rented = basis is not None and basis.kind == "sourced" and row.gpu in prices  # not owned
    return prices[row.gpu].brief() if rented else None


def tied_priced(best: PlanRow, rows: list[PlanRow]) -> list[str]:
    """Priced cards tied with `best` that need as many GPUs (so cost alone picked `best`)."""
    return [
        r.gpu
        for r in rows
        if r.gpu in best.tied_with and r.gpus_needed == best.gpus_needed and r.usd_per_hour is not None
    ]


def _details(best: PlanRow, target: Load, n_range: list[int] | None) -> list[str]:
    """The setting, what binds, the centre capacity and its range over the overhead's sources,
    measured or projected."""
    parts = []
    if best.settings is not None:
        parts.append(f"with {best.settings.words()} (`{best.settings.serve_flags}`)")
    if best.binding:
        parts.append(f"bound by {best.binding}")
    span = best.max_streams_range or best.max_rate_range
    streams = target.kind == "streams"
    unit, fmt = ("streams", "d") if streams else ("req/s", ".3g")
    centre = best.max_streams if streams else best.max_rate_rps
    if centre is not None:  # the centre, then the range over the overhead's sourced ends
        cap = f"{format(centre, fmt)} {unit} per GPU"
        if span is not None:
            cap += f" ({format(span[0], fmt)}-{format(span[1], fmt)} over the overhead's sourced range"
            if n_range is not None and n_range[0] != n_range[1]:
                cap += f", so {n_range[0]}-{n_range[1]} GPUs"
            cap += ")"
        parts.append(cap)
    parts.append(
        "its step times measured by a profile of this card"
        if measured(best)
        else "projected, not measured on this card: run `ttsperf profile` on it"
    )
    return parts


def bench_command(
    scenario: Scenario, target: Load, best: PlanRow, audio_s: float, text_set: str | None = None
) -> str:
    """The plan's own check: the row's most load as bench runs it, on the plan's requests (the
    text set it drew them from; `audio_s` their mean), its SLO text unchanged.

    A closed loop's users start one after another over about one cycle of theirs (a reply, its
    playback and the thinking; bench --ramp-up): started at once, every user's request reaches the
    server in one wave, which equal replies keep in step, and the first chunks of a whole wave
    queue behind each other - a burst the plan's steady state never holds (docs/PLANNING.md)."""
    if target.kind != "streams":
        load = Load(target.kind, float(best.max_rate_rps or 0.0))
    else:
        e2e = best.p50_s or 0.0
        cycle = e2e if scenario.think_s is None else max(e2e, audio_s) + scenario.think_s
        load = Load(
            "streams", float(best.max_streams or 0), scenario.think_s, float(max(1, math.ceil(cycle)))
        )
    # streamed, through the adapter whose API streams (bench refuses --stream with the others):
    # TTFA and underruns exist only for a stream; 400 requests: enough for a P99's interval to
    # have its high end (bench: n >= 368 at 95%)
    stream = (
        " --adapter openai --stream" if any(k.startswith(("ttfa", "underrun")) for k in scenario.slo) else ""
    )
    texts = f" --text-set {text_set}" if text_set else ""
    return (
        f"ttsperf bench URL{stream}{texts} {bench_flags(load)} --requests 400 --slo {spec_of(scenario.slo)}"
    )
