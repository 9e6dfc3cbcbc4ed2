"""`ttsperf bench`: a thin shell over ttsperf.bench.api.run_bench."""

from __future__ import annotations

from pathlib import Path

import typer

from ttsperf.bench.settings import BenchSettings
from ttsperf.cli.common import print_json
from ttsperf.cli.options import settings_command

EXAMPLES = """Load-test any TTS HTTP server: latency, time to first audio, real-time factor, throughput,
checked audio, GPU telemetry and an SLO verdict. Every percentile comes with its n and a 95%
distribution-free interval; an SLO percentile passes when the interval's high end meets the limit,
fails when its low end breaks it, and is inconclusive otherwise: then bench sends about as many
more requests as would settle it, at the same load, up to --max-requests (--no-until-decided:
exactly --requests). Exit 0 pass, 1 fail or a point where no request succeeded, 2 bad input,
3 inconclusive, 130 Ctrl-C.

\b
Examples:
  ttsperf bench http://127.0.0.1:8080 --slo e2e_p99=5s
  ttsperf bench http://127.0.0.1:8080 --concurrency 1,4,16 --requests 200 \\
      --slo e2e_p90=5s
  ttsperf bench http://127.0.0.1:8080 --adapter openai --stream --format pcm \\
      --rate 2,4 --duration 60s
  ttsperf bench http://127.0.0.1:8080 --adapter openai --stream \\
      --slo ttfa_p99=300ms,error_rate=1% -o runs/b1
  ttsperf bench http://127.0.0.1:8080 --find-max --slo e2e_p90=2s \\
      --requests 100
  ttsperf bench http://127.0.0.1:8080 --adapter openai --stream --users 8 \\
      --ramp-up 2s --requests 40   # 8 listeners, started over 2 s
  ttsperf bench --settings ttsperf.toml   # the README's file: [bench] urls

\b
Try it without a GPU:
  python -m ttsperf.bench.mock_server --port 8080 --slots 1 --service-time 0.2"""


def register(app: typer.Typer) -> None:
    @settings_command(app, "bench", BenchSettings, help=EXAMPLES)
    def bench(
        cfg: BenchSettings,
        sources: dict[str, str],
        out: Path = typer.Option(None, "-o", "--out", help="write run.json, requests.csv and charts here"),
        as_json: bool = typer.Option(False, "--json", help="print the BenchRun JSON (without records)"),
        no_progress: bool = typer.Option(False, "--no-progress", help="no live progress bar"),
    ) -> None:
        cfg.validate()
        from ttsperf.bench.interrupt import CtrlC

        # One Ctrl-C handler from the first request to the last file written: the first press stops
        # the load and the results are still written; a second ends the process at once.
        with CtrlC(exit_on_second=True) as ctrl_c:
            run = _run_with_progress(cfg, ctrl_c, show=not (no_progress or as_json))
            ctrl_c.hold()
            run.config_sources = sources
            if out is not None:
                from ttsperf.bench.charts import write_charts
                from ttsperf.bench.results import write_outputs

                written = write_outputs(run, out) + write_charts(run, out)
                if not as_json:
                    typer.echo("wrote " + ", ".join(str(p) for p in written))
            if as_json:
                print_json(run.model_dump(mode="json", by_alias=True, exclude={"records", "telemetry"}))
            else:
                from ttsperf.bench.display import render

                render(run)
        if run.interrupted or ctrl_c.pressed:
            raise typer.Exit(130)  # the shell's convention for "stopped by Ctrl-C", after writing results
        from ttsperf.bench.api import dead_points, exit_code

        if dead := dead_points(run):
            typer.echo(
                f"bench: no request succeeded at {dead[0]}"
                + (f" (and {len(dead) - 1} more points)" if len(dead) > 1 else ""),
                err=True,
            )
        raise typer.Exit(exit_code(run))


def _run_with_progress(cfg, ctrl_c, show: bool):
    from ttsperf.bench.api import run_bench

    if not show:
        return run_bench(cfg, ctrl_c=ctrl_c)
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from ttsperf.console import progress

    with progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[errs]}")) as bar:  # fmt: skip
        state: dict = {"task": None, "errs": 0}

        def hook(label: str, total: int, rec) -> None:
            if rec is None:
                state["errs"] = 0
                state["task"] = bar.add_task(label, total=total or None, errs="")
                return
            if rec.error:
                state["errs"] += 1
            bar.update(state["task"], advance=1, errs=f"errors {state['errs']}" if state["errs"] else "")

        return run_bench(cfg, progress=hook, ctrl_c=ctrl_c)
