"""bench/results.py: the BenchRun contract read back from disk."""

from __future__ import annotations

import pytest

from ttsperf.errors import UserError


def test_reading_a_run_json_of_another_schema_is_a_user_error(tmp_path):
    from ttsperf.bench.results import BenchRun

    f = tmp_path / "run.json"
    f.write_text('{"schema": "ttsperf.benchrun/0"}', encoding="utf-8")
    with pytest.raises(UserError, match="expected 'ttsperf.benchrun/1'"):
        BenchRun.read(f)
    with pytest.raises(UserError, match="not a readable run.json"):
        BenchRun.read(tmp_path / "missing.json")
