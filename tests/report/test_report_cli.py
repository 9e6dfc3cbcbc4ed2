"""`ttsperf report` as a user runs it: files written, one-line errors with exit code 2, no torch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser

from typer.testing import CliRunner

from ttsperf.cli.main import app


def _run(*args):
    return CliRunner().invoke(app, ["report", *map(str, args)])


class _Charts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.figures, self.svgs, self.external = 0, 0, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.figures += tag == "figure" and "chart" in (a.get("class") or "")
        self.svgs += tag == "svg"
        for key in ("src", "href"):
            if a.get(key) and not a[key].startswith(("data:", "#")):
                self.external.append(a[key])


def test_report_writes_a_self_contained_page_and_markdown(results, tmp_path):
    out = tmp_path / "out" / "report.html"
    res = _run(results, "-o", out)
    assert res.exit_code == 0, res.output
    plan = json.loads((results / "plan.json").read_text())
    assert res.output.splitlines()[0] == plan["scenarios"][0]["recommendation"]
    html = out.read_text()
    parser = _Charts()
    parser.feed(html)
    assert parser.figures == parser.svgs >= 7 and parser.external == []
    assert "default-src 'none'" in html  # the browser refuses any load, so the page cannot use the network
    md = (tmp_path / "out" / "report.md").read_text()
    assert md.startswith("# ttsperf report\n\n**" + plan["scenarios"][0]["recommendation"])
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(links) == parser.figures and all((tmp_path / "out" / link).is_file() for link in links)
    assert "| load | n | ok |" in md and str(results / "plan.json") in md


def test_report_json_output(results, tmp_path):
    res = _run(results / "bench" / "run.json", results / "profile.json", "-o", tmp_path / "r.html", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["html"] == str(tmp_path / "r.html") and {i["kind"] for i in out["inputs"]} == {
        "bench run",
        "profile",
    }
    assert out["recommendation"].startswith("No plan among the inputs")
    assert out["answer"] is None  # no plan: no box
    res = _run(results, "-o", tmp_path / "p.html", "--json")
    answer = json.loads(res.stdout)["answer"]
    plan = json.loads((results / "plan.json").read_text())["scenarios"][0]
    rec = plan["recommended"]
    assert answer["scenario"] == plan["scenario"] and answer["card"].startswith(
        f"{rec['gpus_needed']} x {rec['gpu']}"
    )
    assert f"{rec['gpus_needed']} x {rec['gpu']} at" in plan["recommendation"]
    assert [a["scenario"] for a in json.loads(res.stdout)["answers"]] == [plan["scenario"]]


def test_report_json_gives_every_scenarios_answer(every_scenario, tmp_path):
    """--json carries each scenario's sentence and box, in the plan's order, not the first alone."""
    res = _run(every_scenario, "-o", tmp_path / "r.html", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    scenarios = json.loads((every_scenario / "plan.json").read_text())["scenarios"]
    assert [a["scenario"] for a in out["answers"]] == [sc["scenario"] for sc in scenarios]
    assert len(scenarios) == 3 and out["answers"][0]["box"] == out["answer"]
    for got, sc in zip(out["answers"], scenarios, strict=True):
        assert got["recommendation"] == sc["recommendation"]
        rec = sc["recommended"]
        if rec is None:
            assert got["box"] is None
        else:
            assert got["box"]["card"].startswith(f"{rec['gpus_needed']} x {rec['gpu']}"), got
    no_plan = _run(every_scenario / "bench" / "run.json", "-o", tmp_path / "b.html", "--json")
    assert json.loads(no_plan.stdout)["answers"] == []


def _bad(res, *needles):
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    for n in needles:
        assert n in lines[0]


def test_bad_input_is_one_line_and_exit_2(results, tmp_path):
    _bad(_run(tmp_path / "missing", "-o", tmp_path / "r.html"), "missing", "no such file")
    (tmp_path / "empty").mkdir()
    _bad(_run(tmp_path / "empty", "-o", tmp_path / "r.html"), "empty", "no result files")
    (tmp_path / "x.json").write_text("[1, 2]")
    _bad(_run(tmp_path / "x.json", "-o", tmp_path / "r.html"), "x.json", "not a ttsperf result")
    prof = json.loads((results / "profile.json").read_text())
    prof["version"] = 7
    (tmp_path / "p7.json").write_text(json.dumps(prof))
    _bad(_run(results, tmp_path / "p7.json", "-o", tmp_path / "r.html"), "different schema versions")
    _bad(_run(results, "-o", tmp_path / "r.pdf"), "r.pdf", ".html")
    _bad(_run("-o", tmp_path / "r.html"), "at least one")
    assert not (tmp_path / "r.html").exists()


def test_report_of_an_empty_directory_says_no_runs_in_it(tmp_path, monkeypatch):
    """Issue 35: `ttsperf report emptydir/` as typed, from the folder that holds it."""
    (tmp_path / "emptydir").mkdir()
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["report", "emptydir/"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert r.stderr.startswith("error: no runs in emptydir: the directory holds no result files"), r.stderr
    assert not (tmp_path / "report.html").exists()


def test_report_imports_no_model_engine_server_or_torch():
    code = (
        "import sys, ttsperf.report, ttsperf.cli.report; "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('ttsperf.model', 'ttsperf.engine', "
        "'ttsperf.server', 'ttsperf.bench.runner', 'ttsperf.bench.api', 'ttsperf.profile.measure'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
