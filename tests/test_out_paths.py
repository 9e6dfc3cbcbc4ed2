"""Issue 35: where a command writes, as a user types it: an asset dir is not replaced without
--force, and a path it cannot write is one line and exit 2, never a traceback."""

from __future__ import annotations

from typer.testing import CliRunner

from ttsperf.cli.main import app

runner = CliRunner()


def _one_line(args: list[str]) -> str:
    r = runner.invoke(app, args)
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


def test_a_second_make_random_is_refused_without_force(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = runner.invoke(app, ["assets", "make-random", "./asset"])
    assert first.exit_code == 0, first.output
    weights = tmp_path / "asset" / "gpt" / "model.safetensors"
    before, written = weights.read_bytes(), weights.stat().st_mtime_ns
    line = _one_line(["assets", "make-random", "./asset"])  # the same command again
    assert line == "error: asset: already exists and is not empty; give --force to write over it"
    assert weights.stat().st_mtime_ns == written  # not written over
    forced = runner.invoke(app, ["assets", "make-random", "./asset", "--seed", "1", "--force"])
    assert forced.exit_code == 0 and weights.read_bytes() != before, forced.output


def test_make_random_where_nothing_can_be_written_is_one_line():
    line = _one_line(["assets", "make-random", "/proc/nope"])
    assert line == "error: /proc/nope: cannot write (No such file or directory)"


def test_export_onnx_through_a_file_is_one_line_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    line = _one_line(["export", "onnx", "--synthetic", "--config", "tiny", "-o", "afile/x.onnx"])
    assert line == "error: -o afile/x.onnx: afile is a file, not a folder"
    (tmp_path / "adir").mkdir()
    assert "is a folder" in _one_line(["export", "onnx", "--synthetic", "--config", "tiny", "-o", "adir"])
