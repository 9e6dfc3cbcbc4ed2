"""`ttsperf plan`: which GPU, how many, at what cost - projected from profiles or documented defaults."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ttsperf.cli.common import print_json, write_json
from ttsperf.cli.options import settings_command
from ttsperf.console import console
from ttsperf.errors import UserError
from ttsperf.i18n import SOURCE, resolve
from ttsperf.plan.answer import answer_lines, sentence_lines
from ttsperf.plan.api import make_plan
from ttsperf.plan.catalog import Price, load_catalog, split_names
from ttsperf.plan.money import CONVERTED, amount, load_rates, unit
from ttsperf.plan.predict import Prediction, predict
from ttsperf.plan.recommend import TIE_RULE, tie_groups
from ttsperf.plan.rows import gpus_range
from ttsperf.plan.schema import Plan, PlanRow, ScenarioPlan
from ttsperf.plan.settings import PlanSettings
from ttsperf.plan.simulate import Load

NO_CARD = 3  # the exit code of a plan where no card meets a scenario's SLO (0: every scenario has one)

HELP = """Choose the GPU, the count and the cost for serving ChatTTS, per scenario.

For every card: how many sequences fit (memory model), the decode step time (roofline with a
fixed per-step overhead), latency and time to first audio under load (simulation of the
continuous-batching scheduler), the most load per GPU meeting the SLO, GPUs needed (= replicas
of `serve --ray`, one GPU each) and the machines holding them, $/hour and $/audio-hour. Without
--profile every number is projected from documented defaults (see docs/PLANNING.md); with one,
the profiled card is fitted to its measurements. Exit 0 when a card meets every scenario's
SLO, 3 when no card meets one (the plan is printed and written all the same), 2 bad input.

\b
Examples:
  ttsperf plan --scenario realtime --streams 200 \\
      --gpus "T4,RTX 4090,A100 40GB PCIe"
  ttsperf plan --scenario realtime --streams 5000 --gpus "L4,H100 SXM" \\
      --gpus-per-machine 8
  ttsperf plan --profile prof.json --price "RTX 4090=0.5" --json -o plan.json
  ttsperf plan --gpus "RTX 3080" --audio-seconds 8 --memory-at 4 \\
      --scenario offline
  ttsperf plan --scenario realtime --step-overhead 3ms -o plans/
  ttsperf plan --scenario realtime --text-set mixed --gpus "L4,RTX 3090"
  ttsperf plan --predict --profile prof.json --streams 64 --max-batch 64
"""


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _gib(x: float) -> str:
    return f"{x / 2**30:.3f}"


def render(
    plan: Plan, console: Console, memory_at: int | None, wide: bool = False, lang: str = SOURCE
) -> None:
    i = plan.inputs
    w = i.workload
    for sc in plan.scenarios:  # the answer first, in the reader's language (--lang)
        block = answer_lines(sc, min(80, console.width)) if lang == SOURCE else _said_lines(sc, lang, console)
        console.print("\n".join(block) + "\n", markup=False, highlight=False)
    console.print(
        f"[bold]ttsperf plan[/bold]: {requests_text(w)}, {w['dtype']}, first audio after "
        f"{w['first_chunk_steps']} steps"
    )
    m = i.model
    console.print(
        f"model: {m['parameters']:,} parameters ({m['parameters'] / 1e9:.2f} B); weights "
        f"{m['weights_bytes'] / 1e9:.2f} GB {w['dtype']}; KV {m['kv_bytes_per_token']:,.0f} B/token = "
        f"{m['kv_bytes_per_audio_second'] / 1e6:.2f} MB per audio second per sequence "
        f"({m['bytes_per_audio_second_with_fragmentation'] / 1e6:.2f} MB with fragmentation)"
    )
    console.print(f"calibration: {i.calibration}")
    console.print(f"catalog: {i.catalog}; prices: {i.prices}")
    for sc in plan.scenarios:
        _compact_table(sc, console)
        if wide:
            _details_table(sc, console)
        _other_table(sc, console)
    if memory_at is not None and plan.scenarios:
        _memory_table(plan.scenarios[0], console, memory_at)
    for note in plan.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(_legend(plan, wide), highlight=False)
    for rate in i.fx:
        console.print(f"~ {i.currency} converted at {rate}", highlight=False)


def _stream_words(plan: Plan) -> str:
    """What a stream is in this plan's scenarios: a listener (dialogue) or a request in flight."""
    think = {sc.load.get("think_s") for sc in plan.scenarios if sc.load["kind"] == "streams"}
    if not think:
        return ""
    if None in think:
        return "stream = one request in flight, sent again as soon as it ends. "
    t = ", ".join(f"{x:g}" for x in sorted(think))
    return (
        f"stream = a listener: plays each reply as it arrives, sends the next request {t} s after it "
        "has played (--think-time). "
    )


