"""Does host work + compute make a step? On this CPU the host and the arithmetic run one after the
other, so the `chattts` decode step should be the `skeleton` step (chattts's op graph at widths
where compute vanishes: the host work, as `ttsperf profile --host` times it) plus a roofline in
the step's bytes and flops (plan/steptime.py). Issue 21's first check of the host model.

Both configs run the engine's own runner (`Runner.step`: forward, heads, sampling, state update,
the host copy) on synthetic weights, one torch thread, at batches 1, 16 and 64 and in fp32 and
bf16; each point is the median of `--steps` steps after 3 warm-up. Per dtype the roofline's two
rates (s per byte, s per flop) are fitted to chattts minus skeleton at the three batches (least
squares on relative error), and each batch is also predicted from a fit to the other two
(leave-one-out: the honest test; with two rates and three points the full fit has one degree of
freedom).

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python \\
        benchmarks/host_plus_compute.py

Prints the CPU, a table and the command; `--json FILE` writes the numbers.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ttsperf.engine.runner import Runner
from ttsperf.model.config import CHATTTS, SKELETON, ModelConfig
from ttsperf.model.pipeline import Pipeline
from ttsperf.plan.steptime import decode_bytes, decode_flops
from ttsperf.profile.host import MAX_NEW, MAX_PROMPT, admissions, cpu_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import DocHelp  # noqa: E402

BATCHES = (1, 16, 64)
DTYPES = ("fp32", "bf16")
FORMS = ("max", "sum")
FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "avx2")


def runner(cfg: ModelConfig, dtype: str) -> Runner:
    pipe = Pipeline.synthetic_model(cfg, seed=0, dtype=dtype)
    report = {"compile": {"applied": False, "note": ""}, "cuda_graphs": {"applied": False, "note": ""}}
    return Runner(
        pipe, max_batch=max(BATCHES), max_prompt_tokens=MAX_PROMPT, max_new_tokens=MAX_NEW,
        lookahead_steps=4, switch_report=report,
    )  # fmt: skip


def step_seconds(r: Runner, batch: int, steps: int) -> tuple[float, int]:
    """Median wall seconds of one decode step at `batch` rows, and the mean context of the timed steps."""
    r.state.truncate(0)
    r.prefill(admissions(batch))
    for _ in range(3):
        r.step()
    start = int(r.state.host.positions[:batch].max())
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        r.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), start + steps // 2


def fit(points: list[tuple[float, float, float]], form: str) -> tuple[float, float]:
    """(s/byte, s/flop) minimising the relative error of the roofline to `compute` over (bytes,
    flops, compute) points. `max`: max(a x bytes, b x flops), plan's form for a GPU (memory and
    arithmetic overlap), a scan of b/a with a in closed form; `sum`: a x bytes + b x flops, one
    CPU thread doing one after the other, linear least squares."""
    by, fl, t = (np.array(c, float) for c in zip(*points, strict=True))
    if form == "sum":
        coef, *_ = np.linalg.lstsq(np.stack([by, fl], axis=1) / t[:, None], np.ones_like(t), rcond=None)
        return float(coef[0]), float(coef[1])
    best = (np.inf, 0.0, 0.0)
    for ratio in [0.0, *np.logspace(-4, 4, 401) * float(np.median(by / fl))]:
        z = np.maximum(by, ratio * fl)
        w = 1.0 / t
        a = float(np.sum(z * t * w * w) / np.sum(z * z * w * w))
        err = float(np.sum(((a * z - t) * w) ** 2))
        if err < best[0]:
            best = (err, a, a * ratio)
    return best[1], best[2]


def predict(rates: tuple[float, float], by: float, fl: float, form: str) -> float:
    return rates[0] * by + rates[1] * fl if form == "sum" else max(rates[0] * by, rates[1] * fl)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=DocHelp)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per point (median)")
    ap.add_argument("--json", help="write the numbers here")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cpu = cpu_info()
    flags = " ".join(f for f in FLAGS if f in cpu.flags) or "-"
    print(f"CPU: {cpu.model}, flags: {flags}; torch {torch.__version__}")
    kv = CHATTTS.gpt.kv_bytes_per_token
    out: dict[str, list[dict]] = {}
    for dtype in DTYPES:
        rows = []
        skel, full = runner(SKELETON, dtype), runner(CHATTTS, dtype)
        elem = next(full.pipe.model.gpt.parameters()).element_size()
        with torch.inference_mode():
            for b in BATCHES:
                host, _ = step_seconds(skel, b, a.steps)
                step, ctx = step_seconds(full, b, a.steps)
                rows.append({"batch": b, "context": ctx, "skeleton_s": host, "chattts_s": step})
                print(
                    f"  {dtype} batch {b}: skeleton {host * 1e3:.2f} ms, chattts {step * 1e3:.1f} ms",
                    flush=True,
                )
        pts = [
            (float(decode_bytes(r["batch"], r["batch"] * r["context"], dtype, kv(elem))),
             float(decode_flops(r["batch"], r["batch"] * r["context"])),
             max(r["chattts_s"] - r["skeleton_s"], 1e-9))
            for r in rows
        ]  # fmt: skip
        for form in FORMS:
            rates = fit(pts, form)
            for i, r in enumerate(rows):
                others = [p for j, p in enumerate(pts) if j != i]
                r[f"{form}_s"] = r["skeleton_s"] + predict(rates, *pts[i][:2], form)
                r[f"{form}_loo_s"] = r["skeleton_s"] + predict(fit(others, form), *pts[i][:2], form)
        out[dtype] = rows
    print()
    print("host + roofline fitted per dtype (error vs chattts; LOO = fitted to the other two batches)")
    print("| dtype | batch | skeleton ms | chattts ms | max form | error | LOO | sum form | error | LOO |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for dtype, rows in out.items():
        for r in rows:
            cells = [f"{r['skeleton_s'] * 1e3:.2f}", f"{r['chattts_s'] * 1e3:.1f}"]
            for form in FORMS:
                err = r[f"{form}_s"] / r["chattts_s"] - 1
                loo = r[f"{form}_loo_s"] / r["chattts_s"] - 1
                cells += [f"{r[f'{form}_s'] * 1e3:.1f}", f"{err:+.0%}", f"{loo:+.0%}"]
            print(f"| {dtype} | {r['batch']} | " + " | ".join(cells) + " |")
    for form in FORMS:
        worst = max(
            abs(r[f"{form}{k}"] / r["chattts_s"] - 1) for v in out.values() for r in v for k in ("_s",)
        )
        loo = max(abs(r[f"{form}_loo_s"] / r["chattts_s"] - 1) for v in out.values() for r in v)
        print(f"{form} form: worst error {worst:.0%}, leave-one-out {loo:.0%} (issue 21 asks for 15%)")
    given = " ".join(itertools.chain.from_iterable((f"--{k}", str(v)) for k, v in vars(a).items() if v))
    print(f"command: flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/host_plus_compute.py {given}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"cpu": cpu.model, "flags": cpu.flags, "points": out}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
