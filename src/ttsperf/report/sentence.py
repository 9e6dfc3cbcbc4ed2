"""A scenario's recommendation as one sentence in the reader's language, built from the plan's
structured fields (`recommended`, the rows, the SLO and the load), not from plan's English text.

In English it reads as plan's own sentence without the plan-wide basis note (a test holds the two
together); in another language every word comes from that language's catalog (ttsperf.i18n),
and the numbers, units, card names and commands are the same.
"""

from __future__ import annotations

from ttsperf.i18n import SOURCE, _, use
from ttsperf.plan.like import bench_flags
from ttsperf.plan.schema import PlanRow, Recommended, ScenarioPlan
from ttsperf.plan.simulate import Load
from ttsperf.report.answer import binding_text, cheapest_row, cost_text, row_of
from ttsperf.report.cost_chart import is_gpu

READS_A_STREAM = ("ttfa", "underrun")  # SLO metrics that exist only for a streamed response


def load_text(load: dict) -> str:
    value, kind = float(load["value"]), load["kind"]
    if kind == "streams":
        return _("{n} streams").format(n=f"{value:g}")
    return _("{n} req/s ({kind})").format(n=f"{value:.3g}", kind=kind)


def head_text(sc: ScenarioPlan) -> str:
    slo = sc.slo.spec or _("no latency bound")
    return _("{scenario} ({slo}; {load})").format(scenario=sc.scenario, slo=slo, load=load_text(sc.load))


def _no_card(sc: ScenarioPlan) -> str:
    fits = [r for r in sc.rows if is_gpu(r) and r.fits and r.ttfa_p99_s is not None]
    if not fits:
        return _("no card in the selection fits the workload")
    best = min(fits, key=lambda r: r.ttfa_p99_s)
    return _(
        "no card meets the SLO; the closest is {gpu} (TTFA P99 {ttfa} s, E2E P99 {e2e} s at the least load)"
    ).format(gpu=best.gpu, ttfa=f"{best.ttfa_p99_s:.3f}", e2e=f"{best.p99_s:.2f}")


def _what(sc: ScenarioPlan, rec: Recommended, row: PlanRow | None) -> str:
    """The card, count and cost; plan ranks by `objective` (a row's $/h or $/audio-h)."""
    count, gpu = rec.gpus_needed, rec.gpu
    if row is None or getattr(row, sc.objective, None) is None:
        return _("no card that meets the SLO has a price; fewest GPUs: {count} x {gpu}").format(
            count=count, gpu=gpu
        )
    unpriced = [
        r.gpu
        for r in sc.rows
        if is_gpu(r) and r.meets_slo and r.gpus_needed and getattr(r, sc.objective, None) is None
    ]
    what = _("{count} x {gpu} ({cost}) is the cheapest that meets it").format(
        count=count, gpu=gpu, cost=cost_text(rec.usd_per_hour, rec.usd_per_audio_hour, count, rec.currency)
    )
    if unpriced:
        what += _(" (also meeting it but without a price: {gpus})").format(gpus=", ".join(unpriced))
    return what


def _range(rec: Recommended, streams: bool) -> str | None:
    """The centre capacity per GPU, then its range over the overhead's sourced ends (a plan
    written before the centre was recorded: the range alone)."""
    centre = rec.max_streams if streams else rec.max_rate_rps
    span = rec.max_streams_range if streams else rec.max_rate_range
    show = (lambda x: str(x)) if streams else (lambda x: f"{x:.3g}")  # noqa: E731
    n = rec.gpus_needed_range
    gpus = _(", so {low}-{high} GPUs").format(low=n[0], high=n[1]) if n and n[0] != n[1] else ""
    if centre is None:
        if span is None:
            return None
        text = (
            _("{low}-{high} streams per GPU over the overhead's sourced range")
            if streams
            else _("{low}-{high} req/s per GPU over the overhead's sourced range")
        )
        return text.format(low=show(span[0]), high=show(span[1])) + gpus
    text = (_("{n} streams per GPU") if streams else _("{n} req/s per GPU")).format(n=show(centre))
    if span is not None:
        text += _(" ({low}-{high} over the overhead's sourced range{gpus})").format(
            low=show(span[0]), high=show(span[1]), gpus=gpus
        )
    return text


def _check(sc: ScenarioPlan, rec: Recommended, row: PlanRow | None) -> str | None:
    """The bench command that checks the plan's answer (plan's own sentence ends with it): the
    plan's own (`recommended.check`), else built as plan builds it, for a plan written before."""
    if not sc.slo.limits or row is None:
        return None
    if rec.check:
        return _("check it with `{command}`").format(command=rec.check)
    if sc.load["kind"] != "streams":
        load = bench_flags(Load("rate", float(row.max_rate_rps or 0.0)))
    else:  # the plan's streams: listeners (bench's users) where it says a think time
        think = sc.load.get("think_s")
        load = bench_flags(
            Load("streams", float(row.max_streams or 0), None if think is None else float(think))
        )
    stream = " --adapter openai --stream" if any(k.startswith(READS_A_STREAM) for k in sc.slo.limits) else ""
    command = f"ttsperf bench URL{stream} {load} --requests 400 --slo {sc.slo.spec}"
    return _("check it with `{command}`").format(command=command)


def said(sc: ScenarioPlan, lang: str) -> str:
    """The answer in `lang`: plan's own sentence in English, else one built from its fields."""
    if lang == SOURCE:
        return sc.recommendation
    with use(lang):
        return sentence(sc)


def _from_row(r: PlanRow) -> Recommended:
    """What a plan written before `recommended` existed recommends: its cheapest row meeting the SLO."""
    fitted = r.basis.get("step.t_fixed")
    return Recommended(
        gpu=r.gpu, gpus_needed=r.gpus_needed or 1, settings=r.settings, binding=r.binding,
        max_streams_range=r.max_streams_range, max_rate_range=r.max_rate_range, usd_per_hour=r.usd_per_hour,
        usd_per_audio_hour=r.usd_per_audio_hour, measured=fitted is not None and fitted.kind == "measured",
    )  # fmt: skip


def sentence(sc: ScenarioPlan) -> str:
    """The scenario's recommendation in the current language (ttsperf.i18n.use)."""
    rec = sc.recommended
    if rec is None and (row := cheapest_row(sc)) is not None:
        rec = _from_row(row)
    if rec is None:
        return _("{head}: {body}.").format(head=head_text(sc), body=_no_card(sc))
    row = row_of(sc, rec.gpu)
    parts = [_what(sc, rec, row)]
    if (st := rec.settings) is not None:
        words = _("{mode}, {dtype}, first chunk {n} steps").format(
            mode=st.mode, dtype=st.dtype, n=st.first_chunk_steps
        )
        parts.append(_("with {settings} (`{flags}`)").format(settings=words, flags=st.serve_flags))
    if rec.binding:
        parts.append(_("bound by {binding}").format(binding=binding_text(rec.binding)))
    if (rng := _range(rec, sc.load["kind"] == "streams")) is not None:
        parts.append(rng)
    parts.append(
        _("its step times measured by a profile of this card")
        if rec.measured
        else _("projected, not measured on this card: run `ttsperf profile` on it")
    )
    if (check := _check(sc, rec, row)) is not None:
        parts.append(check)
    return _("{head}: {body}.").format(head=head_text(sc), body=_("; ").join(parts))
