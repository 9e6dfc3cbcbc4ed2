"""The answer a report leads with, in one box: which card, how many, with which settings, how many
streams per GPU (the centre and its range), at what cost per hour and per audio hour, and the
limit that binds.

It comes from the plan's `recommended` object of the first scenario, and the centre capacity from
that card's row. A plan written before plan recorded that object is read from its rows instead
(the cheapest GPU per audio hour among the rows meeting the SLO), and what such a plan does not
hold is said to be unknown, never guessed. Every word is in the language of `ttsperf.i18n.use`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttsperf.i18n import N_, _
from ttsperf.plan.money import DEFAULT_CURRENCY
from ttsperf.plan.money import money as plan_money
from ttsperf.plan.schema import PlanRow, ScenarioPlan
from ttsperf.report.cost_chart import is_gpu

UNKNOWN = N_("unknown (not in this plan file)")
BINDING = {
    "ttfa": N_("time to first audio (TTFA P99)"),
    "underrun": N_("playback underrun (the stream stalls)"),
    "memory": N_("GPU memory (max batch)"),
    "max batch": N_("the max batch setting (the batch is full)"),
    "throughput": N_("decode throughput"),
    "host": N_("host (CPU) time per step"),
    "e2e": N_("end-to-end latency"),
    "rtf": N_("real-time factor"),
}
# the box's rows: a stable key (the JSON's) -> its label, translated where shown
LABELS = {
    "card": N_("card"),
    "setting": N_("setting"),
    "per GPU": N_("per GPU"),
    "cost": N_("cost"),
    "binding limit": N_("binding limit"),
    "basis": N_("basis"),
}


@dataclass
class Answer:
    scenario: str
    source: Path
    fields: list[tuple[str, str]]  # (key of LABELS, value) in the order the box shows them
    serve_flags: str | None
    basis: str  # "from the plan's recommendation" or how it was derived from the rows
    check: str | None = None  # the `ttsperf bench` command that checks it (the plan's, when it gave one)


def _get(obj: Any, name: str) -> Any:
    """A field of a plan object, a pydantic model or a plain dict; None when absent (older plans)."""
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def money(v: float, currency: str = DEFAULT_CURRENCY) -> str:
    """A cost as plan prints it (3 significant figures, whole units from 100 up): $0.00330,
    CNY 12.3."""
    return plan_money(v, currency)


def settings_text(settings: Any) -> str | None:
    """ "fp16, cuda-graphs, 3 ms step overhead, first chunk 12 steps, max batch 32" from the parts
    the settings hold; None when there are none."""
    if settings is None:
        return None
    parts = [str(v) for v in (_get(settings, "dtype"), _get(settings, "mode")) if v]
    if (o := _get(settings, "step_overhead_s")) is not None:
        parts.append(_("{ms} ms step overhead").format(ms=f"{1000 * o:.3g}"))
    if (f := _get(settings, "first_chunk_steps")) is not None:
        parts.append(_("first chunk {n} steps").format(n=f))
    if (b := _get(settings, "max_batch")) is not None:
        parts.append(_("max batch {n}").format(n=b))
    return _(", ").join(parts) or None


def _amount(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:.3g}"


def range_text(rng: Any, unit: str | None = None) -> str | None:
    """ "3-5 streams per GPU" (or in `unit`); None without a range."""
    if not rng:
        return None
    low, high = (_amount(v) for v in rng)
    unit = _("streams per GPU") if unit is None else unit
    return f"{low}-{high} {unit}".rstrip() if low != high else f"{low} {unit}".rstrip()


def capacity_range(obj: Any) -> str | None:
    """Streams (or, for a rate load, requests/s) per GPU at the ends of the overhead's range."""
    return range_text(_get(obj, "max_streams_range")) or range_text(
        _get(obj, "max_rate_range"), _("req/s per GPU")
    )


def per_gpu_text(centre: Any, streams: bool, rng: Any) -> str | None:
    """ "25 streams (20-30 across the overhead's range)": the planned capacity and its spread."""
    if centre is None:
        return range_text(rng, _("streams") if streams else _("req/s"))
    spread = range_text(rng, "") if rng else None
    text = (_("{n} streams") if streams else _("{n} req/s")).format(n=_amount(centre))
    return text + (_(" ({range} across the overhead's range)").format(range=spread) if spread else "")


