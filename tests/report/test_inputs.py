"""The reader: what it finds in files and folders, and the one-line errors for everything else."""

from __future__ import annotations

import json
import shutil

import pytest

from ttsperf.errors import UserError
from ttsperf.report.inputs import read_inputs


def test_a_folder_yields_every_kind_and_skips_other_json(results, tmp_path):
    shutil.copytree(results, tmp_path / "r")
    (tmp_path / "r" / "notes.json").write_text('{"hello": 1}')
    inputs = read_inputs([tmp_path / "r"])
    assert [len(x) for x in (inputs.bench, inputs.profiles, inputs.plans, inputs.optimizations)] == [
        1,
        1,
        1,
        1,
    ]
    assert inputs.bench[0][0].name == "run.json" and inputs.bench[0][1].points
    assert any("notes.json: not a ttsperf result" in s for s in inputs.skipped)


def test_files_named_twice_or_inside_a_named_folder_are_read_once(results):
    inputs = read_inputs([results, results / "plan.json", results / "plan.json"])
    assert len(inputs.plans) == 1


def test_a_demo_summary_is_recognised(results, tmp_path):
    summary = {"out_dir": "runs/demo", "recommendations": {}, "config": "tiny", "device": "cpu"}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert read_inputs([tmp_path / "summary.json"]).demos[0][1]["config"] == "tiny"


def _error(paths) -> str:
    with pytest.raises(UserError) as exc:
        read_inputs(paths)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_missing_path(tmp_path):
    msg = _error([tmp_path / "nope"])
    assert str(tmp_path / "nope") in msg and "no such file or directory" in msg


def test_empty_directory_and_a_folder_without_results(tmp_path):
    (tmp_path / "empty").mkdir()
    assert "holds no result files" in _error([tmp_path / "empty"])
    assert _error([tmp_path / "empty"]).startswith(f"no runs in {tmp_path / 'empty'}: ")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "package.json").write_text('{"name": "x"}')
    assert "holds no result files" in _error([tmp_path / "other"])


def test_no_paths():
    assert "at least one" in _error([])


def test_unknown_json_names_the_file_and_what_it_is(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"schema": "something.else", "a": 1}))
    msg = _error([f])
    assert (
        str(f) in msg and "not a ttsperf result" in msg and "'something.else'" in msg and "bench run" in msg
    )


def test_non_json_and_binary_files(tmp_path):
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    assert "not JSON" in _error([txt])
    wav = tmp_path / "demo.wav"
    wav.write_bytes(b"RIFF\xff\xfe\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\xbb")
    msg = _error([wav])
    assert str(wav) in msg and "binary" in msg


def test_an_unknown_schema_version_is_refused(results, tmp_path):
    run = json.loads((results / "bench" / "run.json").read_text())
    run["schema"] = "ttsperf.benchrun/2"
    (tmp_path / "run.json").write_text(json.dumps(run))
    msg = _error([tmp_path / "run.json"])
    assert "ttsperf.benchrun/2" in msg and "reads ttsperf.benchrun/1" in msg


def test_results_of_different_schema_versions_are_refused_together(results, tmp_path):
    prof = json.loads((results / "profile.json").read_text())
    prof["version"] = 4  # a future version beside the one this ttsperf writes
    (tmp_path / "new.json").write_text(json.dumps(prof))
    msg = _error([results / "profile.json", tmp_path / "new.json"])
    assert "different schema versions" in msg and "profile.json" in msg and "new.json" in msg


def test_a_version_1_profile_reads_beside_a_version_3_one(results, tmp_path):
    """Version 1 is version 3 without max_batch and modes (plan reads both), so the report takes both."""
    prof = json.loads((results / "profile.json").read_text())
    assert prof["version"] == 3
    prof["version"] = 1
    prof.pop("max_batch", None)
    (tmp_path / "old.json").write_text(json.dumps(prof))
    inputs = read_inputs([results / "profile.json", tmp_path / "old.json"])
    assert len(inputs.profiles) == 2


def test_a_known_schema_with_a_broken_field_names_the_field(results, tmp_path):
    plan = json.loads((results / "plan.json").read_text())
    plan["scenarios"][0]["rows"][0]["max_batch"] = "many"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    msg = _error([tmp_path / "plan.json"])
    assert str(tmp_path / "plan.json") in msg and "max_batch" in msg
