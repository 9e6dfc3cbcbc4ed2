"""bench talks HTTP only: it must work against anyone's server, so it loads none of ours. Its source's
imports are checked by import-linter (tests/test_layers.py); these check what importing it loads."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("ttsperf.model", "ttsperf.engine", "ttsperf.server")


def test_the_facts_every_layer_reads_are_torch_free():
    heavy = "('torch', 'numpy')"
    code = f"import sys, ttsperf.facts; print([m for m in sys.modules if m.split('.')[0] in {heavy}])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_importing_bench_and_its_cli_loads_none_of_them():
    code = (
        "import sys, ttsperf.bench.api, ttsperf.bench.mock_server, ttsperf.cli.bench;"
        f"print([m for m in sys.modules if m.startswith({FORBIDDEN!r})])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
