"""`ttsperf report`: the HTML page and report.md from result files (a thin shell over ttsperf.report)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ttsperf.cli.common import print_json, user_errors

if TYPE_CHECKING:
    from ttsperf.report.answer import Answer


@user_errors
def report(
    paths: list[Path] = typer.Argument(
        None,
        metavar="RUN_OR_DIR...",
        help="Result files (run.json, profile.json, plan.json, ...) or folders.",
    ),
    out: Path = typer.Option(
        Path("report.html"), "-o", "--out", help="The HTML page; report.md goes beside it."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
    lang: str = typer.Option(
        None,
        "--lang",
        help="Language of the page: en | zh (default: TTSPERF_LANG, else the locale, else en). "
        "Numbers, units and commands stay as they are.",
    ),
) -> None:
    """One self-contained HTML page (charts inline, no network) and a Markdown copy from any mix of
    bench runs, profiles, plans and demo folders.

    Example: ttsperf report runs/demo runs/bench-4090/run.json -o report.html

    In Chinese: ttsperf report runs/demo --lang zh -o report-zh.html
    """
    from ttsperf.i18n import resolve
    from ttsperf.report import write_report

    w = write_report(list(paths or []), out, resolve(lang))
    if as_json:
        print_json(
            {
                "html": str(w.html),
                "markdown": str(w.markdown),
                "charts": len(w.report.charts()),
                "lang": resolve(lang),
                "recommendation": w.report.recommendation,
                "answer": _answer_json(w.report.answer),  # the lead scenario's box, as before
                "answers": [  # every scenario's, lead first; box null where no GPU meets its SLO
                    {"scenario": sc.scenario, "recommendation": sc.sentence, "box": _answer_json(sc.box)}
                    for sc in w.report.scenarios()
                ],
                "inputs": [{"path": str(p), "kind": k} for p, k in w.report.inputs],
            }
        )
        return
    typer.echo(w.report.recommendation)
    typer.echo(
        f"wrote {w.html} and {w.markdown} ({len(w.report.charts())} charts, "
        f"{len(w.report.inputs)} input files)"
    )


def _answer_json(a: Answer | None) -> dict | None:
    if a is None:
        return None
    return {"scenario": a.scenario, **dict(a.fields), "serve_flags": a.serve_flags, "basis": a.basis}


def register(app: typer.Typer) -> None:
    app.command("report")(report)
