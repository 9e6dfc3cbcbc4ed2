"""`ttsperf serve`: the model behind the continuous-batching engine behind HTTP (server/)."""

from __future__ import annotations

import logging
import time

import typer

from ttsperf.cli.options import settings_command
from ttsperf.server.settings import ServeSettings

log = logging.getLogger("ttsperf.server")


def _switch_line(report: dict) -> str:
    """One log line: each switch, whether it applied here, and why not where it says."""
    parts = []
    for name, s in report.items():
        why = f": {s['note']}" if s["note"] not in ("", "off") else ""
        parts.append(f"{name}={s['value']} [{'on' if s['applied'] else 'off'}{why}]")
    return "; ".join(parts)


def _warm_line(info: dict) -> str:
    """What the engine built before /readyz, and the buckets it holds (the whole list: /healthz)."""
    warmed, step = info["warmed"], info["decode_step"]
    if not warmed.get("decode_graphs"):
        step_graphs, prefill_graphs = step["compiled_graphs"], info["prefill_compiled_graphs"]
        if not step_graphs + prefill_graphs:
            return "nothing to capture (eager)"
        return f"{step_graphs} compiled decode graphs and {prefill_graphs} compiled prefill graphs"
    keys = step["cuda_graphs"]
    batches, contexts, tops = (sorted({k[i] for k in keys}) for i in range(3))
    rows, prompts = (sorted({k[i] for k in info["prefill_graphs"]}) for i in range(2))
    return (
        f"{warmed['decode_graphs']} decode graphs (batch {batches}, context {contexts}, candidates "
        f"{tops}), {warmed['prefill_graphs']} prefill graphs (rows {rows}, prompt {prompts}; "
        f"{warmed['first_code_graphs']} of their first codes) and "
        f"{warmed['audio_graphs']} audio graphs in {warmed['seconds']:.1f} s"
        + (f"; {warmed['stopped']}" if "stopped" in warmed else "")
    )


