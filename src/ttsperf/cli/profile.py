"""`ttsperf profile`: memory and speed of ChatTTS on this device -> a ModelProfile JSON for `plan`."""

from __future__ import annotations

from pathlib import Path

import typer

from ttsperf.cli.common import print_json, write_json
from ttsperf.cli.options import settings_command
from ttsperf.profile.settings import QUICK, ProfileSettings


def profile(
    settings: ProfileSettings,
    sources: dict[str, str],
    out: Path | None = typer.Option(None, "-o", "--out", help="Write the profile JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the profile JSON."),
) -> None:
    """Measure weights, KV bytes, decode step time and memory per (batch, context), prefill time and
    Decoder+Vocos speed on this device, through the engine's own step.

    Example: ttsperf profile --synthetic --quick -o profile.json

    Example: ttsperf profile --synthetic --device cuda --max-batch-search -o profile.json

    Example: ttsperf profile --host -o host.json  # this CPU's host work per part; no GPU needed
    """
    from rich.console import Console

    from ttsperf.model.device import resolve_device

    s = settings.check()
    console = Console(stderr=True)
    if s.host:
        _host(s, sources, out, as_json, console)
        return
    # --device cuda without CUDA: one line now (torch's import), not after the model's modules have
    # loaded, or --optimizations' first variant has built a model in a process of its own (15 s+)
    resolve_device(s.device)
    from ttsperf.model.pipeline import Pipeline
    from ttsperf.model.spec import ModelSpec
    from ttsperf.profile.measure import profile_model

    if s.optimizations:
        name = s.config or "chattts"
        _optimizations(name, s.device, max(s.batches), max(s.contexts), s.repeats, out, as_json, console)
        return
    pipe = Pipeline.from_spec(ModelSpec(s.assets, s.synthetic, s.config, s.device, s.dtype, seed=0))
    config = pipe.cfg.name
    with console.status("profiling") as status:
        prof = profile_model(
            pipe, batches=s.batches, contexts=s.contexts, prompts=s.prompts, repeats=s.repeats,
            warmup=1 if s.quick else 3, progress=lambda msg: status.update(f"profiling: {msg}"),
        )  # fmt: skip
        if s.max_batch_search:
            from ttsperf.profile.maxbatch import DEFAULT_CAP, search_max_batch

            budget = None if s.memory_budget is None else s.memory_budget * 1024**3
            prof.max_batch = search_max_batch(
                pipe, s.contexts, budget_bytes=budget, cap=s.max_batch_cap or DEFAULT_CAP,
                progress=lambda msg: status.update(f"profiling: {msg}"),
            )  # fmt: skip
        if s.modes is not None:
            _measure_modes(prof, pipe, s, lambda msg: status.update(f"profiling: {msg}"))
    if s.quick:  # --quick set the grid: its source is the grid's
        sources = sources | {name: sources["quick"] for name in QUICK}
    if _write(prof, s, sources, out, as_json):
        return
    _print_profile(prof, pipe.cfg.steps_per_second, f"{config}, {s.dtype}", out)


