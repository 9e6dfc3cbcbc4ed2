"""`ttsperf export onnx`: a thin shell over ttsperf.export.onnx.export_step."""

from __future__ import annotations

from pathlib import Path

import typer

from ttsperf.cli.common import out_path, print_json, user_errors
from ttsperf.cli.synth import ASSETS, SYNTHETIC

export_app = typer.Typer(
    help=(
        "Export parts of the model for other runtimes.\n\n"
        "Example: ttsperf export onnx --config tiny --synthetic -o gpt_step.onnx"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)

ONNX_HELP = """Write the GPT decode step (codes, positions, KV slots -> code logits, hidden state, KV slots)
as ONNX with dynamic batch and context axes, check it with onnxruntime on CPU against the engine's
own step at two batch sizes and context lengths, and print the trtexec command with min/opt/max
shapes from the workload's token lengths and the precision flag of --dtype. Exit 1 if the check
fails. Needs the export extra: pip install 'ttsperf[export]'.

\b
Examples:
  ttsperf export onnx --config tiny --synthetic -o gpt_step.onnx
  ttsperf export onnx --assets ./asset --texts my_texts.txt --max-batch 16 \\
      --dtype bf16 -o gpt_step.onnx"""


@export_app.command("onnx", help=ONNX_HELP)
@user_errors
def onnx(
    out: Path = typer.Option(Path("gpt_step.onnx"), "-o", "--out", help="Where to write the ONNX file."),
    assets: Path | None = ASSETS,
    synthetic: bool = SYNTHETIC,
    config: str | None = typer.Option(
        None, "--config", help="chattts (real sizes) or tiny; default: the --assets dir's own, else chattts."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic weights."),
    texts: str = typer.Option(None, "--texts", help="Workload for the shapes: .txt or .jsonl."),
    text_set: str = typer.Option(None, "--text-set", help="Built-in workload (default: mixed)."),
    max_batch: int = typer.Option(8, "--max-batch", min=1, help="Largest batch the engine must take."),
    dtype: str = typer.Option(
        "fp16", "--dtype", help="What the TensorRT engine runs in: fp16 (--fp16), bf16 (--bf16) or fp32."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    from rich.console import Console

    from ttsperf.errors import UserError
    from ttsperf.export.onnx import export_step, require_onnx
    from ttsperf.export.shapes import PRECISION_FLAGS, load_requests
    from ttsperf.model.spec import model_config

    out_path(out)  # before any work: a path through a file is one line, not a FileExistsError
    cfg = model_config(assets, synthetic, config)  # an asset dir's own config unless --config says
    require_onnx()  # before any work: a missing extra is one line, not a traceback minutes later
    if dtype not in PRECISION_FLAGS:
        raise UserError(f"--dtype {dtype!r}: expected one of {', '.join(PRECISION_FLAGS)}")
    _, requests = load_requests(texts, text_set, cfg.gpt, str(assets) if assets else None)
    console = Console(stderr=True)
    with console.status("exporting") as status:
        result = export_step(
            out, config=cfg.name, assets=assets, seed=seed, requests=requests, max_batch=max_batch,
            dtype=dtype,
            on_stage=lambda name: status.update(name),
        )  # fmt: skip
    if as_json:
        print_json(result)
    else:
        _print(result)
    raise typer.Exit(0 if result["ok"] else 1)


def _print(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"wrote {r['path']} ({r['bytes'] / 1e6:.1f} MB, {r['config']}, {r['weights']}) "
        f"in {r['export_seconds']} s"
    )
    io = Table(title="graph")
    for col in ("", "name", "shape"):
        io.add_column(col)
    for kind in ("inputs", "outputs"):
        for name, dims in r[kind].items():
            io.add_row(kind[:-1], name, " x ".join(map(str, dims)))
    console.print(io)
    checks = Table(
        title=f"onnxruntime (CPU) vs the engine's step; allowed: {r['max_rel_error_allowed']:g} relative"
    )
    for col in ("batch", "context", "output", "max abs error", "max rel error", "verdict"):
        checks.add_column(col, justify="left" if col == "output" else "right")
    for c in r["checks"]:
        for name, e in c["errors"].items():
            verdict = "ok" if e["max_rel"] <= r["max_rel_error_allowed"] else "FAIL"
            checks.add_row(
                str(c["batch"]),
                str(c["context"]),
                name,
                f"{e['max_abs']:.1e}",
                f"{e['max_rel']:.1e}",
                verdict,
            )
    console.print(checks)
    if "trtexec" in r:
        console.print("TensorRT engine with shapes from the workload:")
        console.print(r["trtexec"], soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
