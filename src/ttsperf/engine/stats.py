"""Counters and histograms the server exports as Prometheus metrics (no dependency here)."""

from __future__ import annotations

import copy
import threading
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field

STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1

    def copy(self) -> Histogram:
        """A copy that later observations do not change (a snapshot's)."""
        return Histogram(self.buckets, list(self.counts), self.total, self.n)

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, count) pairs as Prometheus expects, ending with +Inf."""
        out, running = [], 0
        for bound, c in zip((*self.buckets, float("inf")), self.counts, strict=True):
            running += c
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out


@dataclass
class EngineStats:
    decode_steps: int = 0
    audio_seconds: float = 0.0
    rejected: int = 0
    ooms: int = 0
    requests: Counter = field(default_factory=Counter)
    step_seconds: Histogram = field(default_factory=lambda: Histogram(STEP_BUCKETS))
    prefill_seconds: Histogram = field(default_factory=lambda: Histogram(STEP_BUCKETS))
    audio_call_seconds: Histogram = field(default_factory=lambda: Histogram(STEP_BUCKETS))
    batch_size: Histogram = field(default_factory=lambda: Histogram(BATCH_BUCKETS))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def observe_step(self, batch: int, seconds: float, steps: int = 1) -> None:
        """`steps` decode steps of `batch` rows that took `seconds` together (one host turn)."""
        with self._lock:
            for _ in range(steps):
                self.batch_size.observe(batch)
                self.step_seconds.observe(seconds / steps)

    def count(self, status: str) -> None:
        with self._lock:
            self.requests[status] += 1

    def answered(self) -> int:
        """Requests answered so far, whatever the outcome."""
        with self._lock:
            return sum(self.requests.values())

    def snapshot(self) -> dict:
        """A consistent, picklable copy (what the core sends a front for /metrics)."""
        with self._lock:
            out = {
                name: getattr(self, name) for name in ("decode_steps", "audio_seconds", "rejected", "ooms")
            }
            out["requests"] = dict(self.requests)
            for name in ("step_seconds", "prefill_seconds", "audio_call_seconds", "batch_size"):
                out[name] = getattr(self, name).copy()
            return out


def merge_snapshots(snapshots: list[dict]) -> dict:
    """Several engines' `Core.metrics` answers as one (serve --engines N): counts, histograms and
    memory in use summed; ready when every engine is; a device's free and total memory (and a
    host's available memory), which the engines share, taken once."""
    shared = ("free", "total", "host_available")
    out = dict(snapshots[0])
    for name in ("queue_depth", "running", "pending", "max_batch", "effective_max_batch"):
        out[name] = sum(s[name] for s in snapshots)
    out["ready"] = all(s["ready"] for s in snapshots)
    memory: dict[str, int] = {}
    for s in snapshots:
        for kind, value in s["device_memory"].items():
            kept = memory.get(kind)
            memory[kind] = value if kept is None else min(kept, value) if kind in shared else kept + value
    out["device_memory"] = memory
    out["stats"] = _sum([s["stats"] for s in snapshots])
    out["gc"] = {  # engine/gc_pauses.py: each engine process's collector
        "seconds": _sum([s["gc"]["seconds"] for s in snapshots]),
        "collected": _sum([s["gc"]["collected"] for s in snapshots]),
        "frozen": sum(s["gc"]["frozen"] for s in snapshots),
    }
    return out


def _sum(parts: list[dict]) -> dict:
    """Dicts of counts, histograms and Counters, summed key by key."""
    out: dict = {}
    for part in parts:
        for name, value in part.items():
            if name not in out:
                out[name] = copy.deepcopy(value)
            elif isinstance(value, Histogram):
                h = out[name]
                h.counts = [a + b for a, b in zip(h.counts, value.counts, strict=True)]
                h.total, h.n = h.total + value.total, h.n + value.n
            elif isinstance(value, dict):
                out[name] = dict(Counter(out[name]) + Counter(value))
            else:
                out[name] += value
    return out
