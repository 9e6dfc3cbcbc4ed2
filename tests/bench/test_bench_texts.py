"""bench/texts.py: workloads and the speech length a text should take."""

from __future__ import annotations

import pytest

from ttsperf.bench.texts import TEXT_SETS, expected_seconds, load_workload
from ttsperf.errors import UserError


def test_workloads_default_builtin_and_files(tmp_path):
    assert load_workload().items[0].text.startswith("你好，这是一段用于压测的文本")
    assert all(len(TEXT_SETS[k]) >= 3 for k in ("zh-short", "zh-long", "en-short", "en-long"))
    j = tmp_path / "t.jsonl"
    j.write_text('{"text": "Hello there.", "voice": "b"}\n\n{"text": "你好"}\n', encoding="utf-8")
    w = load_workload(str(j))
    assert [i.text for i in w.items] == ["Hello there.", "你好"] and w.items[0].extra == {"voice": "b"}
    assert w.describe()["texts"] == 2
    with pytest.raises(UserError, match="unknown set"):
        load_workload(text_set="klingon")
    empty = tmp_path / "e.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(UserError, match="no texts"):
        load_workload(str(empty))


def test_expected_seconds_grows_with_text_at_the_sourced_speech_rates():
    assert expected_seconds("你好，世界。") == pytest.approx(4 / 5.18)  # 4 characters, 5.18 per s
    assert expected_seconds("one two three four five") == pytest.approx(5 / (183 / 60))  # 183 wpm
