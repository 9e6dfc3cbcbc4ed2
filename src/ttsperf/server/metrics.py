"""`/metrics`: the engine's counters and histograms plus the server's own, in Prometheus text.

The engine keeps plain counters (engine/stats.py, no Prometheus dependency); a custom collector
reads them at scrape time, so nothing is double-counted and the engine thread never touches
prometheus_client. Each app gets its own registry, so several apps in one process (tests) do not
collide.
"""

from __future__ import annotations

import threading
from collections import Counter

import psutil
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ttsperf.engine.engine import Engine
from ttsperf.engine.stats import Histogram

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


def _device_memory(engine: Engine) -> GaugeMetricFamily:
    g = GaugeMetricFamily(
        "ttsperf_device_memory_bytes",
        "Memory of the device the model runs on (CUDA: allocated/reserved/free/total; CPU: process RSS).",
        labels=["kind"],
    )
    device = engine.describe()["device"]
    if device.startswith("cuda"):
        import torch  # only for the allocator's counters; the model stays behind the engine

        free, total = torch.cuda.mem_get_info(device)
        g.add_metric(["allocated"], torch.cuda.memory_allocated(device))
        g.add_metric(["reserved"], torch.cuda.memory_reserved(device))
        g.add_metric(["free"], free)
        g.add_metric(["total"], total)
    else:
        g.add_metric(["process_rss"], psutil.Process().memory_info().rss)
        g.add_metric(["host_available"], psutil.virtual_memory().available)
    return g


class EngineCollector(Collector):
    def __init__(self, engine: Engine, http: HttpStats):
        self.engine, self.http = engine, http

    def collect(self):
        e, s = self.engine, self.engine.stats
        yield GaugeMetricFamily(
            "ttsperf_queue_depth", "Requests waiting for a batch slot.", value=e.queue_depth()
        )
        yield GaugeMetricFamily(
            "ttsperf_running_requests", "Requests in the running batch.", value=e.running()
        )
        yield GaugeMetricFamily(
            "ttsperf_max_batch", "Batch slots allocated (--max-batch).", value=e.max_batch
        )
        yield GaugeMetricFamily(
            "ttsperf_effective_max_batch",
            "Batch slots in use after out-of-memory shrinking.",
            value=e.effective_max_batch,
        )
        yield GaugeMetricFamily(
            "ttsperf_ready", "1 while admitting requests, 0 while draining.", value=e.ready
        )
        yield _histogram("ttsperf_batch_size", "Rows in each decode step.", s.batch_size)
        yield _histogram("ttsperf_step_seconds", "Wall seconds of each decode step.", s.step_seconds)
        yield _histogram("ttsperf_prefill_seconds", "Wall seconds of each prompt prefill.", s.prefill_seconds)
        yield _histogram(
            "ttsperf_audio_call_seconds",
            "Wall seconds of each Decoder+Vocos call (every row emitting at a step).",
            s.audio_call_seconds,
        )
        yield CounterMetricFamily(
            "ttsperf_decode_steps", "Decode steps summed over rows (one per 4 codes).", value=s.decode_steps
        )
        yield CounterMetricFamily(
            "ttsperf_audio_seconds", "Seconds of audio produced.", value=s.audio_seconds
        )
        yield CounterMetricFamily("ttsperf_rejected", "Requests refused with a full queue.", value=s.rejected)
        yield CounterMetricFamily("ttsperf_oom", "Out-of-memory events survived.", value=s.ooms)
        outcomes = CounterMetricFamily(
            "ttsperf_engine_requests",
            "Engine outcomes: ok, timeout, cancelled, oom, shutdown, ...",
            labels=["status"],
        )
        for status, n in sorted(dict(s.requests).items()):
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
        yield _device_memory(e)


def make_registry(engine: Engine, http: HttpStats) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(engine, http))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
