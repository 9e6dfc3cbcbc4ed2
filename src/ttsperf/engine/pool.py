"""N engine core processes behind one HTTP front: `serve --engines N`. Torch-free, like client.py.

One core process drives the device from one host core; on an H200 that core was at 101% at every
load while the GPU idled about half the time (docs/PERFORMANCE.md, the engine split on a real
H200). Where one core is not enough, N core processes each run an engine of their own (batch, KV
slots, graphs) and the front sends each request to the engine holding the fewest. On one GPU the
engines' kernels overlap only under CUDA MPS: without it their contexts are time-sliced, and a
second server process on the H200 added nothing (`ttsperf doctor` says whether MPS runs). On a CPU
they share the cores: each gets cores // N torch threads.

    pool = EnginePool(CoreSpec(ModelSpec(synthetic=True, config="tiny")), engines=2).start()
    handle = pool.submit(SynthRequest("你好。"), asyncio.get_running_loop())

Start: one after another until each has allocated its KV slots (the first sizes --max-batch auto to
1/N of the headroom, the others take its batch and check it against the memory left), then every
engine warms up at once, so N engines are ready about as soon as one. --max-batch and --max-queue
are each engine's. Any engine's death ends the whole, as with one: its requests get 'engine_died'
at once, /readyz turns false and serve exits non-zero; the others finish what they hold and admit
nothing more.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import Callable
from dataclasses import replace

from ttsperf.engine.client import EngineClient, FrontHandle
from ttsperf.engine.stats import merge_snapshots
from ttsperf.engine.types import NotAccepting, SynthRequest
from ttsperf.engine.wire import CoreSpec
from ttsperf.errors import UserError

MAX_ENGINES = 64  # more core processes than any one machine's cores would only contend


class EnginePool:
    def __init__(self, spec: CoreSpec, engines: int = 1, start_method: str = "spawn"):
        if not 1 <= engines <= MAX_ENGINES:
            raise UserError(f"--engines {engines}: expected 1 to {MAX_ENGINES}")
        self.spec, self.engines, self._start_method = spec, engines, start_method
        self.clients: list[EngineClient] = []
        self.info: dict = {}  # the first engine's description, with the pool's counts (describe)
        self.on_death: list[Callable[[str], None]] = []
        self._turns = itertools.count()  # ties go round the engines

    # ------------------------------------------------------------------ life

    def start(self, timeout: float | None = None) -> EnginePool:
        """Start every engine (`timeout`: for each stage of each); raise UserError if one cannot."""
        first = self._each(self.spec)
        try:
            self.clients = [first.launch().wait_built(timeout)]
            # the others hold the first one's batch, checked against the memory it left
            batch = first.built["max_batch"]
            others = replace(first.spec, engine=replace(first.spec.engine, max_batch=batch))
            for _ in range(1, self.engines):
                self.clients.append(self._each(others).launch().wait_built(timeout))
            for client in self.clients:
                client.wait_ready(timeout)
        except BaseException:
            for client in self.clients:
                client.kill()
            raise
        for client in self.clients:
            client.on_death.append(self._died)
        self.info = _describe([c.info for c in self.clients], [c.pid for c in self.clients])
        return self

    def _each(self, spec: CoreSpec) -> EngineClient:
        """One engine's client: with N engines, 1/N of the headroom for auto and, unless the spec
        names its threads, of the CPU's cores."""
        if self.engines > 1:
            threads = spec.threads or max(1, (os.cpu_count() or 1) // self.engines)
            spec = replace(spec, engine=replace(spec.engine, memory_share=1 / self.engines), threads=threads)
        return EngineClient(spec, self._start_method)

    @property
    def pids(self) -> list[int | None]:
        return [c.pid for c in self.clients]

    @property
    def ready(self) -> bool:
        return bool(self.clients) and all(c.ready for c in self.clients)

    def stop(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop every engine at once (each drains in its own process); return when all have."""
        threads = [threading.Thread(target=c.stop, args=(drain, timeout)) for c in self.clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _died(self, why: str) -> None:
        for callback in self.on_death:
            callback(why)

    # ------------------------------------------------------------------ requests

    def submit(self, request: SynthRequest, loop: asyncio.AbstractEventLoop) -> FrontHandle:
        """To the engine holding the fewest requests (the first after the last one chosen on a tie)."""
        if not self.ready:
            raise NotAccepting("the engine is draining or stopped")
        turn = next(self._turns) % len(self.clients)
        order = self.clients[turn:] + self.clients[:turn]
        return min(order, key=lambda c: c.outstanding).submit(request, loop)

    async def call(self, name: str) -> dict:
        """Ask every engine and answer for all: "status", "describe" or "metrics". Raises EngineDied."""
        return self._merge(name, await asyncio.gather(*(c.call(name) for c in self.clients)))

    def call_blocking(self, name: str, timeout: float = 30.0) -> dict:
        return self._merge(name, [c.call_blocking(name, timeout) for c in self.clients])

    def _merge(self, name: str, answers: list[dict]) -> dict:
        if name == "metrics":
            return merge_snapshots(answers)
        if name == "describe":
            return _describe(answers, self.pids)
        return _status(answers)


def _status(answers: list[dict]) -> dict:
    """/readyz for all: requests waiting and running summed; ready when every engine is."""
    return {
        "queue_depth": sum(a["queue_depth"] for a in answers),
        "running": sum(a["running"] for a in answers),
        "ready": all(a["ready"] for a in answers),
    }


def _describe(answers: list[dict], pids: list[int | None]) -> dict:
    """/healthz for all: the first engine's settings and buckets (every engine runs the same), its
    max batch and queue (each engine's), the requests summed, and each engine's own counts."""
    mine = ("max_batch", "effective_max_batch", "queue_depth", "running", "answered")
    each = [{"pid": pid, **{k: a[k] for k in mine}} for a, pid in zip(answers, pids, strict=True)]
    answered = sum(a["answered"] for a in answers)
    return {
        **answers[0],
        **_status(answers),
        "answered": answered,
        "engines": len(answers),
        "per_engine": each,
    }


Engines = EngineClient | EnginePool  # what an HTTP front talks to: one engine, or N behind it
