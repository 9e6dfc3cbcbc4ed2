"""The engine's audio call (Decoder+Vocos over `rows` streamed chunks) compiled vs eager, on this CPU.

    flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/audio_compile_cpu.py [--repeats 7]

`ttsperf serve --compile` compiles the call's device part (engine/audio.py BatchedAudio.synthesize,
torch.compile dynamic=True: rows and frames symbolic). Both variants run the engine's own call
(BatchedAudio.decode) on the same model and hidden states, alternating call by call, one torch
thread; medians of --repeats after one warm-up (the compile, timed apart). Columns: wall ms and
host ms (the calling thread's CPU time: on a CPU the two nearly agree, on a GPU host ms is what
the launches cost) for eager and compiled, and the ratio eager / compiled.
`skeleton` measures the call's host work; `chattts` the real widths, where compute dominates.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _bench_common import machine  # noqa: E402

from ttsperf.engine.audio import BatchedAudio  # noqa: E402
from ttsperf.model.config import CHATTTS, SKELETON  # noqa: E402
from ttsperf.model.pipeline import Pipeline  # noqa: E402
from ttsperf.profile.host import audio_steps, audio_windows  # noqa: E402

ROWS = {"skeleton": (1, 16, 64), "chattts": (1, 8)}


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - wall, time.thread_time() - cpu


def measure(cfg, repeats: int) -> list[tuple]:
    pipe = Pipeline.synthetic_model(cfg, seed=0)
    eager, compiled = BatchedAudio(pipe.model, 4), BatchedAudio(pipe.model, 4, compile=True)
    out = []
    for rows in ROWS[cfg.name]:
        wins = audio_windows(eager, rows)
        hidden = torch.randn(
            rows, audio_steps(eager) + 1, cfg.gpt.hidden_size, generator=torch.Generator().manual_seed(0)
        )
        compile_s, _ = timed(lambda: compiled.decode(hidden, wins))  # noqa: B023 - first call: compiles
        eager.decode(hidden, wins)
        same = all(
            torch.allclose(torch.from_numpy(a), torch.from_numpy(b), atol=1e-4)
            for a, b in zip(eager.decode(hidden, wins), compiled.decode(hidden, wins), strict=True)
        )
        e, c = [], []
        for _ in range(repeats):
            e.append(timed(lambda: eager.decode(hidden, wins)))  # noqa: B023
            c.append(timed(lambda: compiled.decode(hidden, wins)))  # noqa: B023
        med = [statistics.median(x[i] for x in s) for s in (e, c) for i in (0, 1)]
        out.append((cfg.name, rows, *med, compile_s, same))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"machine: {machine()}, torch {torch.__version__}, 1 thread")
    print(
        subprocess.run(
            "lscpu | grep -E 'Model name|Flags'", shell=True, capture_output=True, text=True
        ).stdout
    )
    head = "config   rows  eager wall ms  host ms  compiled wall ms  host ms  eager/compiled  compile s  same"
    print(head)
    with torch.inference_mode():
        for cfg in (SKELETON, CHATTTS):
            for name, rows, ew, eh, cw, ch, cs, same in measure(cfg, args.repeats):
                print(
                    f"{name:8} {rows:4} {1e3 * ew:14.1f} {1e3 * eh:8.1f} {1e3 * cw:17.1f} {1e3 * ch:8.1f} "
                    f"{ew / cw:14.2f}x {cs:9.1f}  {'yes' if same else 'NO'}"
                )
    print(
        "command: flock -x /tmp/ttsperf-cpu.lock .venv/bin/python benchmarks/audio_compile_cpu.py "
        f"--repeats {args.repeats}"
    )


if __name__ == "__main__":
    main()