def _legend(plan: Plan, wide: bool) -> str:
    """What the tables show, and only that: a mark no row carries is not explained."""
    rows = [r for sc in plan.scenarios for r in sc.rows if r.device == "gpu"]
    marks = {_price_mark(r) for r in rows if r.usd_per_gpu_hour is not None}
    cells = [_gpus_cell(sc, r) for sc in plan.scenarios for r in sc.rows if r.device == "gpu"]
    parts = [
        "setting = engine mode, c = steps before the first audio chunk (the flags: --json, "
        "'settings.serve_flags')",
        (
            any(r.max_streams_range or r.max_rate_range for r in rows),
            "(a-b) = at the high and low ends of the mode's fixed costs (host profile, kernel costs)",
        ),
        (
            any(" (-" in c or c.endswith("-)") for c in cells),
            "n (-b), n (a-) = n is one end of its range itself: n to b, a to n",
        ),
        (any(r.binding for r in rows), "binds = what stops more load per GPU"),
        (
            any(_fitted(r) for r in rows),
            "(fit) = step time fitted to a profile of that card (yours, or one ttsperf measured)",
        ),
        (any("*" in m for m in marks), "* = price from --price"),
        (any("own" in m for m in marks), "own = bought (--own): amortised + electricity"),
        (any("~" in m for m in marks), "~ = converted (the rate below)"),
    ]
    said = [p if isinstance(p, str) else p[1] for p in parts if isinstance(p, str) or p[0]]
    text = _stream_words(plan) + "; ".join(said) + "."
    if any(not r.meets_slo for r in rows):
        text += " Dim rows miss the SLO."
    return text + (
        " How each number was found: --json, 'basis' (defaults: docs/PLANNING.md); "
        "prices' providers and dates: --list-prices." + ("" if wide else " --wide: latencies, batch, energy.")
    )


def _said_lines(sc: ScenarioPlan, lang: str, console: Console) -> list[str]:
    """The answer in `lang` (the report's words, and matplotlib: imported only when asked) as a
    block within the console's width, its head once."""
    from ttsperf.i18n import use
    from ttsperf.report.sentence import head_text, said

    with use(lang):
        head = head_text(sc)
    return sentence_lines(said(sc, lang), head, min(80, console.width))


def setting_cell(r: PlanRow, dtype: bool = True) -> str:
    return "-" if r.settings is None else r.settings.words(short=True, dtype=dtype)


def shared_dtype(rows: list[PlanRow]) -> str | None:
    """The dtype every row with a setting is planned in, when they share one (said once, in the
    header, which keeps the table within 80 columns)."""
    dtypes = {r.settings.dtype for r in rows if r.settings is not None}
    return dtypes.pop() if len(dtypes) == 1 else None


def _rate(x: float) -> str:
    """A req/s figure as short as its precision allows: whole from 10 up (the range says how sure)."""
    return f"{x:.0f}" if x >= 9.5 else f"{x:.2g}"


def _capacity_cell(r: PlanRow, streams: bool) -> str:
    if not r.fits:  # memory holds a row but there is no step model to plan it from (its note says why)
        return "not planned" if r.max_batch > 0 else "no fit"
    if (r.max_streams if streams else r.max_rate_rps) is None:
        return "-"
    cap = str(r.max_streams) if streams else _rate(r.max_rate_rps)
    span = r.max_streams_range if streams else r.max_rate_range
    if span:
        lo, hi = span
        cap += f" ({lo}-{hi})" if streams else f" ({_rate(lo)}-{_rate(hi)})"
    return cap


