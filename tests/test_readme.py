"""The README's command table: every example either runs here as written (in a scratch folder,
exiting as documented) or is run by the test named beside it. A new example with neither fails."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
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


def _run(example: str, cwd: Path) -> subprocess.CompletedProcess:
    args = shlex.split(example)[1:]
    return subprocess.run(
        [sys.executable, "-m", "ttsperf", *args], cwd=cwd, capture_output=True, text=True, timeout=900
    )


def test_every_example_is_run_here_or_by_a_named_test():
    here = {"info", "assets", "synth", "plan"}
    assert set(EXAMPLES) == here | set(ELSEWHERE), sorted(EXAMPLES)
    for command, (path, marker) in ELSEWHERE.items():
        assert marker in (ROOT / path).read_text(encoding="utf-8"), (command, path)


def test_info_example(tmp_path):
    r = _run(EXAMPLES["info"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "279,657,740" in r.stdout  # the parameters the README's table says info counts


def test_assets_example(tmp_path):
    r = _run(EXAMPLES["assets"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "asset" / "gpt" / "config.json").is_file()


@pytest.mark.slow
def test_synth_example(tmp_path):
    r = _run(EXAMPLES["synth"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.wav").read_bytes()[:4] == b"RIFF"


@pytest.mark.slow
def test_plan_example(tmp_path):
    from tests.plan.conftest import make_profile

    (tmp_path / "profile.json").write_text(json.dumps(make_profile(device="RTX 4090").dump()))
    example = EXAMPLES["plan"]
    assert "--profile profile.json" in example
    r = _run(example, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "RTX 4090 (fit)" in r.stdout and r.stdout.startswith("answer, realtime (")  # the answer first


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
