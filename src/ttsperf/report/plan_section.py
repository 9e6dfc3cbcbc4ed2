"""Sections from plans: one cost table and one Pareto chart (cost vs the SLO metric) per scenario;
a profiled non-GPU device gets a table of its own, apart from the candidates."""

from __future__ import annotations

from pathlib import Path

from ttsperf.i18n import N_, SOURCE, _, current
from ttsperf.plan.money import unit
from ttsperf.plan.schema import Plan, PlanRow, ScenarioPlan
from ttsperf.report.answer import binding_text, range_text, settings_text
from ttsperf.report.cost_chart import axis, candidates, cost_svg, is_gpu, pareto
from ttsperf.report.document import Chart, Section, Table, ms, num
from ttsperf.report.sentence import load_text, sentence

HEADERS = [N_("GPU"), N_("meets SLO"), N_("setting"), N_("max batch"), N_("step"), "P50", "P99",
           "TTFA P99", N_("most per GPU"), N_("binds"), N_("GPUs"), "$/GPU-h", "$/h", N_("$/audio-h"),
           N_("basis")]  # fmt: skip


def _sort_key(r: PlanRow) -> tuple:
    # meeting the SLO first, then cheapest per hour, then the unpriced ones
    return (not r.meets_slo, r.usd_per_hour is None, r.usd_per_hour or 0.0, r.gpu)


def _capacity(r: PlanRow) -> str:
    if r.max_streams is not None:
        rng = range_text(getattr(r, "max_streams_range", None), "")
        return _("{n} streams").format(n=r.max_streams) + (f" ({rng})" if rng else "")
    rng = range_text(getattr(r, "max_rate_range", None), "")
    return num(r.max_rate_rps, ".3g", " req/s") + (f" ({rng})" if rng else "")


def _row(r: PlanRow, front: set[str]) -> list[str]:
    return [
        r.gpu + (" ★" if r.gpu in front else ""),
        _("yes") if r.meets_slo else _("no"),
        settings_text(getattr(r, "settings", None)) or "–",
        str(r.max_batch),
        num(r.step_ms, ".1f", " ms"),
        ms(r.p50_s),
        ms(r.p99_s),
        ms(r.ttfa_p99_s),
        _capacity(r),
        binding_text(getattr(r, "binding", None)) or "–",
        num(r.gpus_needed, "d"),
        num(r.usd_per_gpu_hour, ".3f"),
        num(r.usd_per_hour, ",.2f"),
        num(r.usd_per_audio_hour, ".4f"),
        _basis(r),
    ]


def _basis(r: PlanRow) -> str:
    fitted = r.basis.get("step.t_fixed")
    return (
        _("projected, step time fitted to a profile")
        if fitted and fitted.kind == "measured"
        else _("projected from defaults")
    )


def scenario_section(path: Path, plan: Plan, sc: ScenarioPlan, key: str) -> Section:
    sec = Section(_("Plan: {scenario}").format(scenario=sc.scenario), [path])
    limits = ", ".join(f"{k} <= {v:g}" for k, v in sc.slo.limits.items()) or _("no latency bound")
    load = f"{sc.load.get('value')} {sc.load.get('kind')} ({sc.load.get('how', '')})"
    if current() == SOURCE:  # the plan's own words (another language: its numbers, without them)
        sec.say(f"{sc.description} SLO: {limits} ({sc.slo.how}). Load: {load}.")
        sec.say(f"**{sc.recommendation}**")
    else:
        sec.say(_("SLO: {limits}. Load: {load}.").format(limits=limits, load=load_text(sc.load)))
        sec.say(f"**{sentence(sc)}**")
    field, label, *_rest = axis(sc)
    title = _("{scenario}: cost vs {metric} (Pareto)").format(scenario=sc.scenario, metric=label)
    sec.blocks.append(Chart(f"pareto_{sc.scenario}_{key}", title, cost_svg(sc)))
    front = {r.gpu for r in pareto(candidates(sc, field), field)}
    gpus = sorted((r for r in sc.rows if is_gpu(r)), key=_sort_key)
    caption = _(
        "★ on the Pareto front (no card both cheaper per audio hour and lower in {metric}); latencies at "
        "the target load per GPU; calibration: {calibration}; prices: {prices}"
    ).format(metric=label, calibration=plan.inputs.calibration, prices=plan.inputs.prices)
    cur = unit(plan.inputs.currency)  # every cost of a plan is in its currency
    headers = [_(h).replace("$", cur) for h in HEADERS]
    sec.blocks.append(Table(headers, [_row(r, front) for r in gpus], caption))
    other = [r for r in sc.rows if not is_gpu(r)]
    if other:
        sec.say(_("The profiled device that is not a GPU, shown for comparison and never recommended:"))
        sec.blocks.append(Table(headers, [_row(r, set()) for r in other]))
    return sec


def plan_sections(path: Path, plan: Plan, key: str) -> list[Section]:
    return [scenario_section(path, plan, sc, f"{key}_{i}") for i, sc in enumerate(plan.scenarios)]
