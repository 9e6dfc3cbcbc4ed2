"""`ttsperf bench`: a thin shell over ttsperf.bench.api.run_bench."""

from __future__ import annotations

from pathlib import Path

import typer

from ttsperf.cli.common import print_json, user_errors
from ttsperf.errors import UserError

EXAMPLES = """Load-test any TTS HTTP server: latency, time to first audio, real-time factor, throughput,
checked audio, GPU telemetry and an SLO verdict. Every percentile comes with its n and a 95%
distribution-free interval; an SLO percentile passes when the interval's high end meets the limit,
fails when its low end breaks it, and is inconclusive otherwise (the verdict says about how many
requests would settle it). Exit 0 pass, 1 fail or a point where no request succeeded, 2 bad input,
3 inconclusive, 130 Ctrl-C.

\b
Examples:
  ttsperf bench http://127.0.0.1:8080 --concurrency 1,4,16 --requests 400 --slo e2e_p99=5s
  ttsperf bench http://127.0.0.1:8080 --concurrency 1,4,16 --requests 200 --slo e2e_p90=5s
  ttsperf bench http://127.0.0.1:8080 --adapter openai --stream --format pcm --rate 2,4 --duration 60
  ttsperf bench http://127.0.0.1:8080 --slo ttfa_p99=300ms,rtf_p95=1,error_rate=1% -o runs/bench1
  ttsperf bench http://127.0.0.1:8080 --find-max --slo e2e_p90=2s --requests 100
  ttsperf bench --config bench.toml          # settings: defaults < file < TTSPERF_BENCH_* < flags

\b
Try it without a GPU:
  python -m ttsperf.bench.mock_server --port 8080 --slots 1 --service-time 0.2"""


def _ints(flag: str, s: str | None) -> list[int]:
    if not s:
        return []
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{flag} {s!r}: expected integers separated by commas, e.g. 1,4,16") from None


