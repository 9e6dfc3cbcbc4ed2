"""Progress on a terminal and through a pipe (ttsperf.console.progress)."""

from __future__ import annotations

from rich.progress import Progress

from ttsperf.console import Lines, progress


def test_a_pipe_gets_whole_lines_and_a_transient_task_says_nothing(capsys):
    with progress() as bar:  # pytest's captured stdout is no terminal
        assert isinstance(bar, Lines)
        task = bar.add_task("3/5 profiling this device", total=None)
        bar.update(task, completed=1)
        bar.update(task, description="3/5 profiling: decode steps")
        bar.update(task, description="3/5 profiling: decode steps")
    with progress(transient=True) as bar:
        bar.update(bar.add_task("decoding", total=None), completed=5, total=9)
    assert capsys.readouterr().out == "3/5 profiling this device\n3/5 profiling: decode steps\n"


def test_disabled_is_rich_s_own_and_silent(capsys):
    with progress(disable=True) as bar:
        assert isinstance(bar, Progress)
        bar.add_task("never shown")
    assert capsys.readouterr().out == ""