def _gpus_cell(sc: ScenarioPlan, r: PlanRow) -> str:
    if r.gpus_needed is None:
        return "-"
    target = Load(str(sc.load["kind"]), float(sc.load["value"]))
    span = gpus_range(target, r)
    if not span or span[0] == span[1]:
        return f"{r.gpus_needed}"
    # the centre is one end whenever the range is a GPU or two wide: say it once ("113 (-118)")
    lo, hi = span
    if r.gpus_needed == lo:
        return f"{lo} (-{hi})"
    if r.gpus_needed == hi:
        return f"{hi} ({lo}-)"
    return f"{r.gpus_needed} ({lo}-{hi})"


def _title(sc: ScenarioPlan) -> str:
    load = f"{sc.load['value']:g} {'streams' if sc.load['kind'] == 'streams' else 'req/s'}"
    return f"{sc.scenario}: {sc.description}; SLO {sc.slo.spec or 'none'}; target {load}"


def _compact_table(sc: ScenarioPlan, console: Console) -> None:
    """The answer per card in 80 columns: setting, capacity with its range, GPUs, cost, binding."""
    streams = sc.load["kind"] == "streams"
    rows = [r for r in sc.rows if r.device == "gpu"]
    console.print(f"[bold]{_title(sc)}[/bold]", highlight=False)
    bindings = {r.binding or "-" for r in rows}
    one_binding = len(bindings) == 1 and "-" not in bindings  # said once, not in a column of repeats
    if one_binding:
        console.print(f"every card is bound by {bindings.pop()}", highlight=False)
    # no box: its dividers would take the 80 columns' last few
    t = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold underline")
    per_gpu = "streams\nper GPU" if streams else "req/s\nper GPU"
    cur = unit(rows[0].currency if rows else "USD")
    dtype = shared_dtype(rows)
    cols = (
        "GPU",
        f"setting\n({dtype})" if dtype else "setting",
        per_gpu,
        "GPUs",
        f"{cur}/h",
        f"{cur}/audio\nhour",
    ) + (() if one_binding else ("binds",))
    for col in cols:
        t.add_column(col, justify="left" if col in ("GPU", cols[1], "binds") else "right", no_wrap=True)
    notes = []
    for r in rows:
        cells = [
            r.gpu + (" (fit)" if _fitted(r) else ""),
            setting_cell(r, dtype is None),
            _capacity_cell(r, streams),
            _gpus_cell(sc, r),
            _cost(r.usd_per_hour, r),
            _cost(r.usd_per_audio_hour, r),
        ]
        t.add_row(*cells, *(() if one_binding else (r.binding or "-",)), style=None if r.meets_slo else "dim")
        if r.note:
            notes.append(f"{r.gpu}: {r.note}")
    if console.measure(t, options=console.options.update_width(10_000)).maximum > console.width:
        t.collapse_padding = True  # one space between columns, not two, before rich cuts a cell
    console.print(t)
    if ties := tie_groups(rows):
        notes.append(
            f"tied ({TIE_RULE}: the simulation cannot order them): " + "; ".join(", ".join(g) for g in ties)
        )
    for n in notes:
        console.print(textwrap.fill(n, max(40, console.width - 1), subsequent_indent="  "), markup=False,
                      highlight=False)  # fmt: skip


def _price_mark(r: PlanRow) -> str:
    """* a --price flag, own a bought card, ~ converted from another currency (the rate is below)."""
    how = r.basis["usd_per_gpu_hour"].how
    mark = "*" if how.startswith("user") else " own" if how.startswith("owned") else ""
    return mark + ("~" if CONVERTED in how else "")


def _cost(x: float | None, r: PlanRow) -> str:
    """A cost in 3 significant figures, marked with where its price comes from."""
    return "-" if x is None else amount(x) + _price_mark(r)


def _fitted(r: PlanRow) -> bool:
    return "step.t_fixed" in r.basis and r.basis["step.t_fixed"].kind == "measured"


def _other_table(sc: ScenarioPlan, console: Console) -> None:
    """Profiled devices that are not catalog GPUs (this CPU): shown apart, never recommended."""
    others = [r for r in sc.rows if r.device == "other"]
    if not others:
        return
    streams = sc.load["kind"] == "streams"
    t = Table(
        title="profiled devices that are not GPUs (measured; never recommended)",
        title_justify="left", box=None, padding=(0, 1), pad_edge=False, header_style="bold underline",
    )  # fmt: skip
    cur = unit(others[0].currency)
    for col in (
        "device",
        "setting",
        "streams" if streams else "req/s",
        f"{cur}/h",
        f"{cur}/audio-h",
        "binds",
    ):
        t.add_column(col, justify="left" if col in ("device", "setting", "binds") else "right", no_wrap=False)
    for r in others:
        t.add_row(
            r.gpu,
            setting_cell(r),
            _capacity_cell(r, streams),
            _cost(r.usd_per_gpu_hour, r),
            _cost(r.usd_per_audio_hour, r),
            r.binding or "-",
        )
    console.print(t)
    for r in others:
        if r.note:
            text = textwrap.fill(f"{r.gpu}: {r.note}", max(40, console.width - 1), subsequent_indent="  ")
            console.print(text, markup=False, highlight=False)


