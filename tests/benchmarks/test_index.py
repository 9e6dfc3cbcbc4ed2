"""benchmarks/README.md names every script there (issue 35 item 8), and only scripts that exist."""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_index_names_every_script_once_and_no_other():
    text = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+\.py)` \|", text, flags=re.M)
    named = rows + re.findall(r"^`(_\w+\.py)` is not a benchmark", text, flags=re.M)
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    assert sorted(named) == scripts  # each once: a row per script, the helper in a sentence
    assert all(row.count("|") == 5 for row in text.splitlines() if row.startswith("| `"))