def _floats(flag: str, s: str | None) -> list[float]:
    if not s:
        return []
    try:
        return [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{flag} {s!r}: expected numbers separated by commas, e.g. 2,4,8") from None


def register(app: typer.Typer) -> None:
    @app.command("bench", help=EXAMPLES)
    @user_errors
    def bench(
        ctx: typer.Context,
        urls: list[str] = typer.Argument(None, help="server URL(s); several share the load round-robin"),
        adapter: str = typer.Option("invoke", help="invoke | openai | chattts-api | forge | template"),
        concurrency: str = typer.Option(None, help="closed loop: N in flight; a list sweeps, e.g. 1,4,16"),
        rate: str = typer.Option(None, help="open loop: requests/s; a list sweeps, e.g. 2,4,8"),
        arrival: str = typer.Option("poisson", help="open-loop arrivals: poisson | constant | gamma[:SHAPE]"),
        max_concurrency: int = typer.Option(None, help="open loop: cap on requests in flight"),
        requests: int = typer.Option(None, help="measured requests per load point (default 100)"),
        duration: float = typer.Option(None, help="seconds per load point instead of --requests"),
        warmup: int = typer.Option(0, help="requests sent first and left out of every statistic"),
        texts: Path = typer.Option(None, help="texts file: .txt one per line, or .jsonl with 'text'"),
        text_set: str = typer.Option(None, help="built-in: guide | zh | en | mixed | zh-short | en-long ..."),
        slo: str = typer.Option(
            None, help="e.g. ttfa_p99=300ms,e2e_p99=5s,rtf_p95=1,error_rate=1%; a plan's slo.spec as is"
        ),
        confidence: float = typer.Option(0.95, help="of each percentile's interval and the SLO verdict"),
        find_max: bool = typer.Option(False, "--find-max", help="search the most load meeting --slo"),
        timeout: float = typer.Option(60.0, help="seconds before a request counts as a timeout"),
        seed: int = typer.Option(0, help="seed of the arrival schedule"),
        fmt: str = typer.Option("wav", "--format", help="openai: wav | pcm | mp3 | opus | flac"),
        stream: bool = typer.Option(False, "--stream", help="openai: ask the server to stream"),
        voice: str = typer.Option("default", help="openai: voice"),
        model: str = typer.Option("chattts", help="openai: model"),
        pcm_rate: int = typer.Option(24_000, help="sample rate of raw PCM responses"),
        template_body: str = typer.Option(None, help="template: JSON body with a {text} placeholder"),
        template_kind: str = typer.Option("wav", help="template: response kind wav | pcm | mp3 | zip-mp3"),
        header: list[str] = typer.Option(None, "--header", "-H", help="extra request header 'Name: value'"),
        no_audio_check: bool = typer.Option(False, "--no-audio-check", help="skip checking audio bodies"),
        server_pid: int = typer.Option(None, help="sample CPU and memory of this local server process"),
        metrics_url: str = typer.Option(None, help="Prometheus endpoint to scrape (DCGM exporter, /metrics)"),
        no_gpu: bool = typer.Option(False, "--no-gpu", help="do not sample local GPUs through NVML"),
        out: Path = typer.Option(None, "-o", "--out", help="write run.json, requests.csv and charts here"),
        as_json: bool = typer.Option(False, "--json", help="print the BenchRun JSON (without records)"),
        no_progress: bool = typer.Option(False, "--no-progress", help="no live progress bar"),
        config: Path = typer.Option(
            None, "--config", help="settings file (.toml/.json); env TTSPERF_BENCH_*"
        ),
    ) -> None:
        import os

        from ttsperf.bench.config import resolve

        given = {  # CLI parameter -> (BenchConfig field, value as the field wants it)
            "urls": ("urls", list(urls or [])),
            "adapter": ("adapter", adapter),
            "concurrency": ("concurrency", _ints("--concurrency", concurrency)),
            "rate": ("rate", _floats("--rate", rate)),
            "arrival": ("arrival", arrival),
            "max_concurrency": ("max_concurrency", max_concurrency),
            "requests": ("requests", requests),
            "duration": ("duration", duration),
            "warmup": ("warmup", warmup),
            "texts": ("texts", str(texts) if texts else None),
            "text_set": ("text_set", text_set),
            "slo": ("slo", slo),
            "confidence": ("confidence", confidence),
            "find_max": ("find_max", find_max),
            "timeout": ("timeout", timeout),
            "seed": ("seed", seed),
            "fmt": ("response_format", fmt),
            "stream": ("stream", stream),
            "voice": ("voice", voice),
            "model": ("model", model),
            "pcm_rate": ("pcm_rate", pcm_rate),
            "template_body": ("template_body", template_body),
            "template_kind": ("template_kind", template_kind),
            "header": ("headers", list(header or [])),
            "no_audio_check": ("check_audio", not no_audio_check),
            "server_pid": ("server_pid", server_pid),
            "metrics_url": ("metrics_url", metrics_url),
            "no_gpu": ("gpu", not no_gpu),
        }
        flags = {
            field: value
            for param, (field, value) in given.items()
            # compared by name: typer may ship its own copy of click's ParameterSource enum
            if getattr(ctx.get_parameter_source(param), "name", "") == "COMMANDLINE"
        }
        if urls:  # a variadic argument reports its source as DEFAULT even when given
            flags["urls"] = list(urls)
        cfg, sources = resolve(flags, config, os.environ)
        cfg.validate()
        run = _run_with_progress(cfg, show=not (no_progress or as_json))
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
        if run.interrupted:
            raise typer.Exit(130)  # the shell's convention for "stopped by Ctrl-C", after writing results
        from ttsperf.bench.api import dead_points, exit_code

        if dead := dead_points(run):
            typer.echo(
                f"bench: no request succeeded at {dead[0]}"
                + (f" (and {len(dead) - 1} more points)" if len(dead) > 1 else ""),
                err=True,
            )
        raise typer.Exit(exit_code(run))


def _run_with_progress(cfg, show: bool):
    from ttsperf.bench.api import run_bench

    if not show:
        return run_bench(cfg)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[errs]}"), transient=False) as bar:  # fmt: skip
        state: dict = {"task": None, "errs": 0}

        def hook(label: str, total: int, rec) -> None:
            if rec is None:
                state["errs"] = 0
                state["task"] = bar.add_task(label, total=total or None, errs="")
                return
            if rec.error:
                state["errs"] += 1
            bar.update(state["task"], advance=1, errs=f"errors {state['errs']}" if state["errs"] else "")

        return run_bench(cfg, progress=hook)
