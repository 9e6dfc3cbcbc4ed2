"""`ttsperf serve --ray`: the same app (server/app.py) as a Ray Serve deployment, one engine per replica.

    spec = ReplicaSpec(ModelSpec(synthetic=True, config="tiny"), engine=EngineConfig(max_batch=8))
    serve_forever(spec, RaySettings(replicas=2), address=None, host="127.0.0.1", port=8080)

Ray does what one process cannot: placement (a replica per GPU with gpus_per_replica=1, on any
node of the cluster), autoscaling on ongoing requests, and backpressure. Each replica takes at
most its batch's worth of requests at once (Ray's max_ongoing_requests = max batch), so a request
waits in Ray's queue, where the first replica with a free slot takes it, rather than in one
engine's queue behind a busy batch; past `max_queued` waiting, Ray's proxy answers 503 with
Retry-After. Every answer carries `X-Replica` (the replica's id): which replica served it, for
clients and for the tests that prove the spread. `/metrics` answers from the replica the request
reached (each engine counts its own); Ray's own metrics export sums the cluster.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ttsperf.engine.client import EngineClient
from ttsperf.engine.config import AUTO_BATCH_CAP, EngineConfig, Switches
from ttsperf.engine.wire import CoreSpec
from ttsperf.model.spec import ModelSpec
from ttsperf.server.app import DEFAULT_MAX_BODY_BYTES, DEFAULT_READ_TIMEOUT, create_app
from ttsperf.server.run import KEEP_ALIVE_SECONDS

log = logging.getLogger("ttsperf.server")
APP_NAME = "ttsperf"
DEPLOYMENT = "TTS"
INSTALL_HINT = "--ray needs Ray Serve: pip install 'ttsperf[ray]' (or pip install 'ray[serve]')"
# Seconds for every first replica to be placed, load its model and warm up: minutes for the full
# model with --compile on a small CPU, or for an autoscaling cluster to add a GPU node.
DEFAULT_START_TIMEOUT = 600.0
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class ReplicaSpec:
    """What each replica builds, picklable: the model to load (in the replica's engine process, so
    the weights never travel through Ray's object store) and the engine's settings."""

    model: ModelSpec
    engine: EngineConfig = field(default_factory=EngineConfig)
    switches: Switches = field(default_factory=Switches)
    api_key: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    read_timeout: float = DEFAULT_READ_TIMEOUT

    @property
    def max_ongoing(self) -> int:
        return self.engine.max_batch or AUTO_BATCH_CAP


@dataclass(frozen=True)
class RaySettings:
    """How many replicas and where: a fixed count, or autoscaling between MIN and MAX."""

    replicas: int = 1
    autoscale: tuple[int, int] | None = None
    gpus_per_replica: float = 0.0
    # Zero: a replica reserves no CPU, so N replicas fit on any machine (on a CPU-only test box
    # they share its cores; with GPUs, the GPU is what each replica reserves).
    cpus_per_replica: float = 0.0
    max_queued: int = 64
    retry_after: float = 1.0
    drain_timeout: float = 60.0
    start_timeout: float = DEFAULT_START_TIMEOUT

    @property
    def first_replicas(self) -> int:
        """The replicas Ray starts before serving: the fixed count, or the autoscaling minimum."""
        return self.replicas if self.autoscale is None else self.autoscale[0]

    def options(self, spec: ReplicaSpec) -> dict:
        """Ray Serve deployment options."""
        from ray.serve.config import BackpressureConfig

        opts: dict = dict(
            name=DEPLOYMENT,
            max_ongoing_requests=spec.max_ongoing,
            max_queued_requests=self.max_queued,
            backpressure_config=BackpressureConfig(status_code=503, retry_after_s=self.retry_after),
            ray_actor_options={"num_cpus": self.cpus_per_replica, "num_gpus": self.gpus_per_replica},
            graceful_shutdown_timeout_s=self.drain_timeout,
        )
        if self.autoscale is None:
            opts["num_replicas"] = self.replicas
        else:
            lo, hi = self.autoscale
            # scale out once replicas are half full on average: room left for bursts while a new
            # replica loads its model
            target = max(1, spec.max_ongoing // 2)
            opts["autoscaling_config"] = dict(
                min_replicas=lo, max_replicas=hi, initial_replicas=lo, target_ongoing_requests=target
            )
        return opts


def starts_here(address: str | None) -> bool:
    """Whether ray.init(address) starts a cluster on this machine (no address, no RAY_ADDRESS)."""
    import os

    return address is None and not os.environ.get("RAY_ADDRESS")


def gpus_here() -> int | None:
    """The GPUs a Ray cluster started on this machine gets, counted by Ray's own code (NVIDIA, AMD,
    Intel... narrowed by CUDA_VISIBLE_DEVICES and the like), as ray.init will count them; None when
    that code is not where Ray 2.60 has it (private): then the start timeout alone bounds the wait."""
    try:
        from ray._private.accelerators import get_accelerator_manager_for_resource

        manager = get_accelerator_manager_for_resource("GPU")
        count = manager.get_current_node_num_accelerators()
        visible = manager.get_current_process_visible_accelerator_ids()
    except (ImportError, AttributeError):
        return None
    return count if visible is None else min(count, len(visible))


def parse_autoscale(text: str) -> tuple[int, int]:
    """`--autoscale 1:4` -> (1, 4)."""
    from ttsperf.errors import UserError

    lo, sep, hi = text.partition(":")
    if not (sep and lo.strip().isdigit() and hi.strip().isdigit()):
        raise UserError(f"--autoscale {text!r}: expected MIN:MAX replicas, e.g. 1:4")
    a, b = int(lo), int(hi)
    if not 0 <= a <= b or b < 1:
        raise UserError(f"--autoscale {text!r}: expected 0 <= MIN <= MAX and MAX >= 1")
    return a, b


class _ReplicaHeader:
    """Adds `X-Replica: <id>` to every answer (pure ASGI, so streams pass through untouched)."""

    def __init__(self, app: ASGIApp, replica: str):
        self.app, self.value = app, replica.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-replica", self.value)]}
            await send(message)

        await self.app(scope, receive, tagged)


class TTSReplica:
    """One replica: its engine (a core process of its own, as under `ttsperf serve`) and the app
    over it. Made a Ray Serve ingress in `deployment()`; Ray builds the app after __init__ through
    __serve_build_asgi_app__."""

    def __init__(self, spec: ReplicaSpec):
        from ray import serve

        self.spec = spec
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.engine = EngineClient(CoreSpec(spec.model, spec.engine, spec.switches)).start()
        log.info("replica %s: engine ready, max batch %d", self.replica, self.engine.info["max_batch"])

    def __serve_build_asgi_app__(self) -> ASGIApp:
        app = create_app(
            self.engine,
            self.spec.api_key,
            max_body_bytes=self.spec.max_body_bytes,
            read_timeout=self.spec.read_timeout,
        )
        app.add_middleware(_ReplicaHeader, replica=self.replica)
        return app

    def __del__(self) -> None:
        # Ray has waited for this replica's requests to finish (graceful shutdown) before this
        if getattr(self, "engine", None) is not None:
            self.engine.stop(drain=False, timeout=5)


def deployment(spec: ReplicaSpec, settings: RaySettings):
    """The Ray Serve application: TTSReplica as an ingress deployment, bound to `spec`."""
    from ray import serve

    ingress = serve.ingress()(TTSReplica)
    return serve.deployment(ingress, **settings.options(spec)).bind(spec)


def start(
    spec: ReplicaSpec,
    settings: RaySettings,
    *,
    address: str | None,
    host: str,
    port: int,
    log_level: str = "info",
) -> str:
    """Join `address` (None: start a local cluster), deploy, wait for every replica (at most
    settings.start_timeout); the URL. UserError when no cluster answers at `address`, or the
    replicas do not run in time (Serve is stopped first: nothing stays pending on the cluster)."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        _join(address, log_level)
    # the same idle keep-alive as `ttsperf serve` (uvicorn's 5 s races clients reusing connections)
    serve.start(http_options={"host": host, "port": port, "keep_alive_timeout_s": KEEP_ALIVE_SECONDS})
    # Not serve.run: it waits for the replicas without end, and a replica the cluster cannot place
    # (a GPU it does not have) leaves it waiting for ever while Ray logs a warning every 30 s.
    target = serve.RunTarget(deployment(spec, settings), name=APP_NAME, route_prefix="/")
    try:
        serve.run_many([target], wait_for_applications_running=False)
        _wait_running(settings)
    except BaseException:
        serve.delete(APP_NAME, _blocking=False)  # no replica left pending, asking for what is not there
        if not starts_here(address):  # a cluster we joined runs on: take Serve off it (30 s at most)
            serve.shutdown()
        ray.shutdown()  # a cluster started here ends with it, Serve and all, at once
        raise
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _join(address: str | None, log_level: str) -> None:
    """ray.init; a ConnectionError (`auto`, or an address where no cluster answers) is the user's
    one line, not Ray's 120-line traceback."""
    import ray

    from ttsperf.errors import UserError

    _answers(address)
    try:
        ray.init(address=address, include_dashboard=False, logging_level=log_level.upper())
    except ConnectionError as exc:
        found = str(exc).split(". ")[0].splitlines()[0].rstrip(".")  # Ray's first sentence
        raise UserError(
            f"--address {address}: no Ray cluster answers ({found}); start one (ray start --head), "
            "or leave --address out to start Ray here"
        ) from None