def _print_profile(prof, steps_per_second: float, what: str, out: Path | None) -> None:
    """The profile as tables and lines on stdout."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"decode step on {prof.device.name} ({what})")
    for col in ("batch", "context", "step ms", "spread ms", "x real time", "memory MB"):
        table.add_column(col, justify="right")
    for step, mem in zip(prof.steps, prof.memory, strict=True):
        xrt = step.batch / step.seconds.value / steps_per_second
        table.add_row(
            str(step.batch), str(step.context), f"{1000 * step.seconds.value:.1f}",
            f"{1000 * (step.seconds.spread or 0):.1f}", f"{xrt:.2f}", f"{mem.peak_bytes.value / 1e6:,.0f}",
        )  # fmt: skip
    out_console = Console()
    out_console.print(table)
    for line in prefill_lines(prof.prefill):
        out_console.print(line)
    rate = prof.decode_seconds_per_audio_second
    chunk = prof.vocoder_chunk_seconds
    out_console.print(
        f"Decoder+Vocos: {rate.value:.3f} s per audio second; "
        f"one streamed chunk {1000 * chunk.value:.0f} ms; "
        f"weights {prof.weights_bytes.value / 1e6:,.0f} MB, KV {prof.kv_bytes_per_token.value:,.0f} B/token; "
        f"achieved {prof.achieved_bandwidth_gbs.value:.1f} GB/s"
    )
    if prof.fixed_step_overhead_s is not None:
        fixed = prof.fixed_step_overhead_s
        out_console.print(f"fixed per-step cost {1e3 * fixed.value:.1f} ms: {fixed.how}")
    if prof.max_batch:
        _print_max_batch(out_console, prof)
    if prof.modes:
        _print_modes(out_console, prof)
    if out is not None:
        out_console.print(f"wrote {out}")


def prefill_lines(points) -> list[str]:
    """Each measured prefill labelled with what varies: the prompt's tokens alone, then the batch of
    prompts the engine admits in one call (`batch 4: 7 ms`)."""
    ms = lambda p: f"{1000 * p.seconds.value:.0f} ms"  # noqa: E731
    lines = []
    if one := [p for p in points if p.rows == 1]:
        lines.append("prefill, one prompt: " + ", ".join(f"{p.prompt_tokens} tokens: {ms(p)}" for p in one))
    for tokens in sorted({p.prompt_tokens for p in points if p.rows > 1}):
        calls = [p for p in points if p.rows > 1 and p.prompt_tokens == tokens]
        batches = ", ".join(f"batch {p.rows}: {ms(p)}" for p in calls)
        lines.append(f"prefill, prompts of {tokens} tokens in one call: {batches}")
    return lines


def _write(prof, s: ProfileSettings, sources: dict[str, str], out: Path | None, as_json: bool) -> bool:
    """Record the settings in the profile, write it to `out`, print it if --json (-> printed)."""
    prof.settings, prof.settings_sources = s.model_dump(mode="json"), sources
    data = prof.dump()
    if out is not None:
        write_json(out, data)
    if as_json:
        print_json(data)
    return as_json


def _measure_modes(prof, pipe, s: ProfileSettings, say) -> None:
    """--modes: each engine mode, the per-op host cost and (--modes-host) the host profile, into `prof`."""
    import torch

    from ttsperf.profile.modes import measure_modes, per_op_host
    from ttsperf.profile.settings import parse_modes

    with torch.inference_mode():
        prof.modes = measure_modes(pipe, parse_modes(s.modes or ""), s.batches, prof.prefill, s.repeats, say)
    say("the host's cost per op, on the device and on the CPU")
    prof.per_op_host = per_op_host(pipe.device)
    if s.modes_host:
        from ttsperf.profile.host import measure_host

        host = measure_host(
            repeats=s.repeats, warmup=1 if s.quick else 3, compile=s.host_compile, progress=say
        )
        prof.host = host.host


def _print_modes(console, prof) -> None:
    from rich.table import Table

    table = Table(title="each engine mode as serve runs it (--modes)")
    for col in ("mode", "step ms by batch", "audio call ms by rows", "prefill ms", "set up s"):
        table.add_column(col)
    for name, m in prof.modes.items():
        if m.skipped:
            table.add_row(name, f"skipped: {m.skipped}", "", "", "")
            continue
        ms = lambda pts, key: ", ".join(f"{getattr(p, key)}: {1e3 * p.seconds.value:.2f}" for p in pts)  # noqa: E731
        prefill = ", ".join(f"{p.rows}x{p.prompt_tokens}: {1e3 * p.seconds.value:.1f}" for p in m.prefill)
        setup = "-" if m.setup_seconds is None else f"{m.setup_seconds:.1f}"
        table.add_row(name, ms(m.steps, "batch"), ms(m.audio_calls, "rows"), prefill, setup)
    console.print(table)
    op = prof.per_op_host
    if op is not None:
        console.print(
            f"host per op: {1e6 * op.device_op.value:.2f} us on the device, "
            f"{1e6 * op.cpu_op.value:.2f} us on the CPU: factor {op.factor:.2f}"
            + (" (a CPU: 1 by definition)" if prof.device.kind == "cpu" else "")
        )
    if prof.host is not None:
        console.print(
            f"host profile of {prof.host.cpu.model}: {prof.host.seconds_total:.0f} s, in the same file"
        )


def _print_max_batch(console, prof) -> None:
    from rich.table import Table

    table = Table(title="largest batch that fits (--max-batch-search)")
    for col in ("context", "max batch", "stopped by", "memory at max MB", "probes (batch: fits)"):
        table.add_column(col, justify="right" if col != "probes (batch: fits)" else "left")
    for m in prof.max_batch:
        mem = "-" if m.bytes_at_max is None else f"{m.bytes_at_max.value / 1e6:,.0f}"
        tried = " ".join(f"{b}:{'y' if ok else 'n'}" for b, ok in m.probes)
        table.add_row(str(m.context), f"{m.max_batch:,}", m.limit, mem, tried)
    console.print(table)
    for m in prof.max_batch:
        console.print(f"context {m.context}: {m.method}")


def _host(s: ProfileSettings, sources: dict[str, str], out, as_json: bool, console) -> None:
    from rich.console import Console

    from ttsperf.profile.host import measure_host, render_host

    with console.status("host profile") as status:
        prof = measure_host(
            repeats=s.repeats, warmup=1 if s.quick else 3, compile=s.host_compile,
            progress=lambda msg: status.update(f"host profile: {msg}"),
        )  # fmt: skip
    if _write(prof, s, sources, out, as_json):
        return
    out_console = Console()
    out_console.print(render_host(prof.host))
    if out is not None:
        out_console.print(f"wrote {out}")


def _optimizations(config, device, batch, context, repeats, out, as_json, console) -> None:
    from rich.console import Console
    from rich.table import Table

    from ttsperf.profile.optimizations import measure_optimizations

    with console.status("optimisations") as status:
        rows = measure_optimizations(
            config, device, batch, context, repeats, progress=lambda n: status.update(f"optimisations: {n}")
        )
    if out is not None:
        write_json(out, rows)
    if as_json:
        print_json(rows)
        return
    base = rows[0]
    table = Table(
        title=f"the guide's optimisations vs fp32 ({config}, {device}, batch {batch}, context {context})"
    )
    for col in (
        "variant",
        "step ms",
        "vs fp32",
        "dec+voc 10 s ms",
        "weights MB",
        "peak MB",
        "the guide says",
    ):
        table.add_column(col, justify="left" if col in ("variant", "the guide says") else "right")
    for r in rows:
        if not r["applies"]:
            table.add_row(r["variant"], "-", "-", "-", "-", "-", f"{r['guide_claim']} ({r['note']})")
            continue
        table.add_row(
            r["variant"], f"{r['step_ms']:.1f}", f"{base['step_ms'] / r['step_ms']:.2f}x",
            f"{r['decode_10s_ms']:.0f}", f"{r['weights_MB']:,.0f}", f"{r['peak_MB']:,.0f}", r["guide_claim"],
        )  # fmt: skip
    Console().print(table)


def register(app: typer.Typer) -> None:
    settings_command(app, "profile", ProfileSettings)(profile)
