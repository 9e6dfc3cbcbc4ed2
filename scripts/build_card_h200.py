"""Build the shipped H200 card profile from the measurements kept in docs/measurements.

    python scripts/build_card_h200.py        # writes src/ttsperf/data/card-h200-sxm.json

The first card ttsperf measured (issue 34): one NVIDIA H200, fp16, `serve --cuda-graphs` as plan
prints it, 2026-12-04. A `ttsperf profile` of that card measured only eager steps, so this profile
is put together, in the same schema, from what the card measured of the engine in the mode it
serves (each figure's `how` names its file):
  - steps: the engine's whole graphed step (decode, sampling, state update, its host read) at batch
    1, 16, 64 and 256, attention padded to the 256-token bucket (gpu_check, tree 3dd0b04);
  - audio calls: the graphed Decoder+Vocos call at 1, 16 and 64 rows (gpu_check, tree 3dd0b04);
  - prefill: the engine's prefill calls as served, from the server's /metrics in the engine-split
    runs (tree 840e404): seconds per call against the prompts in it (zh-8s: 49-token prompts);
  - the engine's host work per turn beyond those timers (emission, compaction, admission, the
    pipe to the front): wall minus prefill, step and audio seconds, per decode step, fitted
    against the batch over the same runs;
  - weights, KV per token and memory peaks: `ttsperf profile --device cuda` on that card.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "docs/measurements/h200-2026-12-04"
SPLIT = ROOT / "docs/measurements/h200-2026-12-04-engine-split"
OUT = ROOT / "src/ttsperf/data/card-h200-sxm.json"
RUNS = ["check-cold", "warm-150", "warm-300", "warm-600", "warm-1000"]  # in the order they ran
PROMPT_TOKENS = 49  # zh-8s's median prompt (X-Prompt-Tokens), as bench recorded it
ENGINE_TREE = "840e404"  # the tree the split runs served: the engine this profile describes
ENGINE_REVISION_MEASURED = 1  # that tree's engine, as ttsperf.revisions.CHANGES names it


def measured(value: float, how: str, n: int | None = None, unit: str = "s") -> dict:
    return {"kind": "measured", "value": value, "unit": unit, "how": how, "spread": None, "n": n}


def metrics(path: Path) -> dict[str, float]:
    out = {}
    for line in path.read_text().splitlines():
        name, _, value = line.rpartition(" ")
        if name and not line.startswith("#"):
            out[name] = float(value)
    return out


def split_runs() -> list[dict]:
    """Per run: prefill calls and seconds, requests, decode steps, step and audio seconds, wall."""
    turn_ms = {}
    for line in (SPLIT / "table.md").read_text().splitlines():
        m = re.match(r"\| (\S+) \((\d+)\) \|", line)
        if m:
            turn_ms[m.group(1)] = float(line.split("|")[11])  # "ms per turn": bench's wall / steps
    before: dict[str, float] = {}
    runs = []
    for name in RUNS:
        now = metrics(SPLIT / f"{name}-metrics.txt")

        def d(key: str, now=now, before=before) -> float:
            return now.get(key, 0.0) - before.get(key, 0.0)

        steps = d("ttsperf_step_seconds_count")
        runs.append({
            "run": name,
            "prefills": d("ttsperf_prefill_seconds_count"),
            "prefill_s": d("ttsperf_prefill_seconds_sum"),
            "requests": d('ttsperf_engine_requests_total{status="ok"}'),
            "steps": steps,
            "batch": d("ttsperf_batch_size_sum") / steps,
            "busy_s": sum(d(f"ttsperf_{k}_seconds_sum") for k in ("prefill", "step", "audio_call")),
            "wall_s": turn_ms[name] * steps / 1000,
        })  # fmt: skip
        before = now
    return runs


def build() -> dict:
    base = json.loads((CARD / "profile-h200-fp16.json").read_text())
    steps = json.loads((CARD / "engine-steps-fp16.json").read_text())
    audio = json.loads((CARD / "audio-call-fp16.json").read_text())
    runs = split_runs()
    src = "docs/measurements/h200-2026-12-04"
    graphed = [s for s in steps if s["variant"] == "cuda_graphs"]
    # the engine the split runs served (ttsperf.revisions): revision 1, the process split; a later
    # change to the engine's host path makes plan label this card's row and project it as well
    base["engine_revision"] = ENGINE_REVISION_MEASURED
    base["steps"] = [
        {
            "batch": s["batch"],
            "context": 256,
            "seconds": measured(
                s["step_ms"] / 1000,
                f"the engine's whole graphed step (decode, sampling, state update, one host read), "
                f"attention padded to the 256-token bucket; 20 steps after 5: {src}/engine-steps-fp16.json",
                n=20,
            ),
        }
        for s in graphed
    ]
    base["audio_calls"] = [
        {
            "rows": a["rows"],
            "seconds": measured(
                a["ms"] / 1000,
                f"the graphed Decoder+Vocos call over streamed chunks: {src}/audio-call-fp16.json",
            ),
        }
        for a in audio
        if a["mode"] == "cuda_graphs"
    ]
    split = "docs/measurements/h200-2026-12-04-engine-split"
    base["prefill"] = [
        {
            "prompt_tokens": round(PROMPT_TOKENS * r["requests"] / r["prefills"]),
            "rows": 1,
            "seconds": measured(
                r["prefill_s"] / r["prefills"],
                f"the engine's prefill call as served ({r['requests'] / r['prefills']:.2f} zh-8s prompts "
                f"of ~{PROMPT_TOKENS} tokens a call, mean of {r['prefills']:.0f} calls; tree "
                f"{ENGINE_TREE}): {split}/{r['run']}-metrics.txt",
                n=int(r["prefills"]),
            ),
        }
        for r in sorted(runs, key=lambda r: r["requests"] / r["prefills"])
    ]
    batch = np.array([r["batch"] for r in runs])
    rest = np.array([(r["wall_s"] - r["busy_s"]) / r["steps"] for r in runs])
    slope, intercept = np.polyfit(batch, rest, 1)
    fit = (
        f"the engine's wall beyond its prefill, step and audio timers per decode step, against the mean "
        f"batch, least squares over the {len(runs)} engine-split runs (tree {ENGINE_TREE}; "
        f"{', '.join(f'{1e3 * x:.2f} ms at {b:.0f}' for x, b in zip(rest, batch, strict=True))}): "
        f"{split}/table.md and *-metrics.txt"
    )
    base["host_per_step_s"] = measured(max(0.0, float(intercept)), "intercept of " + fit, n=len(runs))
    base["host_per_row_step_s"] = measured(max(0.0, float(slope)), "slope of " + fit, n=len(runs))
    base["fixed_step_overhead_s"] = None
    base["achieved_bandwidth_gbs"] = None
    base["max_batch"] = []
    base["runtime"] = {**base["runtime"], "cuda_graphs": True, "tf32": True, "cudnn_benchmark": True}
    base["settings"] = {**base["settings"], "batches": [s["batch"] for s in graphed], "contexts": [256]}
    base["created"] = "2026-12-04T18:52:00Z"
    base["device"]["name"] = "NVIDIA H200"
    return base


def main() -> None:
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