def _details_table(sc: ScenarioPlan, console: Console) -> None:
    """--wide: the rest of each card's row under the answer table, also in 80 columns."""
    cur = unit(next((r.currency for r in sc.rows), "USD"))
    t = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold underline")
    cols = ("GPU", "batch", "step\nms", "P50\ns", "P99\ns", "TTFA\nP99 s", "machines", f"{cur}/GPU\nhour",
            "Wh/audio\nhour")  # fmt: skip
    for col in cols:
        t.add_column(col, justify="left" if col == "GPU" else "right", no_wrap=True)
    for r in sc.rows:
        if r.device != "gpu":
            continue
        t.add_row(
            r.gpu,
            _batch_cell(r),
            _f(r.step_ms, ".1f"),
            _f(r.p50_s, ".2f"),
            _f(r.p99_s, ".2f"),
            _f(r.ttfa_p99_s, ".3f"),
            _f(r.machines, "d"),
            _cost(r.usd_per_gpu_hour, r),
            _f(r.kwh_per_audio_hour and r.kwh_per_audio_hour * 1000, ".2f"),
            style=None if r.meets_slo else "dim",
        )
    console.print("batch = the engine's slots at the setting (memory or --max-batch caps it); GPUs = "
                  "serve --ray replicas", highlight=False)  # fmt: skip
    console.print(t)


def _batch_cell(r: PlanRow) -> str:
    """The batch that applies: the setting's, which memory (max_batch) or --max-batch caps."""
    if not r.fits:  # memory holds a row but there is no step model to plan it from (its note says why)
        return "not planned" if r.max_batch > 0 else "no fit"
    return str(r.settings.max_batch if r.settings else r.max_batch)


def _memory_table(sc: ScenarioPlan, console: Console, batch: int) -> None:
    console.print(
        textwrap.fill(
            f"memory at batch {batch}, GiB (projected by the memory model; defaults: docs/PLANNING.md)",
            max(40, console.width - 1),
        ),
        highlight=False,
    )
    t = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold underline")
    for col in ("GPU", "weights", "runtime", "KV\ncache", "tran-\nsients", "frag-\nmentation", "total",
                "card", "fits"):  # fmt: skip
        t.add_column(col, justify="left" if col == "GPU" else "right", no_wrap=True)
    for r in sc.rows:
        m = r.memory_bytes
        t.add_row(
            r.gpu,
            _gib(m["weights"]),
            _gib(m["runtime"]),
            _gib(m["kv_cache"]),
            _gib(m["transients"]),
            _gib(m["fragmentation"]),
            _gib(m["total"]),
            _gib(m["card"]),
            "yes" if m["total"] <= m["card"] else "no",
        )
    console.print(t)


def requests_text(w: dict) -> str:
    """The requests a plan simulated: a text set's (their spread of audio) or one length."""
    if "text_set" in w:
        low, high = float(w["audio_min_s"]), float(w["audio_max_s"])
        return (
            f"requests of bench's {w['text_set']} texts, {low:.1f}-{high:.1f} s of audio (mean "
            f"{float(w['audio_seconds']):.1f} s), {w['prompt_tokens']}-token prompt on average"
        )
    return (
        f"{w['audio_seconds']} s of audio per request ({w['steps']} steps), {w['prompt_tokens']}-token prompt"
    )


