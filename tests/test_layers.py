"""The layers docs/ARCHITECTURE.md draws, as import-linter contracts (pyproject.toml's [tool.importlinter]):
checked on this tree, and shown to catch a planted break (bench importing the engine, so torch)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import ttsperf

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
SRC = Path(ttsperf.__file__).resolve().parents[1]  # the tree these tests import


def lint_imports(src: Path) -> subprocess.CompletedProcess:
    code = (
        "import sys; from importlinter.cli import lint_imports;"
        f"sys.exit(lint_imports(config_filename={str(PYPROJECT)!r}, no_cache=True, no_logo=True))"
    )
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=src)


def test_every_layer_contract_is_kept():
    out = lint_imports(SRC)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " kept, 0 broken." in out.stdout
    assert "bench talks HTTP only: no model, engine, server, profile or torch KEPT" in out.stdout


def test_a_planted_import_breaks_the_bench_contract(tmp_path):
    skip = shutil.ignore_patterns("__pycache__", "data")
    shutil.copytree(SRC / "ttsperf", tmp_path / "ttsperf", ignore=skip)
    texts = tmp_path / "ttsperf" / "bench" / "texts.py"
    texts.write_text(texts.read_text(encoding="utf-8") + "\nfrom ttsperf.engine import switches\n")
    out = lint_imports(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "bench talks HTTP only: no model, engine, server, profile or torch BROKEN" in out.stdout
    assert "ttsperf.bench.texts -> ttsperf.engine.switches" in out.stdout
    assert "ttsperf.engine.switches -> torch" in out.stdout  # indirect: bench reaches torch through it