def serve(settings: ServeSettings, sources: dict[str, str]) -> None:
    """Serve ChatTTS over HTTP: POST /invoke, POST /v1/audio/speech (OpenAI), GET /v1/models,
    /healthz, /readyz, /metrics. Requests are batched continuously; SIGTERM drains.

    Example: ttsperf serve --synthetic --config tiny --port 8080 --max-batch 8

    then: curl -s localhost:8080/invoke -d '{"text": "你好，世界。"}' -o out.wav

    On Ray Serve (pip install 'ttsperf[ray]'), the same API over 2 replicas; answers carry X-Replica:

    \b
    Example: ttsperf serve --ray --replicas 2 --synthetic --config tiny \\
        --max-batch 8
    """
    import os

    from ttsperf.engine import gc_pauses
    from ttsperf.engine.pool import EnginePool
    from ttsperf.engine.wire import CoreSpec
    from ttsperf.errors import UserError
    from ttsperf.model.spec import ModelSpec
    from ttsperf.server.app import create_app
    from ttsperf.server.run import check_port, make_server

    s = settings.check()
    if "TTSPERF_API_KEY" in os.environ and s.key() is None:  # renamed: ignored, it would serve unguarded
        raise UserError("TTSPERF_API_KEY: renamed TTSPERF_SERVE_API_KEY (serve reads TTSPERF_SERVE_*)")
    switches, engine_config = s.switches(), s.engine_config()
    model = ModelSpec(s.assets, s.synthetic, s.config, s.device, s.dtype, s.seed)
    config = model.check()  # bad flags fail here, not after loading
    check_port(s.host, s.port)  # before minutes of model loading, not after
    logging.basicConfig(level=s.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    given = ", ".join(f"{name} ({src})" for name, src in sources.items() if src in ("file", "env"))
    if given:
        log.info("settings from a file or the environment: %s", given)
    if s.ray:
        from ttsperf.server.ray_deployment import ReplicaSpec

        spec = ReplicaSpec(model, engine_config, switches, s.key(), s.max_body_bytes, s.read_timeout)
        _serve_on_ray(spec, s)
        return
    log.info(
        "loading %s (%s) on %s, %s",
        config,
        "synthetic weights" if s.synthetic else s.assets,
        s.device,
        s.dtype,
    )
    started = time.monotonic()
    # the model lives in the engines' own processes; this one (HTTP) never imports torch
    spec = CoreSpec(model, engine_config, switches, log_level=s.log_level, threads=s.threads)
    engine = EnginePool(spec, s.engines).start()
    info = engine.info
    pids = ", ".join(str(pid) for pid in engine.pids)
    what = f"engine process {pids}" if s.engines == 1 else f"{s.engines} engine processes ({pids})"
    log.info("%s ready (loaded and warm) in %.1f s", what, time.monotonic() - started)
    log.info("switches: %s", _switch_line(info["switches"]))
    log.info("warm before ready: %s", _warm_line(info))
    log.info(
        "%s: max batch %d%s, queue %d, torch threads %d, request timeout %.0f s, first chunk after %d steps",
        "engine" if s.engines == 1 else f"each of {s.engines} engines",
        info["max_batch"], " (auto)" if engine_config.max_batch is None else "", info["max_queue"],
        info["threads"],
        s.request_timeout, s.first_chunk_steps,
    )  # fmt: skip
    app = create_app(engine, s.key(), max_body_bytes=s.max_body_bytes, read_timeout=s.read_timeout)
    server = make_server(
        app, s.host, s.port, drain_timeout=s.drain_timeout, log_level=s.log_level, read_timeout=s.read_timeout
    )
    # as each engine did once warm: what the start-up built, no collection walks again
    log.info("front: %d start-up objects frozen (no collection walks them)", gc_pauses.freeze_startup_heap())
    gc_pauses.this_process()  # the front's pauses, for /metrics, from here
    try:
        server.run()
    finally:
        engine.stop(drain=False, timeout=5)  # a no-op after a drain; else answers the rest 'shutdown'
    if not server.started or server.failed:
        raise typer.Exit(1)  # uvicorn already said why (e.g. the port is taken), or the engine died


def _serve_on_ray(spec, s: ServeSettings) -> None:
    """`serve --ray`: the same app and engine settings, deployed on Ray Serve (server/ray_deployment.py)."""
    import importlib.util

    from ttsperf.errors import UserError
    from ttsperf.server import ray_deployment as rd

    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.serve") is None:
        raise UserError(rd.INSTALL_HINT)
    if s.replicas is not None and s.autoscale is not None:
        raise UserError("--replicas and --autoscale: give one (a fixed count, or MIN:MAX to autoscale)")
    if s.replicas is not None and s.replicas < 1:
        raise UserError(f"--replicas {s.replicas}: expected at least 1")
    cuda = s.device.startswith("cuda")
    gpus_per_replica = s.gpus_per_replica if s.gpus_per_replica is not None else 1.0 if cuda else 0.0
    if gpus_per_replica < 0 or (cuda and gpus_per_replica == 0):
        expected = f"> 0 with --device {s.device}" if cuda else ">= 0"
        raise UserError(f"--gpus-per-replica {gpus_per_replica:g}: expected {expected}")
    if s.max_queued < 1:
        raise UserError(f"--max-queued {s.max_queued}: expected at least 1")
    if s.port == 0:
        raise UserError("--port 0: --ray needs a fixed port (Ray's proxy listens on it on every node)")
    settings = rd.RaySettings(
        replicas=s.replicas or 1,
        autoscale=rd.parse_autoscale(s.autoscale) if s.autoscale is not None else None,
        gpus_per_replica=gpus_per_replica,
        max_queued=s.max_queued,
        retry_after=spec.engine.retry_after,
        drain_timeout=s.drain_timeout,
        start_timeout=s.start_timeout or rd.DEFAULT_START_TIMEOUT,
    )
    if gpus_per_replica > 0 and rd.starts_here(s.address):
        _gpus_here_or_exit(s, settings)
    rd.serve_forever(spec, settings, address=s.address, host=s.host, port=s.port, log_level=s.log_level)


def _gpus_here_or_exit(s: ServeSettings, settings) -> None:
    """Without --address Ray starts here and can place replicas on this machine's GPUs only: too few,
    and Ray would wait for ever, logging every 30 s that it cannot. Say so before starting Ray."""
    from ttsperf.errors import UserError
    from ttsperf.server.ray_deployment import gpus_here

    # autoscaling from 0 still needs room for the first replica a request brings
    replicas, each = max(1, settings.first_replicas), settings.gpus_per_replica
    have = gpus_here()
    if have is None or have >= replicas * each:  # None: Ray's count unknown; the start timeout bounds it
        return
    flag = f"--device {s.device}" if s.device.startswith("cuda") else f"--gpus-per-replica {each:g}"
    need = f"1 replica needs {each:g}" if replicas == 1 else f"{replicas} replicas need {replicas * each:g}"
    raise UserError(
        f"{flag}: {need} GPU, this machine has {have} (without --address, Ray runs here); use --device "
        "cpu, or --address a Ray cluster with GPUs"
    )


def register(app: typer.Typer) -> None:
    settings_command(app, "serve", ServeSettings)(serve)
