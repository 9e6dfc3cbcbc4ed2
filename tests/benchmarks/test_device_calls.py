"""benchmarks/device_calls.py counts, on the meta device, what the engine asks of a GPU on its
critical path. Its counts are the issue 33 figures in docs/PERFORMANCE.md, so they are checked
here: a step read one step ahead has no host read on the critical path, a step read at once has
one, the graphed prefill makes no blocking copy and no read, and rows leave in a few copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "device_calls.py"


@pytest.fixture(scope="module")
def counts() -> dict[str, dict]:
    """The script's own command, with --json: mode -> part -> counts, for this tree."""
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--json"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])["this tree"]


@pytest.mark.parametrize("graphs", [False, True])
def test_one_step_ahead_takes_the_steps_read_off_the_critical_path(counts, graphs):
    parts = counts["graphs" if graphs else "eager"]
    at_once, ahead = parts["step 8"], parts["step 8 ahead"]
    assert (at_once["reads"], at_once["critical"]) == (1, 1)
    assert (ahead["reads"], ahead["critical"]) == (1, 0)
    assert ahead["launches"] == at_once["launches"] > 0  # the same step, only read later
    for rows in (1, 8):
        prefill = parts[f"prefill {rows}"]
        assert prefill["reads"] == prefill["blocking"] == 0
    if graphs:  # two replays (the forward, the first codes) and the inputs' copies, whatever the rows
        assert parts["prefill 8"]["launches"] == parts["prefill 1"]["launches"] <= 8
        # a step is its replay and the status: nothing resets the padding rows (their positions
        # stay inside their slots, Rows.last_position)
        assert at_once["launches"] <= 3
    # 4 steps a turn: 4 steps' launches and one status, read off the critical path
    turn = parts["turn of 4"]
    assert (turn["reads"], turn["critical"]) == (1, 0)
    status = 2  # the status made on the device, then copied to the host
    assert turn["launches"] == 4 * (ahead["launches"] - status) + status
    # the turn's audio call is launched, its samples' copy queued: the host reads them next turn
    audio = parts["audio of 4"]
    assert audio["reads"] == audio["blocking"] == 0 and audio["launches"] > 0
    # rows leaving move every layer's K/V and the packed row tensors at once: a few copies, not
    # one per layer and per tensor (109 for chattts's 20 layers before), and no host read
    leave = parts["leave 2 of 8"]
    assert 0 < leave["launches"] <= 16 and leave["reads"] == leave["blocking"] == 0
