"""`ttsperf doctor`: a thin shell over ttsperf.doctor.diagnose."""

from __future__ import annotations

from pathlib import Path

import typer

from ttsperf.cli.common import print_json, user_errors
from ttsperf.cli.synth import ASSETS

HELP = """Check this machine and a deployment for the guide's pitfalls and ChatTTS's traps: cudnn.benchmark,
TF32, autograd and autocast on the serving path, NCCL_BUFFSIZE and GPU placement, TensorRT shapes
against a workload, the official package's shared InferCodeParams, prefix re-decoding streams and
batches that wait for their longest row. Each finding: severity, evidence, fix. A check this
machine cannot run (no GPU, no server) says `skipped` and what it needs. Exit 0 no error finding,
1 some error finding, 2 bad input.

\b
Examples:
  ttsperf doctor
  ttsperf doctor --url http://127.0.0.1:8080 --json
  ttsperf doctor --url http://chattts-api:8000 --probe   # does it batch?
  ttsperf doctor --trt-shapes "$(cat shapes.txt)"   # trtexec's three flags
  ttsperf doctor --profile profile.json --texts my_texts.txt"""

_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan", "ok": "green", "skipped": "dim"}


def register(app: typer.Typer) -> None:
    @app.command("doctor", help=HELP)
    @user_errors
    def doctor(
        urls: list[str] = typer.Option(None, "--url", help="A running server: its /healthz (repeatable)."),
        profiles: list[Path] = typer.Option(None, "--profile", help="A profile.json: its runtime switches."),
        trt_shapes: str = typer.Option(
            None, "--trt-shapes", help="trtexec's --minShapes=.. --optShapes=.. --maxShapes=.. in one string."
        ),
        texts: str = typer.Option(None, "--texts", help="Workload: .txt one per line or .jsonl with 'text'."),
        text_set: str = typer.Option(
            None, "--text-set", help="Built-in workload (default: mixed, every text)."
        ),
        max_batch: int = typer.Option(
            None,
            "--max-batch",
            min=1,
            help="Batch the engine must take (default: the --url server's max_batch, else 8).",
        ),
        assets: Path | None = ASSETS,
        config: str = typer.Option(
            None,
            "--config",
            help="chattts or tiny: the model the TensorRT shapes are for "
            "(default: the --url server's, else chattts).",
        ),
        probe: bool = typer.Option(
            False,
            "--probe",
            help="Send requests (POST /invoke) to a --url whose /healthz cannot say if it batches.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        from ttsperf.doctor import diagnose

        report = diagnose(
            urls=urls or None,
            profiles=profiles or None,
            trt_shapes=trt_shapes,
            texts=texts,
            text_set=text_set,
            assets=str(assets) if assets else None,
            config=config,
            max_batch=max_batch,
            probe=probe,
        )
        if as_json:
            print_json(report)
        else:
            _print(report)
        raise typer.Exit(report["exit_code"])


def _print(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="ttsperf doctor", show_lines=True)
    table.add_column("severity")
    table.add_column("check / subject", overflow="fold")
    table.add_column("evidence / fix", overflow="fold", ratio=1)
    commands = []
    for f in report["findings"]:
        style = _STYLE[f["severity"]]
        detail = f["evidence"]
        if f["fix"].startswith("trtexec "):
            commands.append(f["fix"])
            detail += "\n[bold]fix:[/] the trtexec command below"
        elif f["fix"]:
            detail += f"\n[bold]fix:[/] {f['fix']}"
        if f["needs"]:
            detail += f"\n[bold]needs:[/] {f['needs']}"
        table.add_row(f"[{style}]{f['severity']}[/]", f"{f['id']}\n[dim]{f['subject']}[/]", detail)
    console.print(table)
    for command in commands:
        console.print(command, soft_wrap=True, markup=False, highlight=False)
    s = report["summary"]
    console.print(", ".join(f"{n} {k}" for k, n in s.items()) + f" -> exit {report['exit_code']}")