def render_prediction(p: Prediction, console: Console) -> None:
    n, load, w = p.prediction, p.load, p.workload
    what = f"{load['value']:g} " + (
        "streams"
        if load["kind"] == "closed loop"
        else f"req/s {'Poisson' if load['kind'] == 'poisson' else 'constant'}"
    )
    if load.get("think_s") is not None:
        what += f" (listeners, think {load['think_s']:g} s)"
    if load.get("ramp_s"):
        what += f", started over {load['ramp_s']:g} s"
    lines = [
        ("throughput", f"{n.throughput_rps:.3f} req/s, {n.audio_seconds_per_s:.2f} audio s per s"),
        ("E2E", f"P50 {n.e2e_p50_s:.3f} s, P99 {n.e2e_p99_s:.3f} s"),
        (
            "TTFA",
            f"P50 {n.ttfa_p50_s:.3f} s, P99 {n.ttfa_p99_s:.3f} s"
            + ("" if p.streamed else " (not streamed: E2E)"),
        ),
        (
            "underrun",
            "none: not streamed"
            if n.underrun_p99_s is None
            else f"P99 {n.underrun_p99_s:.3f} s (worst stall per request, played from the first chunk)",
        ),
        (
            "refused",
            "none: the queue unbounded (no --max-queue, and no run's server says one)"
            if p.max_queue is None
            else f"{100 * n.error_rate:.1f}% of requests (503: {p.max_queue} waiting, the queue full; "
            "bench's error rate), latencies of the answered",
        ),
        ("mean batch", f"{n.mean_batch:.1f} rows per step of {1e3 * n.mean_step_s:.2f} ms"),
        (
            "workload",
            f"{w['lengths']} lengths drawn, mean {w['audio_seconds']:.2f} s of audio, longest "
            f"{w['audio_max_s']:.2f} s, {w['prompt_tokens']}-token prompt on average"
            + (f" ({w['requests']})" if "requests" in w else "")
            if "lengths" in w
            else f"{w['audio_seconds']:g} s of audio ({w['steps']} steps), {w['prompt_tokens']}-token prompt",
        ),
        ("", f"first audio after {w['first_chunk_steps']} steps"),
        (
            "simulated",
            f"{p.simulated_requests} requests"
            + (" answered" if n.error_rate else "")  # the refused have no latency
            + ("" if p.p99_resolved else ", too few to resolve P99"),
        ),
        ("basis", p.basis),
    ]
    if p.like:
        lines.insert(-1, ("like", p.like))
    if p.server:  # the run's server settings it took for what the user did not set
        lines.insert(-1, ("server", p.server["line"]))
    console.print(f"[bold]ttsperf plan --predict[/bold]: {p.device}, {what}, max batch {p.max_batch}")
    indent = " " * 14
    for label, text in lines:  # wrapped under its label, at the console's width
        wrapped = textwrap.fill(text, max(40, console.width - 1), initial_indent=f"  {label:<11} ",
                                subsequent_indent=indent)  # fmt: skip
        console.print(wrapped, highlight=False)


def write_outputs(plan: Plan, data: dict, out: str) -> list[Path]:
    """-o FILE writes the JSON there; -o DIR (existing, or ending in /) writes plan.json + charts."""
    output = Path(out)
    as_dir = output.is_dir() or out.endswith(("/", "\\"))
    files = (
        {output / "plan.json": json.dumps(data, indent=2, ensure_ascii=False) + "\n"}
        if as_dir
        else {output: json.dumps(data, indent=2, ensure_ascii=False) + "\n"}
    )
    if as_dir:
        from ttsperf.report.cost_chart import cost_svg  # matplotlib: loaded only when charts are written

        for sc in plan.scenarios:
            files[output / f"pareto-{sc.scenario}.svg"] = cost_svg(sc)
    try:
        if as_dir:
            output.mkdir(parents=True, exist_ok=True)
        for path, text in files.items():
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"-o {output}: cannot write: {exc.strerror or exc}") from None
    return list(files)


