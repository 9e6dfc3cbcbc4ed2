"""Stock ChatTTS's decode step on this CPU: host seconds and device kernels per step.

The official package (chattts 0.2.5, the one `make conformance` installs) generates codes one step
at a time in Python (transformers' LlamaModel, four heads, logits processors, sampling). Built at
the `skeleton` widths (ChatTTS's op graph, compute negligible) its step time on one CPU thread is
the host work the step would cost beside a GPU; the aten ops it dispatches per step are the
kernels it would launch there. The difference between a long and a short generation gives the
per-step figures (the prompt's prefill and the setup cancel out).

    make conformance   # once: .venv-conformance with the official package
    PYTHONPATH=src .venv-conformance/bin/python benchmarks/stock_chattts.py --config skeleton

Prints the CPU, a table (steps, median CPU seconds of the thread, ops), the per-step host ms and
kernels, its projected steps per second on the cards its users published figures for, and
writes `--json` if asked. The official package is AGPL: it is only imported and run here, never copied.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "conformance"))

from run import official_generate, official_modules  # noqa: E402  (conformance/run.py)

from ttsperf.model.assets import make_random_assets  # noqa: E402
from ttsperf.model.config import get_config  # noqa: E402
from ttsperf.profile.kernels import EXCLUDED_HOW, count_ops  # noqa: E402

TEXT = "四川美食确实以辣闻名，但也有不辣的选择。"


def count(cfg, off, steps: int):
    return count_ops(lambda: official_generate(cfg, off, TEXT, steps, temperature=0.3, seed=0))


def timed(cfg, off, steps: int, reps: int) -> float:
    """Median CPU seconds of this thread (torch runs on it alone): host work, which a loaded
    machine stretches in wall time but hardly in CPU time."""
    times = []
    for _ in range(reps):
        t0 = time.thread_time()
        official_generate(cfg, off, TEXT, steps, temperature=0.3, seed=0)
        times.append(time.thread_time() - t0)
    return statistics.median(times)


def cpu_line() -> str:
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    model = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?"
    )
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    simd = [f for f in flags if f.startswith(("avx512", "avx2", "amx"))]
    return f"{model}; {' '.join(sorted(simd)) or 'no AVX2/AVX-512'}"


# What stock ChatTTS's users published for its decode speed (tqdm's it/s of the code generation,
# one request), and where; the A100's variant is not said (the catalog's 40GB PCIe stands in).
PUBLISHED = (
    ("RTX 4090", "38 it/s eager, 45 with compile", "2noise/ChatTTS issue 797"),
    ("RTX 4090", "~80 it/s in a web UI", "jianchang512/ChatTTS-ui issue 37"),
    ("T4", "55.6 it/s", "2noise/ChatTTS issue 796"),
    ("A100 40GB PCIe", "up to 30 it/s", "2noise/ChatTTS issue 302"),
)


def project(host: float, kernels: float) -> None:
    """Stock ChatTTS's steps per second at batch 1 on the published cards, as plan's eager model
    prices a step, max(host work, kernels x launch gap) + the roofline, and with host and device
    one after the other (a loop that reads the device every step: host + kernels x gap +
    roofline); fp16 and fp32 weights, the gap's sourced range."""
    from ttsperf.model.config import CHATTTS
    from ttsperf.plan.catalog import load_catalog
    from ttsperf.plan.overhead import KERNEL_COSTS
    from ttsperf.plan.steptime import DEFAULT_MBU, decode_bytes

    gap = KERNEL_COSTS["launch_gap"]
    cat = load_catalog(only=sorted({card for card, _, _ in PUBLISHED}))
    context = 64 + 375 // 2  # a 64-token prompt, midway through 8 s of audio
    print(f"\nprojected at batch 1 (roofline at MBU {DEFAULT_MBU:.2f}) beside what its users published:")
    print(f"{'card':<15} {'overlapped':>10} {'serial':>8}  published it/s")
    for card, said, where in PUBLISHED:
        bw = cat.gpus[card].bandwidth_gbs * 1e9 * DEFAULT_MBU
        overlapped, serial = [], []
        for dtype, elem, end in (("fp16", 2, "low"), ("fp32", 4, "high")):
            roof = float(decode_bytes(1, context, dtype, CHATTTS.gpt.kv_bytes_per_token(elem))) / bw
            overlapped.append(1.0 / (max(host, kernels * gap.at(end)) + roof))
            serial.append(1.0 / (host + kernels * gap.at(end) + roof))
        cells = [f"{min(v):.0f}-{max(v):.0f}" for v in (overlapped, serial)]
        print(f"{card:<15} {cells[0]:>10} {cells[1]:>8}  {said} ({where})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="skeleton", help="model widths (skeleton: ChatTTS's op graph)")
    ap.add_argument("--short", type=int, default=8, help="steps of the short generation")
    ap.add_argument("--long", type=int, default=72, help="steps of the long generation")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    import transformers

    transformers.logging.set_verbosity_error()
    logging.getLogger("official").setLevel(logging.ERROR)
    cfg = get_config(args.config)
    print(f"CPU: {cpu_line()}; torch {torch.__version__}, 1 thread")
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        off = official_modules(cfg, make_random_assets(Path(tmp) / "asset", args.config, seed=0))
        timed(cfg, off, args.short, 1)  # warm-up
        rows = {n: (timed(cfg, off, n, args.reps), count(cfg, off, n)) for n in (args.short, args.long)}
    (t_s, c_s), (t_l, c_l) = rows[args.short], rows[args.long]
    steps = args.long - args.short
    per_step = {k: (c_l.kernels[k] - c_s.kernels.get(k, 0)) / steps for k in c_l.kernels}
    ops = (sum(c_l.ops.values()) - sum(c_s.ops.values())) / steps
    kernels = sum(per_step.values())
    host = (t_l - t_s) / steps
    print(f"{'steps':>6} {'CPU s':>9} {'aten ops':>9} {'kernels':>8}")
    for n, (t, c) in rows.items():
        print(f"{n:>6} {t:>9.3f} {sum(c.ops.values()):>9} {sum(c.kernels.values()):>8}")
    print(
        f"stock ChatTTS ({args.config}): {host * 1e3:.2f} ms of host work per decode step; "
        f"{ops:.0f} aten ops per step, {kernels:.0f} of them launch a kernel ({EXCLUDED_HOW})"
    )
    project(host, kernels)
    here = "PYTHONPATH=src .venv-conformance/bin/python benchmarks/stock_chattts.py"
    print(f"command: {here} --config {args.config}")
    if args.json:
        top = dict(sorted(per_step.items(), key=lambda kv: -kv[1])[:25])
        out = {"config": args.config, "cpu": cpu_line(), "torch": torch.__version__, "host_s_per_step": host,
               "ops_per_step": ops, "kernels_per_step": kernels, "top_kernels": top, "how": EXCLUDED_HOW,
               "short": args.short, "long": args.long, "reps": args.reps}  # fmt: skip
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
