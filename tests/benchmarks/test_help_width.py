"""A benchmark script's --help fits 80 columns: a docstring shown whole is re-wrapped (written at
the project's line length, 110), its commands kept as written and written to fit."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from _bench_common import HELP_WIDTH, wrap_doc  # noqa: E402

SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def test_prose_and_list_items_are_filled_and_commands_kept():
    doc = (
        "A first paragraph that is long enough to need a second line when it is wrapped to forty.\n"
        "\n"
        "    flock -x /tmp/lock .venv/bin/python benchmarks/x.py --a-long-flag \\\n"
        "        --base /tmp/base\n"
        "\n"
        "1. an item whose words run on past the width of the screen, and then\n"
        "   its own next line;\n"
        "- a dash item with --max-queue 256 in it, a flag that is never broken at its hyphen.\n"
    )
    lines = wrap_doc(doc, 40)
    assert lines[:2] == [
        "A first paragraph that is long enough to",
        "need a second line when it is wrapped to",
    ]
    assert "    flock -x /tmp/lock .venv/bin/python benchmarks/x.py --a-long-flag \\" in lines
    assert "        --base /tmp/base" in lines
    item = lines.index("1. an item whose words run on past the")
    assert lines[item + 1 : item + 3] == ["   width of the screen, and then its own", "   next line;"]
    assert any(line.endswith("--max-queue") or "--max-queue 256" in line for line in lines)
    assert not any(line.endswith("--max-") for line in lines)
    assert all(len(line) <= 40 for line in lines if not line.startswith("    "))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_docstring_shown_whole_fits_80_columns(script: Path):
    source = script.read_text(encoding="utf-8")
    assert "RawDescriptionHelpFormatter" not in source, "use _bench_common.DocHelp: it wraps to 80"
    if "DocHelp" not in source:  # its --help shows the docstring's first line, or none
        return
    doc = ast.get_docstring(ast.parse(source), clean=False)
    assert doc
    wide = [line for line in wrap_doc(doc) if len(line) > HELP_WIDTH + 2]
    assert not wide, f"{script.name}: break these lines of its docstring: {wide}"
