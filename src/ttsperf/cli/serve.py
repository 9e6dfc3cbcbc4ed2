"""`ttsperf serve`: the model behind the continuous-batching engine behind HTTP (server/)."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import typer

from ttsperf.cli.common import ASSETS, DEVICE, DTYPE, MODEL_CONFIG, SYNTHETIC, user_errors

log = logging.getLogger("ttsperf.server")


def parse_max_batch(value: str) -> int | None:
    from ttsperf.errors import UserError

    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise UserError(f"--max-batch {value!r}: expected a positive integer or auto")
    return int(value)


def _switch_line(report: dict) -> str:
    """One log line: each switch, whether it applied here, and why not where it says."""
    parts = []
    for name, s in report.items():
        why = f": {s['note']}" if s["note"] not in ("", "off") else ""
        parts.append(f"{name}={s['value']} [{'on' if s['applied'] else 'off'}{why}]")
    return "; ".join(parts)


@user_errors
def serve(
    assets: Path | None = ASSETS,
    synthetic: bool = SYNTHETIC,
    config: str | None = MODEL_CONFIG,
    device: str = DEVICE,
    dtype: str = DTYPE,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; 0.0.0.0 exposes the server."),
    port: int = typer.Option(8080, "--port", help="TCP port; 0 picks a free one (the log says which)."),
    max_batch: str = typer.Option(
        "auto", "--max-batch", help="Rows decoded together: N, or auto (from free memory)."
    ),
    max_queue: int = typer.Option(64, "--max-queue", help="Requests waiting beyond the batch; more get 503."),
    request_timeout: float = typer.Option(
        300.0, "--request-timeout", help="Seconds from arrival to last audio; then 504."
    ),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="TTSPERF_API_KEY",
        help="Require 'Authorization: Bearer KEY' on /invoke and /v1/*.",
    ),
    max_new_tokens: int = typer.Option(
        2048, "--max-new-tokens", help="Decode steps per request at most (2048 = 43.7 s)."
    ),
    first_chunk_steps: int = typer.Option(
        24, "--first-chunk-steps", help="Steps before the first streamed chunk (24 = 0.51 s)."
    ),
    drain_timeout: float = typer.Option(
        60.0, "--drain-timeout", help="On SIGTERM, seconds to finish accepted requests."
    ),
    max_body_bytes: int = typer.Option(64 * 1024, "--max-body-bytes", help="Larger request bodies get 413."),
    read_timeout: float = typer.Option(
        10.0, "--read-timeout", help="Seconds a client may take to send headers, and again the body (408)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic weights."),
    autocast: bool = typer.Option(False, "--autocast", help="fp32 weights, fp16/bf16 matmuls."),
    tf32: bool = typer.Option(True, "--tf32/--no-tf32", help="TF32 matmuls (CUDA, Ampere+)."),
    cudnn_benchmark: bool = typer.Option(
        True, "--cudnn-benchmark/--no-cudnn-benchmark", help="cuDNN autotuning (CUDA)."
    ),
    inference_mode: bool = typer.Option(
        True, "--inference-mode/--no-grad", help="torch.inference_mode or no_grad."
    ),
    torch_compile: bool = typer.Option(
        False, "--compile", help="torch.compile the decode step, at start (chattts: ~1 min on 2 CPU cores)."
    ),
    cuda_graphs: bool = typer.Option(
        False, "--cuda-graphs", help="CUDA graphs of the decode step per batch/context bucket (CUDA)."
    ),
    int8: bool = typer.Option(
        False, "--int8", help="int8 weight-only quantisation of the GPT's linear layers."
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
    ray: bool = typer.Option(False, "--ray", help="Serve as a Ray Serve deployment, one engine per replica."),
    replicas: int = typer.Option(None, "--replicas", help="--ray: replicas (default 1)."),
    autoscale: str = typer.Option(
        None, "--autoscale", help="--ray: MIN:MAX replicas, scaled on ongoing requests."
    ),
    gpus_per_replica: float = typer.Option(
        None, "--gpus-per-replica", help="--ray: GPUs each replica reserves (default: 1 on cuda, 0 on cpu)."
    ),
    max_queued: int = typer.Option(
        64, "--max-queued", help="--ray: requests waiting for a replica; more get 503 + Retry-After."
    ),
    address: str = typer.Option(
        None, "--address", help="--ray: join this cluster ('auto': the one `ray start` made here)."
    ),
) -> None:
    """Serve ChatTTS over HTTP: POST /invoke, POST /v1/audio/speech (OpenAI), GET /v1/models,
    /healthz, /readyz, /metrics. Requests are batched continuously; SIGTERM drains.

    Example: ttsperf serve --synthetic --config tiny --port 8080 --max-batch 8

    then: curl -s localhost:8080/invoke -d '{"text": "你好，世界。"}' -o out.wav

    On Ray Serve (pip install 'ttsperf[ray]'), the same API over 2 replicas; answers carry X-Replica:

    Example: ttsperf serve --ray --replicas 2 --synthetic --config tiny --max-batch 8
    """
    from ttsperf.cli.synth import load_pipeline, model_config
    from ttsperf.engine.engine import Engine, EngineConfig
    from ttsperf.engine.switches import Switches
    from ttsperf.errors import UserError
    from ttsperf.server.app import create_app
    from ttsperf.server.run import check_port, make_server

    levels = ("debug", "info", "warning", "error")
    if log_level not in levels:
        raise UserError(f"--log-level {log_level!r}: expected one of {', '.join(levels)}")
    if not 0 <= port <= 65535:
        raise UserError(f"--port {port}: expected 0 to 65535")
    timeouts = (
        ("--request-timeout", request_timeout),
        ("--drain-timeout", drain_timeout),
        ("--read-timeout", read_timeout),
    )
    for name, value in timeouts:
        if not value > 0:
            raise UserError(f"{name} {value}: expected a positive number of seconds")
    if max_body_bytes < 1024:
        raise UserError(f"--max-body-bytes {max_body_bytes}: expected at least 1024")
    if api_key is not None and not api_key.strip():
        raise UserError("--api-key is empty: expected a secret, or leave the option out")
    ray_options = dict(
        replicas=replicas, autoscale=autoscale, gpus_per_replica=gpus_per_replica, address=address
    )
    if not ray and (given := [k for k, v in ray_options.items() if v is not None]):
        raise UserError(f"--{given[0].replace('_', '-')} needs --ray")
    check_port(host, port)  # before minutes of model loading, not after
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    switches = Switches(
        dtype=dtype, autocast=autocast, tf32=tf32, cudnn_benchmark=cudnn_benchmark,
        inference_mode=inference_mode, compile=torch_compile, cuda_graphs=cuda_graphs, int8=int8,
    ).validate()  # fmt: skip
    engine_config = EngineConfig(
        max_batch=parse_max_batch(max_batch), max_queue=max_queue, max_new_tokens=max_new_tokens,
        first_chunk_steps=first_chunk_steps, request_timeout=request_timeout,
    ).validate()  # fmt: skip
    config = model_config(assets, synthetic, config).name  # bad flags fail here, not after loading
    if ray:
        from ttsperf.server.ray_deployment import ReplicaSpec

        load = functools.partial(load_pipeline, assets, synthetic, config, device, dtype, seed)
        spec = ReplicaSpec(load, engine_config, switches, api_key, max_body_bytes, read_timeout)
        _serve_on_ray(spec, device, host, port, drain_timeout, max_queued, log_level, **ray_options)
        return
    log.info("loading %s (%s) on %s, %s", config, "synthetic weights" if synthetic else assets, device, dtype)
    pipe = load_pipeline(assets, synthetic, config, device, dtype, seed)
    engine = Engine(pipe, engine_config, switches)
    if engine.decode_step.compiled:
        log.info("compiling the decode step (batch 1 and batch >= 2) before serving")
    engine.start()
    log.info("switches: %s", _switch_line(engine.switch_report))
    log.info(
        "engine: max batch %d%s, queue %d, request timeout %.0f s, first chunk after %d steps",
        engine.max_batch, " (auto)" if engine_config.max_batch is None else "", max_queue, request_timeout,
        first_chunk_steps,
    )  # fmt: skip
    app = create_app(engine, api_key, max_body_bytes=max_body_bytes, read_timeout=read_timeout)
    server = make_server(
        app, host, port, drain_timeout=drain_timeout, log_level=log_level, read_timeout=read_timeout
    )
    try:
        server.run()
    finally:
        engine.stop(drain=False, timeout=5)  # a no-op after a drain; else answers the rest 'shutdown'
    if not server.started:
        raise typer.Exit(1)  # uvicorn already said why (e.g. the port is taken)


def _serve_on_ray(
    spec, device: str, host: str, port: int, drain_timeout: float, max_queued: int, log_level: str,
    *, replicas: int | None, autoscale: str | None, gpus_per_replica: float | None, address: str | None,
) -> None:  # fmt: skip
    """`serve --ray`: the same app and engine settings, deployed on Ray Serve (server/ray_deployment.py)."""
    import importlib.util

    from ttsperf.errors import UserError
    from ttsperf.server import ray_deployment as rd

    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.serve") is None:
        raise UserError(rd.INSTALL_HINT)
    if replicas is not None and autoscale is not None:
        raise UserError("--replicas and --autoscale: give one (a fixed count, or MIN:MAX to autoscale)")
    if replicas is not None and replicas < 1:
        raise UserError(f"--replicas {replicas}: expected at least 1")
    if gpus_per_replica is None:
        gpus_per_replica = 1.0 if device.startswith("cuda") else 0.0
    if gpus_per_replica < 0 or (device.startswith("cuda") and gpus_per_replica == 0):
        expected = f"> 0 with --device {device}" if device.startswith("cuda") else ">= 0"
        raise UserError(f"--gpus-per-replica {gpus_per_replica:g}: expected {expected}")
    if max_queued < 1:
        raise UserError(f"--max-queued {max_queued}: expected at least 1")
    if port == 0:
        raise UserError("--port 0: --ray needs a fixed port (Ray's proxy listens on it on every node)")
    settings = rd.RaySettings(
        replicas=replicas or 1,
        autoscale=rd.parse_autoscale(autoscale) if autoscale is not None else None,
        gpus_per_replica=gpus_per_replica,
        max_queued=max_queued,
        retry_after=spec.engine.retry_after,
        drain_timeout=drain_timeout,
    )
    rd.serve_forever(spec, settings, address=address, host=host, port=port, log_level=log_level)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
