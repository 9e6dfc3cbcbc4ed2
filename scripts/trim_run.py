"""Trim a bench run.json to what `plan --predict --like` and the tests read, gzipped, for
tests/fixtures (a run's whole file is ~0.6 MB; trimmed and gzipped, ~15 KB).

    python scripts/trim_run.py RUN_DIR OUT.json.gz "NOTE"
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

TOP = ("schema", "tool_version", "created_utc", "targets", "adapter", "config", "workload")
CONFIG = ("users", "ramp_up", "requests", "text_set", "slo", "stream", "timeout", "seed", "think_time")
POINT = (
    "audio_seconds_per_s", "error_examples", "error_rate", "errors", "label", "latency_s", "requests",
    "strategy", "successes", "throughput_rps", "ttfa_s", "underrun_s", "warmup", "window_s",
)  # fmt: skip
RECORD = (
    "audio_s", "error", "expected_audio_s", "i", "point", "prompt_tokens", "server_audio_s", "status",
    "t_end", "t_first_audio", "t_send", "warmup",
)  # fmt: skip


def trim(run: dict, note: str) -> dict:
    out = {k: run[k] for k in TOP if k in run}
    out["config"] = {k: run["config"][k] for k in CONFIG if k in run["config"]}
    out["note"] = note
    out["points"] = [{k: p[k] for k in POINT if k in p} for p in run["points"]]
    out["records"] = [{k: r[k] for k in RECORD if k in r} for r in run["records"]]
    return out


if __name__ == "__main__":
    src, dst, note = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    run = json.loads((src / "run.json").read_text(encoding="utf-8"))
    dst.write_bytes(gzip.compress(json.dumps(trim(run, note)).encode(), mtime=0))
