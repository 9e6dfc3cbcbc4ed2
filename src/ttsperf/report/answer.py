"""The answer a report leads with, in one box: which card, how many, with which settings, at what
cost per audio hour, the range of streams per GPU, and the limit that binds.

It comes from the plan's `recommended` object of the first scenario. A plan written before plan
recorded that object is read from its rows instead (the cheapest GPU per audio hour among the
rows meeting the SLO), and what such a plan does not hold is said to be unknown, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttsperf.plan.schema import PlanRow, ScenarioPlan
from ttsperf.report.cost_chart import is_gpu

UNKNOWN = "unknown (not in this plan file)"
BINDING = {
    "ttfa": "time to first audio (TTFA P99)",
    "underrun": "playback underrun (the stream stalls)",
    "memory": "GPU memory (max batch)",
    "max batch": "the max batch setting (the batch is full)",
    "throughput": "decode throughput",
    "host": "host (CPU) time per step",
    "e2e": "end-to-end latency",
    "rtf": "real-time factor",
}


@dataclass
class Answer:
    scenario: str
    source: Path
    fields: list[tuple[str, str]]  # (label, value) in the order the box shows them
    serve_flags: str | None
    basis: str  # "from the plan's recommendation" or how it was derived from the rows


def _get(obj: Any, name: str) -> Any:
    """A field of a plan object, a pydantic model or a plain dict; None when absent (older plans)."""
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def settings_text(settings: Any) -> str | None:
    """ "fp16, cuda-graphs, 3 ms step overhead, first chunk 12 steps, max batch 32" from the parts
    the settings hold; None when there are none."""
    if settings is None:
        return None
    parts = [str(v) for v in (_get(settings, "dtype"), _get(settings, "mode")) if v]
    if (o := _get(settings, "step_overhead_s")) is not None:
        parts.append(f"{1000 * o:.3g} ms step overhead")
    if (f := _get(settings, "first_chunk_steps")) is not None:
        parts.append(f"first chunk {f} steps")
    if (b := _get(settings, "max_batch")) is not None:
        parts.append(f"max batch {b}")
    return ", ".join(parts) or None


def range_text(rng: Any, unit: str = "streams per GPU") -> str | None:
    if not rng:
        return None
    low, high = (f"{v:,}" if isinstance(v, int) else f"{v:.3g}" for v in rng)
    return f"{low}-{high} {unit}" if low != high else f"{low} {unit}"


def capacity_range(obj: Any) -> str | None:
    """Streams (or, for a rate load, requests/s) per GPU at the ends of the overhead's range."""
    return range_text(_get(obj, "max_streams_range")) or range_text(
        _get(obj, "max_rate_range"), "req/s per GPU"
    )


def card_text(gpu: str, count: int | None, count_range: Any) -> str:
    if count is None:
        return f"{gpu} (count unknown)"
    spread = f" ({count_range[0]}-{count_range[1]} across the overhead's range)" if count_range else ""
    return f"{count} x {gpu}{spread}"


def binding_text(binding: str | None) -> str | None:
    return None if binding is None else BINDING.get(binding, binding)


def cheapest_row(sc: ScenarioPlan) -> PlanRow | None:
    """The row an older plan's box shows: the lowest $/audio-hour among GPUs meeting the SLO."""
    ok = [r for r in sc.rows if r.meets_slo and is_gpu(r) and r.usd_per_audio_hour is not None]
    return min(ok, key=lambda r: (r.usd_per_audio_hour, r.gpu), default=None)


def _money(v: float | None) -> str | None:
    return None if v is None else f"${v:.4g}"


def answer(path: Path, sc: ScenarioPlan) -> Answer | None:
    """The box for one scenario, or None when no GPU meets its SLO (the sentence says why)."""
    rec = _get(sc, "recommended")
    if rec is not None:
        measured = _get(rec, "measured")
        card = card_text(_get(rec, "gpu"), _get(rec, "gpus_needed"), _get(rec, "gpus_needed_range"))
        settings, binding = _get(rec, "settings"), _get(rec, "binding")
        rng, cost = capacity_range(rec), _get(rec, "usd_per_audio_hour")
        basis, missing = "from the plan's recommendation", "not given by the plan"
    else:
        row = cheapest_row(sc)
        if row is None:
            return None
        measured = None
        card = card_text(row.gpu, row.gpus_needed, None)
        settings, binding = _get(row, "settings"), _get(row, "binding")
        rng, cost = capacity_range(row), row.usd_per_audio_hour
        basis = "the plan names no recommended setting: the cheapest GPU per audio hour meeting the SLO"
        missing = UNKNOWN
    how = {True: "measured: a profile of this card", False: "projected, not measured on this card"}
    fields = [
        ("card", card),
        ("setting", settings_text(settings) or missing),
        ("cost", f"{_money(cost)} per audio hour" if cost is not None else missing),
        ("range", rng or missing),
        ("binding limit", binding_text(binding) or missing),
        ("basis", how.get(measured, f"projected; profiled or not: {missing}")),
    ]
    return Answer(sc.scenario, path, fields, _get(settings, "serve_flags"), basis)