def _answers(address: str | None) -> None:
    """A HOST:PORT where nothing listens is one line now: ray.init would retry it for minutes.
    (None and 'auto' find a cluster here, ray:// is Ray's client; ray.init handles those.)"""
    import socket

    from ttsperf.errors import UserError

    host, sep, port = (address or "").rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__  # a timeout has no strerror
        raise UserError(
            f"--address {address}: no Ray cluster answers there ({why}); expected HOST:PORT "
            "of a Ray head (ray start --head), or auto"
        ) from None


def _wait_running(settings: RaySettings) -> None:
    """Until the app runs. UserError past settings.start_timeout, saying what each replica needs
    and what the cluster has; or the replica's own line when its start failed on a UserError."""
    import time

    from ray import serve
    from ray.serve.schema import ApplicationStatus

    from ttsperf.errors import UserError

    deadline = time.monotonic() + settings.start_timeout
    while time.monotonic() < deadline:
        app = serve.status().applications.get(APP_NAME)
        if app is not None and app.status == ApplicationStatus.RUNNING:
            return
        if app is not None and app.status == ApplicationStatus.DEPLOY_FAILED:
            # the deployment's message holds the replica's traceback: a UserError (bad assets, a
            # device the node lacks) is the user's one line; anything else keeps Ray's whole story
            told = "\n".join([app.message, *(d.message for d in app.deployments.values())])
            said = [line for line in told.splitlines() if "UserError: " in line]
            if said:
                raise UserError(said[-1].split("UserError: ", 1)[1])
            raise RuntimeError(f"Ray could not start the replicas: {told}")
        time.sleep(POLL_SECONDS)
    raise UserError(_not_running(settings))


