"""GPU-only path of `bench`: NVML telemetry on the request clock, and gpu.png. Run where a GPU is.

    .venv/bin/python benchmarks/bench_gpu_check.py [OUT_DIR]

Loads a loopback mock server for ~5 s while NVML is sampled every 0.2 s, then checks that GPU
samples exist inside the run window (utilisation, memory; power and energy where the GPU reports
them, otherwise the run's notes say which it refused), that the gpu_util_mean SLO is evaluated
from them, and that gpu.png was written. The same path runs with a fake NVML in
tests/bench/test_bench_nvml.py. Exit 0 pass, 1 fail, and 0 with
"skipped" on a machine without a GPU (that path is covered by the tests). Takes under a minute.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import MockServer, machine  # noqa: E402

from ttsperf.bench.api import BenchSettings, run_bench  # noqa: E402
from ttsperf.bench.charts import write_charts  # noqa: E402
from ttsperf.bench.telemetry import Telemetry  # noqa: E402


def main() -> int:
    print(f"machine: {machine()}")
    probe = Telemetry(0.0)
    if not probe._nvml:
        print(f"skipped: {'; '.join(probe.notes) or 'no GPU'}")
        return 0
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    with MockServer("--service-time", "0.02") as srv:
        cfg = BenchSettings(urls=[srv.url], concurrency=[4], duration=5.0, telemetry_interval=0.2,
                          slo="gpu_util_mean>=0%")  # fmt: skip
        run = run_bench(cfg)
    written = write_charts(run, out)
    p = run.points[0]
    samples = [s for s in run.telemetry if "gpu_util" in s]
    print(f"GPU samples: {len(samples)}; in window: {p.telemetry}")
    print(f"telemetry notes: {run.telemetry_notes or 'none'}")
    refused = " ".join(run.telemetry_notes)
    for key in ("gpu_power_w", "gpu_energy_j"):
        if key not in refused and not any(key in s for s in samples):
            print(f"{key}: neither sampled nor refused with a note")
            return 1
    print(f"charts: {[w.name for w in written]} in {out}")
    ok = len(samples) >= 10 and "gpu_util_mean" in p.telemetry and "gpu_mem_max" in p.telemetry
    ok = ok and (out / "gpu.png").exists() and run.slo is not None and run.slo.passed
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
