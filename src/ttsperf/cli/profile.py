"""`ttsperf profile`: memory and speed of ChatTTS on this device -> a ModelProfile JSON for `plan`."""

from __future__ import annotations

from pathlib import Path

import typer

from ttsperf.cli.common import (
    ASSETS,
    DEVICE,
    DTYPE,
    MODEL_CONFIG,
    SYNTHETIC,
    print_json,
    user_errors,
    write_json,
)
from ttsperf.errors import UserError


def _ints(flag: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{flag} {text!r}: expected comma-separated positive integers, e.g. 1,4,16") from None
    if not values or any(v < 1 for v in values):
        raise UserError(f"{flag} {text!r}: expected comma-separated positive integers, e.g. 1,4,16")
    return values


@user_errors
def profile(
    assets: Path | None = ASSETS,
    synthetic: bool = SYNTHETIC,
    config: str | None = MODEL_CONFIG,
    device: str = DEVICE,
    dtype: str = DTYPE,
    batches: str = typer.Option("1,4,16", "--batches", help="Batch sizes of the decode-step grid."),
    contexts: str = typer.Option("64,512,2048", "--contexts", help="KV lengths of the decode-step grid."),
    prompts: str = typer.Option("16,64,256", "--prompts", help="Prompt lengths for prefill timing."),
    repeats: int = typer.Option(10, "--repeats", min=1, help="Timed repeats per point (median)."),
    quick: bool = typer.Option(False, "--quick", help="Batches 1,4; contexts 64,512; 3 repeats."),
    optimizations: bool = typer.Option(
        False,
        "--optimizations",
        help="Measure the guide's optimisations against fp32 instead (one process each).",
    ),
    max_batch_search: bool = typer.Option(
        False,
        "--max-batch-search",
        help="Also find the largest batch that fits at each context (CUDA: OOM-safe bisection; "
        "CPU: a memory budget).",
    ),
    memory_budget: float | None = typer.Option(
        None,
        "--memory-budget",
        help="GiB the process may use in --max-batch-search (CPU default: available RAM minus "
        "max(1 GiB, 10%); CUDA default: none, out-of-memory decides).",
    ),
    max_batch_cap: int | None = typer.Option(
        None, "--max-batch-cap", min=1, help="Largest batch --max-batch-search tries (default 4096)."
    ),
    out: Path | None = typer.Option(None, "-o", "--out", help="Write the profile JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the profile JSON."),
) -> None:
    """Measure weights, KV bytes, decode step time and memory per (batch, context), prefill time and
    Decoder+Vocos speed on this device, through the engine's own step.

    Example: ttsperf profile --synthetic --quick -o profile.json

    Example: ttsperf profile --synthetic --device cuda --max-batch-search -o profile.json
    """
    from rich.console import Console
    from rich.table import Table

    from ttsperf.cli.synth import load_pipeline
    from ttsperf.profile.measure import profile_model

    if quick:
        batches, contexts, prompts, repeats = "1,4", "64,512", "16,64", min(repeats, 3)
    grid = _ints("--batches", batches), _ints("--contexts", contexts), _ints("--prompts", prompts)
    console = Console(stderr=True)
    if memory_budget is not None and not memory_budget > 0:
        raise UserError(f"--memory-budget {memory_budget:g}: expected a positive number of GiB, e.g. 8")
    if memory_budget is not None and not max_batch_search:
        raise UserError("--memory-budget: applies to --max-batch-search only; add --max-batch-search")
    if max_batch_cap is not None and not max_batch_search:
        raise UserError("--max-batch-cap: applies to --max-batch-search only; add --max-batch-search")
    if optimizations and max_batch_search:
        raise UserError("--max-batch-search: not with --optimizations (run them one at a time)")
    if optimizations:
        name = config or "chattts"
        _optimizations(name, device, max(grid[0]), max(grid[1]), repeats, out, as_json, console)
        return
    pipe = load_pipeline(assets, synthetic, config, device, dtype, seed=0)
    config = pipe.cfg.name
    with console.status("profiling") as status:
        prof = profile_model(
            pipe, batches=grid[0], contexts=grid[1], prompts=grid[2], repeats=repeats,
            warmup=1 if quick else 3, progress=lambda msg: status.update(f"profiling: {msg}"),
        )  # fmt: skip
        if max_batch_search:
            from ttsperf.profile.maxbatch import DEFAULT_CAP, search_max_batch

            budget = None if memory_budget is None else memory_budget * 1024**3
            prof.max_batch = search_max_batch(
                pipe, grid[1], budget_bytes=budget, cap=max_batch_cap or DEFAULT_CAP,
                progress=lambda msg: status.update(f"profiling: {msg}"),
            )  # fmt: skip
    data = prof.dump()
    if out is not None:
        write_json(out, data)
    if as_json:
        print_json(data)
        return
    table = Table(title=f"decode step on {prof.device.name} ({config}, {dtype})")
    for col in ("batch", "context", "step ms", "spread ms", "x real time", "memory MB"):
        table.add_column(col, justify="right")
    for step, mem in zip(prof.steps, prof.memory, strict=True):
        xrt = step.batch / step.seconds.value / pipe.cfg.steps_per_second
        table.add_row(
            str(step.batch), str(step.context), f"{1000 * step.seconds.value:.1f}",
            f"{1000 * (step.seconds.spread or 0):.1f}", f"{xrt:.2f}", f"{mem.peak_bytes.value / 1e6:,.0f}",
        )  # fmt: skip
    out_console = Console()
    out_console.print(table)
    pre = ", ".join(f"{p.prompt_tokens} tok {1000 * p.seconds.value:.0f} ms" for p in prof.prefill)
    out_console.print(f"prefill: {pre}")
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
    if out is not None:
        out_console.print(f"wrote {out}")


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
    app.command("profile")(profile)