def register(app: typer.Typer) -> None:
    @settings_command(app, "plan", PlanSettings, help=HELP)
    def plan_cmd(
        settings: PlanSettings,
        sources: dict[str, str],
        wide: bool = typer.Option(
            False,
            "--wide",
            help="Add a second table per scenario (also 80 columns): the batch that applies, latencies, "
            "machines, price per GPU-hour, energy.",
        ),
        predict_load: bool = typer.Option(
            False,
            "--predict",
            help="What one device does at one load (--streams or --rate): the profiled one, or --gpus NAME.",
        ),
        list_prices: bool = typer.Option(
            False,
            "--list-prices",
            help="List the prices the plan would use (--prices, --gpus, --currency): provider, tier, date.",
        ),
        as_json: bool = typer.Option(
            False, "--json", help="Print the Plan JSON on stdout instead of tables."
        ),
        output: str = typer.Option(
            None,
            "-o",
            "--output",
            help="FILE.json: the Plan JSON; DIR/: plan.json + a cost-vs-P99 SVG per scenario.",
        ),
    ) -> None:
        if list_prices:
            _list_prices(settings, as_json)
            return
        if predict_load:
            if wide:
                raise UserError("--predict: --wide not used (one device, one load, no SLO or cost)")
            _predict(settings, as_json, output)
            return
        err = Console(stderr=True)
        with err.status("planning...") as status:
            plan = make_plan(settings, progress=lambda msg: status.update(f"planning {msg}"))
        plan.inputs.settings_sources = sources
        data = plan.dump()
        if output is not None:
            written = write_outputs(plan, data, output)
            if not as_json:
                Console(stderr=True).print(f"wrote {', '.join(str(p) for p in written)}")
        if as_json:
            print_json(data)
        else:
            # rich wraps at 80 columns when stdout is not a terminal; the table needs ~140
            render(plan, console(), settings.memory_at, wide, resolve(settings.lang))
        missed = [sc for sc in plan.scenarios if not any(r.meets_slo for r in sc.rows if r.device == "gpu")]
        if missed:  # written and shown all the same; a script learns it from the exit code
            said = ", ".join(f"{sc.scenario} ({sc.slo.spec})" for sc in missed)
            typer.echo(f"plan: no card meets the SLO of {said}: exit {NO_CARD}", err=True)
            raise typer.Exit(NO_CARD)


def _list_prices(settings: PlanSettings, as_json: bool) -> None:
    """Every price row of the selected set (and --prices FILE, --price), cheapest first per card."""
    s = settings.check()
    cat = load_catalog(
        Path(s.catalog) if s.catalog else None, s.prices, s.price,
        split_names(s.gpus) if s.gpus is not None else None,
        currency=s.currency, rates=load_rates(flags=s.fx),
    )  # fmt: skip
    rows = sorted((p for p in cat.rows if p.gpu in cat.gpus), key=lambda p: (p.gpu, p.per_gpu_hour))
    if as_json:
        print_json(
            {"prices": cat.prices_file, "currency": s.currency, "rows": [_price_json(p) for p in rows]}
        )
        return
    out = console()
    out.print(f"prices: {cat.prices_file}; in {s.currency}; a plan takes each card's first (cheapest) row",
              highlight=False)  # fmt: skip
    t = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold underline")
    for col in ("GPU", "provider", "tier", f"{unit(s.currency)}/GPU\nhour", "read on", "2nd\nhand"):
        t.add_column(col, justify="right" if "hour" in col else "left", overflow="fold",
                     no_wrap=col in ("GPU", "tier") or "hour" in col)  # fmt: skip
    rates = {p.fx.label() for p in rows if p.fx}
    for p in rows:
        t.add_row(p.gpu, p.provider or "user", p.tier, amount(p.per_gpu_hour) + ("~" if p.fx else ""),
                  p.read_on, "yes" if p.second_hand else "no")  # fmt: skip
    out.print(t)
    for rate in sorted(rates):
        out.print(f"~ converted at {rate}", highlight=False)
    out.print("2nd hand = read from a page other than the provider's own; each row's SKU, region and "
              "source: --list-prices --json", highlight=False)  # fmt: skip


def _price_json(p: Price) -> dict:
    return {
        "gpu": p.gpu, "provider": p.provider, "sku": p.sku, "region": p.region, "tier": p.tier,
        "read_on": p.read_on, "second_hand": p.second_hand,
        "currency": p.currency, "per_gpu_hour": p.per_gpu_hour,
        "quoted": None if p.quoted is None else {"per_gpu_hour": p.quoted[0], "currency": p.quoted[1]},
        "fx": None if p.fx is None else p.fx.label(), "source": p.source,
    }  # fmt: skip


def _predict(settings: PlanSettings, as_json: bool, output: str | None) -> None:
    p = predict(settings)
    data = p.dump()
    if output is not None:
        to = Path(output)
        to = to / "prediction.json" if to.is_dir() or output.endswith(("/", "\\")) else to
        try:
            write_json(to, data)
        except OSError as exc:
            raise UserError(f"-o {output}: cannot write: {exc.strerror or exc}") from None
    if as_json:
        print_json(data)
    else:
        render_prediction(p, console())
