"""The NVML telemetry path with a FAKE pynvml module: a real NVML needs an NVIDIA driver and GPU,
which this test machine cannot have. The fake answers like nvidia-ml-py does (same function names,
units and error class); `benchmarks/bench_gpu_check.py` runs the same path on a real GPU.

Two GPUs; GPU 1 refuses power readings (as MIG slices and some boards do): utilisation, memory and
energy must still be sampled, the refusal said once, and no partial power total reported.
"""

from __future__ import annotations

import sys
import time
import types

import pytest

from ttsperf.bench.api import BenchSettings, run_bench
from ttsperf.bench.charts import write_charts

GIB = 1024**3


def fake_pynvml(calls: dict[str, int]) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    t0 = time.perf_counter()

    class NVMLError(Exception):
        pass

    def counted(name, fn):
        def wrapper(*a):
            calls[name] = calls.get(name, 0) + 1
            return fn(*a)

        return wrapper

    def power(h):
        if h == 1:
            raise NVMLError("Not Supported")
        return 250_000  # mW

    nv.NVMLError = NVMLError
    nv.nvmlInit = counted("init", lambda: None)
    nv.nvmlDeviceGetCount = lambda: 2
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetUtilizationRates = counted("util", lambda h: types.SimpleNamespace(gpu=(60, 80)[h]))
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=(10, 20)[h] * GIB)
    nv.nvmlDeviceGetPowerUsage = power
    # mJ since boot, growing at 300 W per GPU on the wall clock
    nv.nvmlDeviceGetTotalEnergyConsumption = lambda h: int(300_000 * (time.perf_counter() - t0)) + h * 10**9
    return nv


@pytest.mark.slow
def test_gpu_samples_feed_the_window_the_slo_and_the_chart(server_factory, tmp_path, monkeypatch):
    calls: dict[str, int] = {}
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(calls))
    srv = server_factory(slots=1, service_time=0.05)
    run = run_bench(BenchSettings(urls=[srv.url], concurrency=[2], requests=20, telemetry_interval=0.05,
                                slo="gpu_util_mean>=85%,e2e_p50=10s"))  # fmt: skip
    p = run.points[0]
    assert calls["init"] == 1 and calls["util"] >= 2 * 5
    gpu = [s for s in run.telemetry if "gpu_util" in s]
    assert len(gpu) >= 5 and all("gpu_power_w" not in s for s in gpu)
    assert p.telemetry["gpu_util_mean"] == pytest.approx(0.7)
    assert p.telemetry["gpu_mem_max"] == 30 * GIB
    assert "gpu_power_mean" not in p.telemetry
    # two GPUs at 300 W each over (at most) the window; then per second of audio produced
    assert 0 < p.telemetry["gpu_energy_j"] <= 600 * p.window_s * 1.05
    audio = sum(r.audio_s for r in run.records if r.ok)
    assert p.telemetry["gpu_joules_per_audio_s"] == pytest.approx(p.telemetry["gpu_energy_j"] / audio)
    assert run.telemetry_notes == [n for n in run.telemetry_notes if "GPU 1 gives no gpu_power_w" in n]
    assert len(run.telemetry_notes) == 1
    assert not run.slo.passed and len(run.slo.failures) == 1
    assert "gpu_util_mean = 70.00%, limit >= 85.00%, under by 15.00%" in run.slo.failures[0]
    assert "gpu.png" in [w.name for w in write_charts(run, tmp_path)]


def test_a_driver_that_fails_to_start_means_no_gpu_said_once(server_factory, monkeypatch):
    nv = fake_pynvml({})

    def broken_init():
        raise nv.NVMLError("Driver Not Loaded")

    nv.nvmlInit = broken_init
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    srv = server_factory(slots=0, service_time=0.01)
    run = run_bench(BenchSettings(urls=[srv.url], concurrency=[1, 2], requests=5, telemetry_interval=0.05))
    assert [p.successes for p in run.points] == [5, 5]
    assert len(run.telemetry_notes) == 1 and "no local GPU" in run.telemetry_notes[0]
    assert "gpu_util_mean" not in run.points[0].telemetry
