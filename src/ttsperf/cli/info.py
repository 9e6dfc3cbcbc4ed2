"""`ttsperf info`: parameter counts, weight and KV-cache bytes, audio rates."""

from __future__ import annotations

import typer

from ttsperf.cli.common import print_json, user_errors


@user_errors
def info(
    config: str = typer.Option("chattts", "--config", help="Model config: chattts (real sizes) or tiny."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Parameter counts per component, bytes per dtype, KV-cache bytes per token, steps per second.

    Example: ttsperf info --config chattts --json
    """
    from rich.console import Console
    from rich.table import Table

    from ttsperf.model.config import get_config
    from ttsperf.model.info import model_info

    data = model_info(get_config(config))
    if as_json:
        print_json(data)
        return
    console = Console()
    table = Table(title=f"ChatTTS components ({config})")
    for col in ("component", "parameters", "fp32 MB", "fp16/bf16 MB"):
        table.add_column(col, justify="right" if col != "component" else "left")
    for name, n in data["parameters"].items():
        table.add_row(name, f"{n:,}", f"{n * 4 / 1e6:,.1f}", f"{n * 2 / 1e6:,.1f}")
    console.print(table)
    kv, kvs = data["kv_bytes_per_token"], data["kv_bytes_per_audio_second"]
    console.print(
        f"KV cache per token per sequence: {kv['fp32']:,} B fp32, {kv['fp16']:,} B fp16 "
        f"({kvs['fp32'] / 1e6:.2f} / {kvs['fp16'] / 1e6:.2f} MB per second of audio)"
    )
    console.print(
        f"{data['steps_per_audio_second']} decode steps per second of audio, "
        f"{data['samples_per_step']} samples per step at {data['sample_rate']} Hz; "
        f"max_new_tokens 2048 = {data['audio_seconds_at_max_new_tokens']:.1f} s of audio"
    )


def register(app: typer.Typer) -> None:
    app.command("info")(info)
