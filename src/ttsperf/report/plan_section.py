"""Sections from plans: one cost table and one Pareto chart (cost vs P99) per scenario."""

from __future__ import annotations

from pathlib import Path

from ttsperf.plan.chart import pareto
from ttsperf.plan.chart import svg as pareto_svg
from ttsperf.plan.schema import Plan, PlanRow, ScenarioPlan
from ttsperf.report.document import Chart, Section, Table, ms, num


def _sort_key(r: PlanRow) -> tuple:
    # meeting the SLO first, then cheapest per hour, then the unpriced ones
    return (not r.meets_slo, r.usd_per_hour is None, r.usd_per_hour or 0.0, r.gpu)


def _capacity(r: PlanRow) -> str:
    if r.max_streams is not None:
        return f"{r.max_streams} streams"
    return num(r.max_rate_rps, ".3g", " req/s")


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
    sec.blocks.append(
        Chart(f"pareto_{sc.scenario}_{key}", f"{sc.scenario}: cost vs P99 (Pareto)", pareto_svg(sc))
    )
    priced = [r for r in sc.rows if r.meets_slo and r.usd_per_audio_hour is not None and r.p99_s is not None]
    front = {r.gpu for r in pareto(priced)} if priced else set()
    rows = []
    for r in sorted(sc.rows, key=_sort_key):
        rows.append(
            [
                r.gpu + (" ★" if r.gpu in front else ""),
                "yes" if r.meets_slo else "no",
                str(r.max_batch),
                num(r.step_ms, ".1f", " ms"),
                ms(r.p50_s),
                ms(r.p99_s),
                ms(r.ttfa_p99_s),
                _capacity(r),
                num(r.gpus_needed, "d"),
                num(r.usd_per_gpu_hour, ".3f"),
                num(r.usd_per_hour, ",.2f"),
                num(r.usd_per_audio_hour, ".4f"),
                _basis(r),
            ]
        )
    sec.blocks.append(
        Table(
            [
                "GPU",
                "meets SLO",
                "max batch",
                "step",
                "P50",
                "P99",
                "TTFA P99",
                "most per GPU",
                "GPUs",
                "$/GPU-h",
                "$/h",
                "$/audio-h",
                "basis",
            ],
            rows,
            "★ on the Pareto front (no card both cheaper per audio hour and lower in P99); latencies at the "
            f"target load per GPU; calibration: {plan.inputs.calibration}; prices: {plan.inputs.prices}",
        )
    )
    return sec


def plan_sections(path: Path, plan: Plan, key: str) -> list[Section]:
    return [scenario_section(path, plan, sc, f"{key}_{i}") for i, sc in enumerate(plan.scenarios)]