def card_text(gpu: str, count: int | None, count_range: Any) -> str:
    if count is None:
        return _("{gpu} (count unknown)").format(gpu=gpu)
    spread = (
        _(" ({low}-{high} across the overhead's range)").format(low=count_range[0], high=count_range[1])
        if count_range
        else ""
    )
    return _("{count} x {gpu}").format(count=count, gpu=gpu) + spread


def cost_text(
    per_hour: float | None, per_audio_hour: float | None, gpus: int | None, currency: str = DEFAULT_CURRENCY
) -> str | None:
    """ "$12.3/h for 7 GPUs; $0.0123 per audio hour", the parts the plan gives, in its currency."""
    parts = []
    if per_hour is not None:
        parts.append(_("{usd}/h for {n} GPU(s)").format(usd=money(per_hour, currency), n=gpus or "?"))
    if per_audio_hour is not None:
        parts.append(_("{usd} per audio hour").format(usd=money(per_audio_hour, currency)))
    return _("; ").join(parts) or None


def binding_text(binding: str | None) -> str | None:
    return None if binding is None else _(BINDING[binding]) if binding in BINDING else binding


def cheapest_row(sc: ScenarioPlan) -> PlanRow | None:
    """The row an older plan's box shows: the lowest $/audio-hour among GPUs meeting the SLO."""
    ok = [r for r in sc.rows if r.meets_slo and is_gpu(r) and r.usd_per_audio_hour is not None]
    return min(ok, key=lambda r: (r.usd_per_audio_hour, r.gpu), default=None)


def row_of(sc: ScenarioPlan, gpu: str) -> PlanRow | None:
    return next((r for r in sc.rows if r.gpu == gpu and is_gpu(r)), None)


def centre(rec: Any, row: PlanRow | None) -> tuple[Any, bool]:
    """(the planned streams or req/s per GPU, streams?): the recommendation's own when it holds
    one, else its card's row (the same search's result); a rate load never shows streams."""
    rate = _get(rec, "max_rate_range") is not None and _get(rec, "max_streams_range") is None
    names = ("max_rate_rps",) if rate else ("max_streams", "max_rate_rps")
    for obj in (rec, row):
        for name in names:
            if (v := _get(obj, name)) is not None:
                return v, name == "max_streams"
    return None, not rate


def answer(path: Path, sc: ScenarioPlan) -> Answer | None:
    """The box for one scenario, or None when no GPU meets its SLO (the sentence says why)."""
    rec = _get(sc, "recommended")
    if rec is not None:
        row, measured = row_of(sc, _get(rec, "gpu")), _get(rec, "measured")
        count, spread = _get(rec, "gpus_needed"), _get(rec, "gpus_needed_range")
        card = card_text(_get(rec, "gpu"), count, spread)
        basis, missing = _("from the plan's recommendation"), _("not given by the plan")
        src = rec
    else:
        row = src = cheapest_row(sc)
        if row is None:
            return None
        measured, count = None, row.gpus_needed
        card = card_text(row.gpu, row.gpus_needed, None)
        basis = _("the plan names no recommended setting: the cheapest GPU per audio hour meeting the SLO")
        missing = _(UNKNOWN)
    settings, binding = _get(src, "settings"), _get(src, "binding")
    value, streams = centre(rec, row)
    rng = _get(src, "max_streams_range") or _get(src, "max_rate_range")
    currency = _get(src, "currency") or DEFAULT_CURRENCY
    cost = cost_text(_get(src, "usd_per_hour"), _get(src, "usd_per_audio_hour"), count, currency)
    how = {True: _("measured: a profile of this card"), False: _("projected, not measured on this card")}
    fields = [
        ("card", card),
        ("setting", settings_text(settings) or missing),
        ("per GPU", per_gpu_text(value, streams, rng) or missing),
        ("cost", cost or missing),
        ("binding limit", binding_text(binding) or missing),
        ("basis", how.get(measured) or _("projected; profiled or not: {missing}").format(missing=missing)),
    ]
    check = _get(rec, "check") if rec is not None else None
    return Answer(sc.scenario, path, fields, _get(settings, "serve_flags"), basis, check)
