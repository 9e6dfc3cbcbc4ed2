"""The README's command table: every example either runs in tests/test_docs_run.py as written (in a
scratch folder, exiting as documented, with what it must print or write) or is run by the test named
beside it. A new example with neither fails."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
EXAMPLES = dict(re.findall(r"^\| `([a-z][a-z -]*)` \| `(ttsperf [^`]+)`", README, flags=re.M))

# Examples that need a server, a profile of minutes or a browser: the test that runs each as written.
ELSEWHERE = {
    "serve": ("tests/server/test_serve_cli.py", "--max-batch"),
    "serve --ray": ("tests/server/test_ray_cli.py", "--replicas"),
    "profile": ("tests/profile/test_measure.py", "--contexts"),
    "bench": ("tests/bench/test_bench_cli.py", "test_readme_bench_example_exits_as_documented"),
    "doctor": ("tests/doctor/test_doctor_cli.py", "--url"),
    "export onnx": ("tests/export/test_onnx.py", "onnxruntime"),
    "report": ("tests/report/test_report_cli.py", "report"),
    "demo": ("tests/test_demo.py", "--quick"),
}


def test_every_example_is_run_here_or_by_a_named_test():
    """info, assets, synth and plan run in tests/test_docs_run.py with every other example (each
    once), which checks what these print or write beyond their exit code."""
    from tests.test_docs_run import EXAMPLES as RUN
    from tests.test_docs_run import PRINTS, WRITES

    here = {"info", "assets", "synth", "plan"}
    assert set(EXAMPLES) == here | set(ELSEWHERE), sorted(EXAMPLES)
    for command, (path, marker) in ELSEWHERE.items():
        assert marker in (ROOT / path).read_text(encoding="utf-8"), (command, path)
    run = {ex.command for ex in RUN}
    assert {EXAMPLES[c] for c in here} <= run
    assert {EXAMPLES["info"], EXAMPLES["plan"]} <= set(PRINTS) and EXAMPLES["assets"] in WRITES
    assert " -o out.wav" in EXAMPLES["synth"]  # a WAV every -o check opens


@pytest.mark.parametrize("command", sorted(ELSEWHERE))
def test_the_named_test_runs_the_example_as_written(command):
    """The example's distinctive flags appear in the test that stands for it."""
    path, _ = ELSEWHERE[command]
    text = (ROOT / path).read_text(encoding="utf-8")
    flags = [a for a in shlex.split(EXAMPLES[command]) if a.startswith("--")]
    missing = [f for f in flags if f.strip("-") not in text and f not in text]
    assert not missing, (command, missing)


def test_the_cheap_readme_samples_are_what_the_commands_print():
    """The README's output samples are written by scripts/readme_samples.py, never typed: the ones a
    test can afford to rerun (`info`: counted on the meta device) must be current."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from readme_samples import regenerate
    finally:
        sys.path.pop(0)
    _, stale = regenerate(README, only="info")
    assert not stale, f"run: python scripts/readme_samples.py ({stale})"
