"""Turn the inputs into a Report: the recommendation first, then one section per result."""

from __future__ import annotations

from pathlib import Path

from ttsperf.i18n import N_, SOURCE, _, current
from ttsperf.report.answer import Answer, answer
from ttsperf.report.bench_sections import load_section, telemetry_section
from ttsperf.report.claims import claims_section
from ttsperf.report.document import Report, ScenarioAnswer, Section
from ttsperf.report.inputs import Inputs
from ttsperf.report.model_sections import demo_section, optimizations_section, profile_section
from ttsperf.report.plan_section import plan_sections
from ttsperf.report.prediction_section import prediction_section
from ttsperf.report.sentence import sentence


def recommendation(inputs: Inputs) -> tuple[str, Path | None, list[ScenarioAnswer]]:
    """(the one sentence at the top, the file it came from, the other scenarios' sentences and
    boxes).

    A plan's first scenario decides; without a plan, the most a bench run measured; without
    either, what the profile says; each says what is missing for a GPU choice. In English a plan's
    sentence is plan's own; in another language it is built from the plan's fields.
    """
    said = (lambda sc: sc.recommendation) if current() == SOURCE else sentence
    for path, plan in inputs.plans:
        if plan.scenarios:
            first, *rest = plan.scenarios
            return said(first), path, [ScenarioAnswer(sc.scenario, said(sc), answer(path, sc)) for sc in rest]
    for path, run in inputs.bench:
        if run.points:
            best = max(run.points, key=lambda p: p.throughput_rps)
            slo = (
                ""
                if run.slo is None
                else (
                    _(" and met its SLO")
                    if run.slo.passed
                    else _(" but failed its SLO ({failures})").format(failures="; ".join(run.slo.failures))
                )
            )
            said = _(
                "No plan among the inputs, so no GPU choice: {targets} served at most {rps} requests/s "
                "({audio} audio s/s) at {load}{slo}; run `ttsperf plan --profile PROFILE` for GPUs and cost."
            )
            return (
                said.format(
                    targets=", ".join(run.targets),
                    rps=f"{best.throughput_rps:.3g}",
                    audio=f"{best.audio_seconds_per_s:.3g}",
                    load=best.label,
                    slo=slo,
                ),
                path,
                [],
            )
    for path, prof in inputs.profiles:
        step = min(prof.steps, key=lambda p: (p.batch, p.context), default=None)
        at = (
            _("; a decode step at batch {batch} takes {ms} ms").format(
                batch=step.batch, ms=f"{1000 * step.seconds.value:.1f}"
            )
            if step
            else ""
        )
        said = _(
            "No plan among the inputs, so no GPU choice: {config} {dtype} was profiled on {device}{at}; "
            "run `ttsperf plan --profile {path}` for GPUs and cost."
        )
        return (
            said.format(
                config=prof.model.config, dtype=prof.model.dtype, device=prof.device.name, at=at, path=path
            ),
            path,
            [],
        )
    return _("No plan, bench run or profile among the inputs: nothing to recommend from."), None, []


MISSING = (
    N_("latency, throughput and telemetry: no bench run (`ttsperf bench -o DIR` writes run.json)"),
    N_("memory and step time vs batch: no profile (ttsperf profile -o profile.json)"),
    N_("cost table and Pareto chart: no plan (ttsperf plan --json -o plan.json)"),
)


def lead_scenario(inputs: Inputs) -> tuple[str | None, Answer | None]:
    """The scenario the recommendation sentence comes from (a plan's first) and its box."""
    for path, plan in inputs.plans:
        if plan.scenarios:
            return plan.scenarios[0].scenario, answer(path, plan.scenarios[0])
    return None, None


def _key(path: Path, i: int) -> str:
    """A short, file-safe, unique name for charts of one input."""
    stem = "".join(ch if ch.isalnum() else "_" for ch in path.parent.name or "input")[:24]
    return f"{stem}{i}"


def build_report(inputs: Inputs) -> Report:
    sections: list[Section] = []
    for i, (path, run) in enumerate(inputs.bench):
        sections += [load_section(path, run, _key(path, i)), telemetry_section(path, run, _key(path, i))]
    for i, (path, prof) in enumerate(inputs.profiles):
        sections.append(profile_section(path, prof, _key(path, i)))
    for path, rows in inputs.optimizations:
        sections.append(optimizations_section(path, rows))
    for i, (path, plan) in enumerate(inputs.plans):
        sections += plan_sections(path, plan, _key(path, i))
    for path, pred in inputs.predictions:
        sections.append(prediction_section(path, pred, inputs.bench))
    claims = claims_section(inputs)
    if claims is not None:
        sections.append(claims)
    for path, summary in inputs.demos:
        sections.append(demo_section(path, summary))
    sentence, source, others = recommendation(inputs)
    missing = [
        _(what)
        for what, present in zip(MISSING, (inputs.bench, inputs.profiles, inputs.plans), strict=True)
        if not present
    ]
    lead, box = lead_scenario(inputs)
    return Report(sentence, source, others, sections, inputs.files(), inputs.skipped, missing, box, lead)
