"""`ttsperf report`: one self-contained HTML page (and report.md) from result files.

Reads result files only (bench runs, profiles, plans, optimisation tables, demo summaries); never
imports the model, engine, server or the bench runtime, so it needs no torch.

    ttsperf report runs/demo -o runs/demo/report.html
    ttsperf report runs/demo --lang zh -o runs/demo/report-zh.html   # in Chinese (ttsperf.i18n)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttsperf.errors import UserError
from ttsperf.i18n import SOURCE, use
from ttsperf.report.build import build_report
from ttsperf.report.document import Report
from ttsperf.report.inputs import read_inputs
from ttsperf.report.render import to_html, to_markdown


@dataclass
class Written:
    report: Report
    html: Path
    markdown: Path
    charts_dir: Path


def write_report(paths: list[str | Path], out: str | Path, lang: str = SOURCE) -> Written:
    """Read `paths`, write `out` (HTML), and `out` with .md beside it (charts in NAME_charts/),
    in `lang` (a code from ttsperf.i18n.resolve: the words change, never a number)."""
    out = Path(out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"-o {out}: expected an .html file name, e.g. report.html")
    inputs = read_inputs(paths)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        md = out.with_suffix(".md")
        charts = out.parent / f"{out.stem}_charts"
        with use(lang):
            report = build_report(inputs)
            out.write_text(to_html(report), encoding="utf-8")
            md.write_text(to_markdown(report, charts, charts.name), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"-o {out}: cannot write: {exc.strerror or exc}") from None
    return Written(report, out, md, charts)
