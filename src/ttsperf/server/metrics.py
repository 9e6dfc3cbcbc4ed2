"""`/metrics`: the engine's counters and histograms plus the server's own, in Prometheus text.

The engine keeps plain counters (engine/stats.py, no Prometheus dependency); at scrape time the
front asks the core process for a snapshot of them (engine/core.py `Core.metrics`) and renders it
with its own HTTP counters, through a registry made for that scrape, so nothing is double-counted
and nothing of prometheus_client runs in the engine. A dead engine renders as not ready.
"""

from __future__ import annotations

import threading
from collections import Counter

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ttsperf.engine import gc_pauses
from ttsperf.engine.stats import EngineStats, Histogram

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class HttpStats:
    """Requests answered, by endpoint and status code, and requests in flight (for draining)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.answered: Counter[tuple[str, int | str]] = Counter()
        self.in_flight = 0

    def start(self) -> None:
        with self._lock:
            self.in_flight += 1

    def finish(self, endpoint: str, status: int | str) -> None:
        with self._lock:
            self.in_flight -= 1
            self.answered[(endpoint, status)] += 1


def _histogram(name: str, doc: str, h: Histogram) -> HistogramMetricFamily:
    buckets = h.cumulative()
    # read the count from the buckets, not h.n, so +Inf == count even mid-update
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=h.total)


def _device_memory(memory: dict[str, int]) -> GaugeMetricFamily:
    g = GaugeMetricFamily(
        "ttsperf_device_memory_bytes",
        "Memory of the device the model runs on (CUDA: allocated/reserved/free/total; CPU: the "
        "engine process's RSS).",
        labels=["kind"],
    )
    for kind, value in memory.items():
        g.add_metric([kind], value)
    return g


def _gc(processes: dict[str, dict]) -> list:
    """Each process's garbage-collector pauses by generation, and its objects frozen at start
    (engine/gc_pauses.py): a pause stops every stream that process serves."""
    pauses = HistogramMetricFamily(
        "ttsperf_gc_pause_seconds",
        "Seconds each garbage collection stopped the process, by process (front, engine) and "
        "generation, since the process was ready.",
        labels=["process", "generation"],
    )
    frozen = GaugeMetricFamily(
        "ttsperf_gc_frozen_objects",
        "Objects frozen once the process was ready (gc.freeze): no collection walks them.",
        labels=["process"],
    )
    for process, snapshot in processes.items():
        for generation, h in sorted(snapshot["seconds"].items()):
            pauses.add_metric([process, str(generation)], h.cumulative(), h.total)
        frozen.add_metric([process], snapshot["frozen"])
    return [pauses, frozen]


def _dead() -> dict:
    """What a scrape shows once the engine process is gone: nothing running, not ready."""
    snapshot = {"queue_depth": 0, "running": 0, "max_batch": 0, "effective_max_batch": 0, "ready": False}
    return {**snapshot, "stats": EngineStats().snapshot(), "device_memory": {}, "gc": None}


class EngineCollector(Collector):
    def __init__(self, snapshot: dict, http: HttpStats):
        self.snapshot, self.http = snapshot, http

    def collect(self):
        e, s = self.snapshot, self.snapshot["stats"]
        yield GaugeMetricFamily(
            "ttsperf_queue_depth", "Requests waiting for a batch slot.", value=e["queue_depth"]
        )
        yield GaugeMetricFamily(
            "ttsperf_running_requests", "Requests in the running batch.", value=e["running"]
        )
        yield GaugeMetricFamily(
            "ttsperf_max_batch", "Batch slots allocated (--max-batch).", value=e["max_batch"]
        )
        yield GaugeMetricFamily(
            "ttsperf_effective_max_batch",
            "Batch slots in use after out-of-memory shrinking.",
            value=e["effective_max_batch"],
        )
        yield GaugeMetricFamily(
            "ttsperf_ready", "1 while admitting requests, 0 while draining.", value=e["ready"]
        )
        yield _histogram("ttsperf_batch_size", "Rows in each decode step.", s["batch_size"])
        yield _histogram(
            "ttsperf_step_seconds", "Seconds of each decode step (a GPU: on the device).", s["step_seconds"]
        )
        yield _histogram(
            "ttsperf_prefill_seconds", "Wall seconds of each prompt prefill.", s["prefill_seconds"]
        )
        yield _histogram(
            "ttsperf_audio_call_seconds",
            "Wall seconds of each Decoder+Vocos call (every row emitting at a step).",
            s["audio_call_seconds"],
        )
        yield CounterMetricFamily(
            "ttsperf_decode_steps",
            "Decode steps summed over rows (one per 4 codes).",
            value=s["decode_steps"],
        )
        yield CounterMetricFamily(
            "ttsperf_audio_seconds", "Seconds of audio produced.", value=s["audio_seconds"]
        )
        yield CounterMetricFamily(
            "ttsperf_rejected", "Requests refused with a full queue.", value=s["rejected"]
        )
        yield CounterMetricFamily("ttsperf_oom", "Out-of-memory events survived.", value=s["ooms"])
        outcomes = CounterMetricFamily(
            "ttsperf_engine_requests",
            "Engine outcomes: ok, timeout, cancelled, oom, shutdown, ...",
            labels=["status"],
        )
        for status, n in sorted(s["requests"].items()):
            outcomes.add_metric([status], n)
        yield outcomes
        http = CounterMetricFamily(
            "ttsperf_http_requests",
            "HTTP requests answered, by endpoint and status code.",
            labels=["endpoint", "code"],
        )
        for (endpoint, code), n in sorted(dict(self.http.answered).items(), key=str):
            http.add_metric([endpoint, str(code)], n)
        yield http
        yield GaugeMetricFamily(
            "ttsperf_http_in_flight", "HTTP requests being answered.", value=self.http.in_flight
        )
        yield _device_memory(e["device_memory"])
        processes = {"front": gc_pauses.this_process().snapshot()}
        if e["gc"] is not None:
            processes["engine"] = e["gc"]
        yield from _gc(processes)


def render(snapshot: dict | None, http: HttpStats) -> bytes:
    """Prometheus text for the engine's `snapshot` (None: the engine is gone) and `http`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(snapshot or _dead(), http))
    return generate_latest(registry)
