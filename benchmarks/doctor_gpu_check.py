"""GPU-only paths of `doctor` and `export onnx`: what the CPU-only tests cannot reach. Run where a GPU is.

    .venv/bin/python benchmarks/doctor_gpu_check.py [OUT_DIR]

1. Facts collected on CUDA: every GPU with its compute capability, NVML's compute processes
   (this process must appear on GPU 0 once it holds a tensor there), and the CUDA-only checks
   (cudnn-benchmark, tf32) judged instead of skipped for ttsperf serve's defaults.
2. A model on the GPU under inference_mode: the grad check says ok; outside it, error.
3. The tiny decode-step graph exported and, if `trtexec` is on PATH, built into a TensorRT engine
   with the printed shapes (otherwise that step says "skipped").
Exit 0 pass, 1 fail, and 0 with "skipped" on a machine without a GPU. Takes about a minute.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ttsperf.doctor import checks
from ttsperf.doctor.facts import collect, from_model
from ttsperf.export.onnx import export_step
from ttsperf.export.shapes import load_requests
from ttsperf.model.config import TINY
from ttsperf.model.weights import build_model


def main() -> int:
    if not torch.cuda.is_available():
        print("skipped: no CUDA device here (the CPU paths are covered by tests/doctor and tests/export)")
        return 0
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="doctor-gpu-"))
    results: dict[str, bool] = {}
    held = torch.ones(1, device="cuda:0")  # this process is now a compute process on GPU 0
    facts = collect()
    print(f"GPUs: {[(g.name, g.capability) for g in facts.gpus]}; NVML: {facts.gpu_processes}")
    results["gpus collected"] = facts.gpu_count == torch.cuda.device_count() and all(
        g.capability for g in facts.gpus
    )
    results["own pid in NVML"] = facts.gpu_processes is not None and os.getpid() in facts.gpu_processes.get(
        0, []
    )
    found = {f.id: f for f in checks.run_checks(facts)}
    for cid in ("cudnn-benchmark", "tf32"):
        print(f"{cid}: {found[cid].severity} - {found[cid].evidence}")
        results[f"{cid} judged"] = found[cid].severity != "skipped"
    model = build_model(TINY, seed=0, device="cuda")
    results["grad error off the inference path"] = (
        checks.check_grad(from_model(model), facts).severity == "error"
    )
    with torch.inference_mode():
        results["grad ok under inference_mode"] = checks.check_grad(from_model(model), facts).severity == "ok"
    _, requests = load_requests(None, "mixed", TINY.gpt)
    exported = export_step(out / "gpt_step.onnx", config="tiny", requests=requests, max_batch=8)
    results["onnx matches the engine"] = exported["ok"]
    if shutil.which("trtexec"):
        cmd = shlex.split(exported["trtexec"])
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        print(run.stdout[-2000:])
        results["trtexec builds with the printed shapes"] = run.returncode == 0
    else:
        print("trtexec: skipped (not on PATH)")
    del held
    for name, ok in results.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print("command: .venv/bin/python benchmarks/doctor_gpu_check.py")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
