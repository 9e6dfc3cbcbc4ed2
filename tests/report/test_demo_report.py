"""The demo writes the report at the end, and Ctrl-C in a stage leaves a report of what finished."""

from __future__ import annotations

import json

from ttsperf.report.inputs import read_inputs


def test_ctrl_c_during_serving_leaves_a_report_of_the_finished_stages(partial_demo):
    summary = json.loads((partial_demo / "summary.json").read_text())
    assert summary["interrupted"] == "Ctrl-C during serving and load-testing"
    assert "audio_seconds" in summary and "bench_points" not in summary and summary["recommendations"] == {}
    html = (partial_demo / "report.html").read_text()
    assert "Model profile: tiny fp32" in html and 'id="chart-memory_' in html and 'id="chart-step_' in html
    assert "interrupted (Ctrl-C)" in html and "no plan (" in html and "no bench run (" in html
    assert (partial_demo / "report.md").is_file()
    out = (partial_demo / "output.txt").read_text()
    assert "recommendation: No plan among the inputs" in out and str(partial_demo / "report.html") in out
    assert "interrupted (Ctrl-C during serving and load-testing)" in out
    # the folder itself is a valid report input: profile and summary, nothing stale
    inputs = read_inputs([partial_demo])
    assert len(inputs.profiles) == 1 and len(inputs.demos) == 1 and not inputs.plans and not inputs.bench


def test_a_rerun_clears_the_previous_results_first(tmp_path):
    from ttsperf.cli.demo import PREVIOUS, _clear_previous

    for name in PREVIOUS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    _clear_previous(tmp_path)
    assert not any((tmp_path / name).exists() for name in PREVIOUS)
