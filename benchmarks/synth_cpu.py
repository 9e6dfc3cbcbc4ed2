"""ttsperf's ChatTTS vs the official package: one 5-second synthesis on this machine's CPU.

    make conformance   # once: the venv with the official package (.venv-conformance)
    .venv/bin/python benchmarks/synth_cpu.py --repeats 3

Both implementations load the same random chattts-size weights (an asset dir written by ttsperf),
synthesize the guide's sentence for exactly 234 decode steps (5.0 s of audio; the length is fixed
because random weights never emit EOS) with the official default sampling (temperature 0.3,
top-p 0.7, top-k 20, repetition penalty 1.05), then run Decoder + Vocos. Each variant runs in
its own process: load, one short warm-up, then `--repeats` timed runs; the table gives medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = 234  # round(5.0 s x 46.875 steps/s)
TEXT = "你好，这是一段用于压测的文本，长度八秒左右。"


def run_ours(assets: str, dtype: str, repeats: int, threads: int) -> dict:
    import torch

    from ttsperf.model.config import CHATTTS
    from ttsperf.model.pipeline import Pipeline

    torch.set_num_threads(threads)
    pipe = Pipeline.from_assets(CHATTTS, assets, dtype=dtype)

    def once(steps: int) -> tuple[float, float, int]:
        t0 = time.perf_counter()
        gen = pipe.generate([TEXT], fixed_steps=[steps])[0]
        t1 = time.perf_counter()
        wav = pipe.vocode(pipe.mel(gen))
        return t1 - t0, time.perf_counter() - t1, len(wav)

    once(10)
    return _collect([once(STEPS) for _ in range(repeats)])


def run_official(assets: str, repeats: int, threads: int) -> dict:
    import logging

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    sys.path.insert(0, str(ROOT / "conformance"))
    from run import official_generate, official_modules  # the conformance check's own code

    from ttsperf.model.config import CHATTTS

    logging.getLogger("official").setLevel(logging.ERROR)
    torch.set_num_threads(threads)
    off = official_modules(CHATTTS, Path(assets))

    @torch.inference_mode()
    def once(steps: int) -> tuple[float, float, int]:
        t0 = time.perf_counter()
        result = official_generate(CHATTTS, off, TEXT, steps, 0.3)
        t1 = time.perf_counter()
        wav = off["vocos"].decode(off["decoder"](result.hiddens[0].T.unsqueeze(0).clone()))
        return t1 - t0, time.perf_counter() - t1, int(wav.shape[-1])

    once(10)
    return _collect([once(STEPS) for _ in range(repeats)])


def _collect(runs: list[tuple[float, float, int]]) -> dict:
    gpt = [r[0] for r in runs]
    dec = [r[1] for r in runs]
    total = [a + b for a, b, _ in runs]
    return {
        "runs": len(runs),
        "samples": runs[0][2],
        "wall_median": statistics.median(total),
        "wall_min": min(total),
        "wall_max": max(total),
        "gpt_median": statistics.median(gpt),
        "decoder_vocoder_median": statistics.median(dec),
    }


def child(args) -> None:
    if args.impl == "official":
        result = run_official(args.assets, args.repeats, args.threads)
    else:
        result = run_ours(args.assets, args.impl.split(":")[1], args.repeats, args.threads)
    print("RESULT " + json.dumps(result))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default="official,ours:fp32,ours:bf16")
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    ap.add_argument("--assets", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.impl:
        child(args)
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    from ttsperf.model.assets import make_random_assets

    pythons = {"official": ROOT / ".venv-conformance" / "bin" / "python", "ours": Path(sys.executable)}
    if not pythons["official"].exists() and "official" in args.variants:
        print("the official package's venv is missing: run `make conformance` first", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        assets = make_random_assets(Path(tmp) / "asset", "chattts", seed=0)
        for variant in args.variants.split(","):
            py = pythons[variant.split(":")[0]]
            env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
            cmd = [
                str(py),
                __file__,
                "--impl",
                variant,
                "--assets",
                str(assets),
                "--repeats",
                str(args.repeats),
                "--threads",
                str(args.threads),
            ]
            print(f"running {variant} ...", file=sys.stderr, flush=True)
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            rows.append((variant, json.loads(line[7:])))
    base = dict(rows).get("official")
    audio = STEPS / 46.875
    print(
        f"\nChatTTS synthesis, {STEPS} steps = {audio:.2f} s of audio, random chattts-size weights, "
        f"{args.threads} threads, median of {args.repeats}"
    )
    print(
        f"{'variant':<14}{'wall s':>9}{'min':>8}{'max':>8}{'GPT s':>8}{'dec+voc s':>10}"
        f"{'ms/step':>9}{'RTF':>7}{'vs official':>13}"
    )
    for variant, r in rows:
        ratio = f"{base['wall_median'] / r['wall_median']:.2f}x" if base else "-"
        print(
            f"{variant:<14}{r['wall_median']:>9.2f}{r['wall_min']:>8.2f}{r['wall_max']:>8.2f}"
            f"{r['gpt_median']:>8.2f}{r['decoder_vocoder_median']:>10.2f}"
            f"{1000 * r['gpt_median'] / STEPS:>9.1f}{r['wall_median'] / audio:>7.2f}{ratio:>13}"
        )
    print(
        "\ncommand: .venv/bin/python benchmarks/synth_cpu.py "
        f"--repeats {args.repeats} --threads {args.threads}"
    )
    print(f"machine: {os.cpu_count()} CPUs, load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
