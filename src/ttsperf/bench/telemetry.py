"""GPU, process and server-metrics samples on the same clock as the requests.

A background thread samples every `interval` seconds: NVML for local GPUs (utilisation, memory,
power, energy counter), psutil for the server process (`--server-pid`), and a Prometheus text
endpoint (`--metrics-url`: the DCGM exporter, or a server's own /metrics). Each sample carries `t`
in seconds on the run clock. A missing source is said once, in `notes`, and the run goes on.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections.abc import Sequence

_PROM = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([0-9.eE+-]+|NaN|[+-]Inf)\b")
# DCGM exporter names mapped onto ours, so `gpu_util_mean` works against a remote GPU too.
DCGM = {"DCGM_FI_DEV_GPU_UTIL": "gpu_util", "DCGM_FI_DEV_FB_USED": "gpu_mem_mib",
        "DCGM_FI_DEV_POWER_USAGE": "gpu_power_w"}  # fmt: skip
MAX_PROM_SERIES = 200


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format -> {name{labels}: value}; series of one name are summed as `name`."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PROM.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        name = m.group(1)
        out[name] = out.get(name, 0.0) + v
    return out


class Telemetry:
    def __init__(
        self,
        epoch: float,
        interval: float = 0.5,
        server_pid: int | None = None,
        metrics_url: str | None = None,
        gpu: bool = True,
    ) -> None:
        self.epoch, self.interval = epoch, interval
        self.samples: list[dict[str, float]] = []
        self.notes: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: list = []
        self._nvml_refused: set[tuple[str, int]] = set()
        self._proc = None
        self._children: dict[int, object] = {}  # pid -> psutil.Process: a multi-process server's
        self._metrics_url = metrics_url
        self._prom_failed = False
        if gpu:
            self._init_nvml()
        if server_pid is not None:
            self._init_proc(server_pid)

    def _init_nvml(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            if not self._nvml:
                self.notes.append("NVML: no GPU on this machine; GPU telemetry skipped")
        except Exception as exc:  # no driver, no library, no device: all mean "no local GPU"
            self.notes.append(
                f"no local GPU (NVML unavailable: {exc.__class__.__name__}); GPU telemetry skipped"
            )

    def _init_proc(self, pid: int) -> None:
        import psutil

        try:
            self._proc = psutil.Process(pid)
            self._proc.cpu_percent(None)  # first call primes the counter
        except psutil.Error as exc:
            self.notes.append(f"--server-pid {pid}: {exc.__class__.__name__}; process telemetry skipped")

    def sample(self) -> dict[str, float]:
        s: dict[str, float] = {"t": time.perf_counter() - self.epoch}
        if self._nvml:
            self._sample_nvml(s)
        if self._proc is not None:
            try:
                s["proc_cpu_pct"] = self._proc.cpu_percent(None)
                s["proc_rss_bytes"] = float(self._proc.memory_info().rss)
            except Exception:
                pass
            self._sample_children(s)
        if self._metrics_url and not self._prom_failed:
            try:
                with urllib.request.urlopen(self._metrics_url, timeout=min(2.0, self.interval * 4)) as r:
                    prom = parse_prometheus(r.read().decode("utf-8", "replace"))
                for k, v in list(prom.items())[:MAX_PROM_SERIES]:
                    s[f"prom:{k}"] = v
                for k, ours in DCGM.items():
                    if k in prom and ours not in s:
                        s[ours] = prom[k] / 100.0 if ours == "gpu_util" else prom[k]
                if "gpu_mem_mib" in s:
                    s.setdefault("gpu_mem_bytes", s.pop("gpu_mem_mib") * 1024 * 1024)
            except Exception as exc:
                self._prom_failed = True
                self.notes.append(f"--metrics-url {self._metrics_url}: {exc}; scraping stopped")
        return s

    def _sample_children(self, s: dict[str, float]) -> None:
        """The server's child processes together (ttsperf serve's engine process, a worker pool):
        CPU % (100 = one core) and resident memory, apart from the process given."""
        import psutil

        try:
            now = {c.pid: c for c in self._proc.children(recursive=True)}
        except psutil.Error:
            return
        for pid, child in now.items():
            if pid not in self._children:
                self._children[pid] = child
                try:
                    child.cpu_percent(None)  # primed: its first figure comes at the next sample
                except psutil.Error:
                    pass
        cpu = rss = 0.0
        for pid in list(self._children):
            if pid not in now:
                del self._children[pid]
                continue
            try:
                cpu += self._children[pid].cpu_percent(None)
                rss += self._children[pid].memory_info().rss
            except psutil.Error:
                pass
        if now:
            s["children_cpu_pct"], s["children_rss_bytes"] = cpu, rss

    def _sample_nvml(self, s: dict[str, float]) -> None:
        """Each quantity on its own: many GPUs (MIG slices, some boards) refuse power or energy
        readings, and that must not cost the utilisation and memory samples."""
        import pynvml

        for key, read, how in _NVML_READS:
            vals = []
            for i, h in enumerate(self._nvml):
                try:
                    vals.append(read(pynvml, h))
                except pynvml.NVMLError as exc:
                    if (key, i) not in self._nvml_refused:
                        self._nvml_refused.add((key, i))
                        self.notes.append(f"NVML: GPU {i} gives no {key} ({exc}); that series skipped")
            if vals and how == "mean":
                s[key] = sum(vals) / len(vals)
            elif len(vals) == len(self._nvml):  # a sum over some of the GPUs would be a wrong total
                s[key] = sum(vals)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.sample())
            self._stop.wait(self.interval)

    def start(self) -> None:
        if self._thread is None and (self._nvml or self._proc is not None or self._metrics_url):
            self._thread = threading.Thread(target=self._loop, name="bench-telemetry", daemon=True)
            self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """wait: let a sample in progress end (a --metrics-url scrape: up to 2 s), then take a last
        one, so that the last point's window has one at its end. After a Ctrl-C neither: bench ends
        within seconds, and the thread is a daemon, so it cannot keep the process alive."""
        self._stop.set()
        if self._thread is not None and wait:
            self._thread.join(timeout=5)
            self.samples.append(self.sample())


_NVML_READS = (  # sample key, read(pynvml, handle), across GPUs
    ("gpu_util", lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu / 100.0, "mean"),
    ("gpu_mem_bytes", lambda nv, h: float(nv.nvmlDeviceGetMemoryInfo(h).used), "sum"),
    ("gpu_power_w", lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0, "sum"),
    ("gpu_energy_j", lambda nv, h: nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0, "sum"),
)

_AGGREGATES = (  # sample key, how, summary name
    ("gpu_util", "mean", "gpu_util_mean"),
    ("gpu_power_w", "mean", "gpu_power_mean"),
    ("gpu_mem_bytes", "max", "gpu_mem_max"),
    ("proc_cpu_pct", "mean", "proc_cpu_pct_mean"),
    ("proc_rss_bytes", "max", "proc_rss_max"),
    ("children_cpu_pct", "mean", "children_cpu_pct_mean"),
    ("children_rss_bytes", "max", "children_rss_max"),
)


def aggregate(samples: Sequence[dict[str, float]], t0: float, t1: float, audio_s: float) -> dict[str, float]:
    """As docs/reference/metrics.md: util and power are means inside the window, memory the max."""
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    out: dict[str, float] = {}
    for key, how, name in _AGGREGATES:
        vals = [s[key] for s in inside if key in s]
        if vals:
            out[name] = sum(vals) / len(vals) if how == "mean" else max(vals)
    energy = [s["gpu_energy_j"] for s in inside if "gpu_energy_j" in s]
    if len(energy) >= 2 and audio_s > 0:
        out["gpu_energy_j"] = energy[-1] - energy[0]
        out["gpu_joules_per_audio_s"] = (energy[-1] - energy[0]) / audio_s
    return out
