"""Sections from plans: one cost table and one Pareto chart (cost vs the SLO metric) per scenario;
a profiled non-GPU device gets a table of its own, apart from the candidates."""

from __future__ import annotations

from pathlib import Path

from ttsperf.plan.schema import Plan, PlanRow, ScenarioPlan
from ttsperf.report.answer import binding_text, range_text, settings_text
from ttsperf.report.cost_chart import axis, candidates, cost_svg, is_gpu, pareto
from ttsperf.report.document import Chart, Section, Table, ms, num

HEADERS = ["GPU", "meets SLO", "setting", "max batch", "step", "P50", "P99", "TTFA P99", "most per GPU",
           "binds", "GPUs", "$/GPU-h", "$/h", "$/audio-h", "basis"]  # fmt: skip


def _sort_key(r: PlanRow) -> tuple:
    # meeting the SLO first, then cheapest per hour, then the unpriced ones
    return (not r.meets_slo, r.usd_per_hour is None, r.usd_per_hour or 0.0, r.gpu)


def _capacity(r: PlanRow) -> str:
    if r.max_streams is not None:
        rng = range_text(getattr(r, "max_streams_range", None), "")
        return f"{r.max_streams} streams" + (f" ({rng.strip()})" if rng else "")
    rng = range_text(getattr(r, "max_rate_range", None), "")
    return num(r.max_rate_rps, ".3g", " req/s") + (f" ({rng.strip()})" if rng else "")


def _row(r: PlanRow, front: set[str]) -> list[str]:
    return [
        r.gpu + (" ★" if r.gpu in front else ""),
        "yes" if r.meets_slo else "no",
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
        "projected, step time fitted to a profile"
        if fitted and fitted.kind == "measured"
        else ("projected from defaults")
    )


def scenario_section(path: Path, plan: Plan, sc: ScenarioPlan, key: str) -> Section:
    sec = Section(f"Plan: {sc.scenario}", [path])
    limits = ", ".join(f"{k} <= {v:g}" for k, v in sc.slo.limits.items()) or "no latency bound"
    sec.say(
        f"{sc.description} SLO: {limits} ({sc.slo.how}). Load: {sc.load.get('value')} "
        f"{sc.load.get('kind')} ({sc.load.get('how', '')})."
    )
    sec.say(f"**{sc.recommendation}**")
    field, label, *_ = axis(sc)
    sec.blocks.append(
        Chart(f"pareto_{sc.scenario}_{key}", f"{sc.scenario}: cost vs {label} (Pareto)", cost_svg(sc))
    )
    front = {r.gpu for r in pareto(candidates(sc, field), field)}
    gpus = sorted((r for r in sc.rows if is_gpu(r)), key=_sort_key)
    sec.blocks.append(
        Table(
            HEADERS,
            [_row(r, front) for r in gpus],
            f"★ on the Pareto front (no card both cheaper per audio hour and lower in {label}); latencies at "
            f"the target load per GPU; calibration: {plan.inputs.calibration}; prices: {plan.inputs.prices}",
        )
    )
    other = [r for r in sc.rows if not is_gpu(r)]
    if other:
        sec.say("The profiled device that is not a GPU, shown for comparison and never recommended:")
        sec.blocks.append(Table(HEADERS, [_row(r, set()) for r in other]))
    return sec


def plan_sections(path: Path, plan: Plan, key: str) -> list[Section]:
    return [scenario_section(path, plan, sc, f"{key}_{i}") for i, sc in enumerate(plan.scenarios)]
