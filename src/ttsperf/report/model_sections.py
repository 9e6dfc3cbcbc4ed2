"""Sections from profiles and `profile --optimizations` tables: memory and step time vs batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ttsperf.charts import LineChart, Series
from ttsperf.i18n import _
from ttsperf.profile.schema import ModelProfile
from ttsperf.report.document import Chart, Section, Table, mb, num


def _by_context(points, value) -> list[Series]:
    contexts = sorted({p.context for p in points})
    return [
        Series(f"context {c} tokens", sorted((p.batch, value(p)) for p in points if p.context == c))
        for c in contexts
    ]


def profile_section(path: Path, prof: ModelProfile, key: str) -> Section:
    d, m = prof.device, prof.model
    sec = Section(
        _("Model profile: {config} {dtype} on {device}").format(
            config=m.config, dtype=m.dtype, device=d.name
        ),
        [path],
    )
    weights = _("synthetic weights (random values, real shapes)") if m.synthetic else _("real weights")
    runtime = ", ".join(f"{k}={v}" for k, v in prof.runtime.items()) or _("not recorded")
    sec.say(
        _("{n} parameters, {weights}; runtime: {runtime}.").format(
            n=f"{m.parameters.get('total', sum(m.parameters.values())):,}", weights=weights, runtime=runtime
        )
    )
    if prof.memory:
        sec.blocks.append(
            Chart(
                f"memory_{key}",
                _("Memory vs batch"),
                LineChart(
                    "Memory vs batch (profile)",
                    "batch (sequences)",
                    "MB",
                    _by_context(prof.memory, lambda p: p.peak_bytes.value / 1e6),
                ).svg(),
            )
        )
    if prof.steps:
        sec.blocks.append(
            Chart(
                f"step_{key}",
                _("Decode step time vs batch"),
                LineChart(
                    "Decode step time vs batch (profile)",
                    "batch (sequences)",
                    "ms per step",
                    _by_context(prof.steps, lambda p: 1000 * p.seconds.value),
                ).svg(),
            )
        )
    sec.blocks.append(_measured_table(prof))
    sec.blocks.extend(_grid_tables(prof))
    return sec


def _measured_table(prof: ModelProfile) -> Table:
    """Each single measured figure with how it was measured."""
    rows = [
        [_("weights"), mb(prof.weights_bytes.value), prof.weights_bytes.how],
        [
            _("KV cache per token per sequence"),
            f"{prof.kv_bytes_per_token.value:,.0f} B",
            prof.kv_bytes_per_token.how,
        ],
    ]
    for name, meas in (
        (_("Decoder + Vocos per audio second"), prof.decode_seconds_per_audio_second),
        (_("one streamed chunk's Decoder + Vocos"), prof.vocoder_chunk_seconds),
        (_("fixed per-step overhead"), prof.fixed_step_overhead_s),
        (_("achieved bandwidth"), prof.achieved_bandwidth_gbs),
    ):
        if meas is not None:
            rows.append([name, f"{meas.value:.4g} {meas.unit}", meas.how])
    for p in prof.prefill:
        rows.append(
            [
                _("prefill of {n} tokens").format(n=p.prompt_tokens),
                f"{1000 * p.seconds.value:.1f} ms",
                p.seconds.how,
            ]
        )
    return Table([_("measured"), _("value"), _("how")], rows)


def _grid_tables(prof: ModelProfile) -> list[Table]:
    """Memory and step time at every (batch, context) the profile measured."""
    out = []
    if prof.memory:
        what = prof.memory[0].peak_bytes.how
        out.append(
            Table(
                [_("batch"), _("context"), _("memory"), _("process RSS")],
                [
                    [
                        str(p.batch),
                        str(p.context),
                        mb(p.peak_bytes.value),
                        mb(p.rss_bytes.value if p.rss_bytes else None),
                    ]
                    for p in prof.memory
                ],
                _("memory: {how}").format(how=what),
            )
        )
    if prof.steps:
        out.append(
            Table(
                [_("batch"), _("context"), _("step"), _("spread (IQR)"), "n"],
                [
                    [
                        str(p.batch),
                        str(p.context),
                        f"{1000 * p.seconds.value:.2f} ms",
                        num(None if p.seconds.spread is None else 1000 * p.seconds.spread, ".2f", " ms"),
                        num(p.seconds.n, "d"),
                    ]
                    for p in prof.steps
                ],
                prof.steps[0].seconds.how,
            )
        )
    return out


def baseline(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((r for r in rows if r.get("applies") and "baseline" in r.get("variant", "")), None)


def _delta(row: dict[str, Any], base: dict[str, Any] | None, field: str) -> str:
    if not row.get("applies") or base is None or not base.get(field):
        return "–"
    return f"{row[field] / base[field] - 1:+.0%}"


def optimizations_section(path: Path, rows: list[dict[str, Any]]) -> Section:
    sec = Section(_("The guide's optimisations, measured (profile --optimizations)"), [path])
    base = baseline(rows)
    sec.say(_("Each variant ran in its own process; deltas are against the fp32 baseline row."))
    table = []
    for r in rows:
        if not r.get("applies"):
            table.append(
                [
                    r["variant"],
                    r.get("guide_claim", ""),
                    "–",
                    "–",
                    "–",
                    "–",
                    "–",
                    _("not measured: {note}").format(note=r.get("note", "")),
                ]
            )
            continue
        table.append(
            [
                r["variant"],
                r.get("guide_claim", ""),
                num(r.get("step_ms"), ".1f", " ms"),
                _delta(r, base, "step_ms"),
                num(r.get("weights_MB"), ",.0f", " MB"),
                num(r.get("peak_MB"), ",.0f", " MB"),
                _delta(r, base, "peak_MB"),
                r.get("note", ""),
            ]
        )
    sec.blocks.append(
        Table(
            [
                _("variant"),
                _("the guide says"),
                _("step"),
                _("Δ step"),
                _("weights"),
                _("peak"),
                _("Δ peak"),
                _("note"),
            ],
            table,
        )
    )
    return sec


def demo_section(path: Path, summary: dict[str, Any]) -> Section:
    sec = Section(_("The demo run"), [path])
    state = (
        _("interrupted (Ctrl-C): stages after the last one shown did not run")
        if summary.get("interrupted")
        else _("complete")
    )
    sec.say(
        _("`{command}`, {state}: synthetic {config} on {device} ({threads} threads).").format(
            command="ttsperf demo" + (" --quick" if summary.get("quick") else ""),
            state=state,
            config=summary.get("config"),
            device=summary.get("device"),
            threads=summary.get("threads", "?"),
        )
    )
    rows = []
    if "audio_seconds" in summary:
        rows.append(
            [
                _("synthesis"),
                _("{audio} s of audio, {steps} steps, RTF {rtf} (length from {source})").format(
                    audio=summary["audio_seconds"],
                    steps=summary.get("steps"),
                    rtf=summary.get("rtf"),
                    source=summary.get("length_source"),
                ),
            ]
        )
    for k, v in summary.items():
        if k.endswith("_seconds") and k != "audio_seconds" and isinstance(v, (int, float)):
            rows.append(
                [
                    _("{stage} stage").format(stage=k.removesuffix("_seconds")),
                    _("{s} s wall").format(s=f"{v:.1f}"),
                ]
            )
    if rows:
        sec.blocks.append(Table([_("stage"), _("result")], rows))
    return sec