def _not_running(settings: RaySettings) -> str:
    """The start timeout's line: how many replicas run, what each needs and what the cluster has."""
    import ray
    from ray import serve

    app = serve.status().applications.get(APP_NAME)
    deployment = app.deployments.get(DEPLOYMENT) if app is not None else None
    running = deployment.replica_states.get("RUNNING", 0) if deployment is not None else 0
    need = {"GPU": settings.gpus_per_replica, "CPU": settings.cpus_per_replica}
    have = {k: ray.cluster_resources().get(k, 0.0) for k in need}
    shown = lambda amounts: ", ".join(f"{k} {v:g}" for k, v in amounts.items())  # noqa: E731
    wait = f"{settings.start_timeout:g}s"
    said = f"--start-timeout {wait}: {running} of {settings.first_replicas} replicas running after {wait}; "
    if any(need[k] > have[k] for k in need):  # more than the whole cluster has: no node can hold one
        return (
            f"{said}Ray cannot place one: each needs {shown(need)}, the cluster has {shown(have)}; "
            "use --device cpu, or --address a cluster with GPUs"
        )
    return (
        f"{said}each needs {shown(need)}, the cluster has {shown(have)}; still loading, or waiting for "
        "room: a larger --start-timeout, or fewer replicas"
    )


def serve_forever(spec: ReplicaSpec, settings: RaySettings, **where) -> None:
    """start(spec, settings, **where), then serve until SIGTERM or Ctrl-C; then let Ray drain the
    replicas and stop."""
    import ray
    from ray import serve

    url = start(spec, settings, **where)
    count = f"{settings.autoscale[0]}-{settings.autoscale[1]}" if settings.autoscale else settings.replicas
    log.info(
        "ttsperf on Ray Serve at %s: %s replicas, %d requests each at once, %d queued then 503 "
        "(Retry-After %d s); SIGTERM drains",
        url, count, spec.max_ongoing, settings.max_queued, math.ceil(settings.retry_after),
    )  # fmt: skip
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    log.info("draining: the replicas finish their requests (up to %.0f s)", settings.drain_timeout)
    serve.delete(APP_NAME)  # graceful: replicas answer what they hold before they go
    serve.shutdown()
    ray.shutdown()
