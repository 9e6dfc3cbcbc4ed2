"""A Report as one self-contained HTML page (CSS and SVG inline, no script, no network) and as
Markdown for a ticket (charts as SVG files beside it, linked)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from html import escape
from pathlib import Path

from ttsperf import __version__
from ttsperf.i18n import _, current
from ttsperf.report.answer import LABELS, Answer
from ttsperf.report.document import Chart, Report, Table

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans CJK SC", sans-serif;
       margin: 0 auto; max-width: 1320px; padding: 16px 28px; color: #1a1a1a; background: #fff; }
h1 { font-size: 24px; margin-bottom: 4px; }
h2 { font-size: 19px; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 32px; }
.recommendation { font-size: 18px; background: #eef6ee; border-left: 5px solid #2ca02c;
                  padding: 12px 16px; margin: 12px 0; }
.answer { background: #eef6ee; border-left: 5px solid #2ca02c; padding: 10px 16px; margin: 12px 0; }
.answer .recommendation { border: 0; padding: 0; margin: 8px 0 0; font-size: 15px; }
.answer h2 { font-size: 15px; border: 0; margin: 0 0 6px; padding: 0; color: #2a5a2a; }
.answer dl { display: grid; grid-template-columns: max-content auto; gap: 3px 16px; margin: 0;
             font-size: 17px; }
.answer dt { color: #555; }
.answer dd { margin: 0; font-weight: 600; }
.answer .run { margin: 2px 0; }
.meta, .source, .caption { color: #666; font-size: 12.5px; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; margin: 12px 0; }
figure.chart { margin: 0; border: 1px solid #e3e3e3; background: #fff; }
table { border-collapse: collapse; font-size: 13px; margin: 10px 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td { max-width: 520px; }
code { background: #f4f4f4; padding: 0 3px; }
/* A command breaks only between its words: each word (a flag with its value) is one unbreakable
   box, which scrolls inside itself if wider than the page rather than widening the page. */
code.cmd > span { display: inline-block; max-width: 100%; overflow-x: auto; white-space: nowrap;
                  vertical-align: top; }
/* Nothing may make the page wider than the window (800 px): wide tables scroll in their own box,
   charts shrink to fit, and a long word (a path) in prose may break. */
body { overflow-wrap: break-word; }
.table { max-width: 100%; overflow-x: auto; }
figure.chart { max-width: 100%; }
figure.chart svg { display: block; max-width: 100%; height: auto; }
"""


def _from(files: str) -> str:
    return _("from {files}").format(files=files)


def _inputs_table(report: Report) -> Table:
    return Table([_("file"), _("kind")], [[str(p), _(k)] for p, k in report.inputs])


def command(text: str) -> str:
    """A command as <code> that a narrow page wraps only between words, never at a word's hyphen
    ("serve -" / "-device"), each flag kept with its value: one unbreakable span per word or flag
    and value, the spaces between them plain (copied, the command is one line again)."""
    groups: list[list[str]] = []
    for word in text.split():
        last = groups[-1] if groups else []
        if len(last) == 1 and last[0].startswith("-") and not word.startswith("-"):
            last.append(word)  # a flag's value
        else:
            groups.append([word])
    return '<code class="cmd">' + " ".join(f"<span>{escape(' '.join(g))}</span>" for g in groups) + "</code>"


def _inline(text: str) -> str:
    """Escape, then the two bits of Markdown the sections use: **bold** and `code` (a command).
    The code is set aside first: bold may hold code, and code is never read as Markdown."""
    codes: list[str] = []

    def aside(m: re.Match) -> str:
        codes.append(command(m[1]))
        return f"\x00{len(codes) - 1}\x00"

    out = escape(re.sub(r"`(.+?)`", aside, text))
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m[1])], out)


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in t.rows)
    cap = f'<div class="caption">{escape(t.caption)}</div>' if t.caption else ""
    # a wide table scrolls in its own box, never the page (15 columns of a plan at 800 px)
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{cap}'


def _html_chart(c: Chart) -> str:
    return (
        f'<figure class="chart" id="chart-{escape(c.name)}" data-title="{escape(c.title)}">{c.svg}</figure>'
    )


def _html_answer(scenario: str, a: Answer | None, sentence: str, lead: bool) -> str:
    """One scenario's box: its fields, the commands and the sentence; a scenario no GPU meets has
    the sentence alone (it says why). The lead box keeps the ids `answer` and `recommendation`."""
    rows = "".join(f"<dt>{escape(_(LABELS[k]))}</dt><dd>{escape(v)}</dd>" for k, v in a.fields) if a else ""
    cmds = [(_("serve it:"), a.serve_flags), (_("check it:"), a.check)] if a else []
    flags = "".join(f'<div class="run">{escape(say)} {command(c)}</div>' for say, c in cmds if c)
    title = (
        _("The answer: {scenario} ({basis})").format(scenario=scenario, basis=a.basis)
        if a
        else _("The answer: {scenario}").format(scenario=scenario)
    )
    ids = (' id="answer"', ' id="recommendation"') if lead else (f' id="answer-{escape(scenario)}"', "")
    return (
        f'<div class="answer"{ids[0]}><h2>{escape(title)}</h2>{f"<dl>{rows}</dl>" if rows else ""}{flags}'
        f'<p class="recommendation"{ids[1]}>{_inline(sentence)}</p></div>'
    )


def to_html(report: Report) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{current()}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # no network: nothing on this page may load from anywhere, which the browser then enforces
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        f"<title>{escape(_('ttsperf report'))}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{escape(_('ttsperf report'))}</h1>",
        '<div class="meta">'
        + escape(
            _("ttsperf {version}, written {now} from {n} result file(s)").format(
                version=__version__, now=now, n=len(report.inputs)
            )
        )
        + "</div>",
        _html_answer(report.answer.scenario, report.answer, report.recommendation, lead=True)
        if report.answer
        else f'<p class="recommendation" id="recommendation">{_inline(report.recommendation)}</p>',
    ]
    # every other scenario gets a box like the first: a reader compares them side by side
    parts += [_html_answer(o.scenario, o.box, o.sentence, lead=False) for o in report.others]
    if report.recommendation_source:
        parts.append(f'<div class="source">{escape(_from(str(report.recommendation_source)))}</div>')
    for sec in report.sections:
        parts.append(f"<section><h2>{escape(sec.title)}</h2>")
        parts.append(f'<div class="source">{escape(_from(", ".join(str(p) for p in sec.sources)))}</div>')
        charts: list[str] = []
        for block in sec.blocks:
            if isinstance(block, Chart):
                charts.append(_html_chart(block))
                continue
            if charts:
                parts.append(f'<div class="charts">{"".join(charts)}</div>')
                charts = []
            parts.append(_html_table(block) if isinstance(block, Table) else f"<p>{_inline(block)}</p>")
        if charts:
            parts.append(f'<div class="charts">{"".join(charts)}</div>')
        parts.append("</section>")
    parts.append(f"<section><h2>{escape(_('Inputs'))}</h2>")
    parts.append(_html_table(_inputs_table(report)))
    for line in report.missing:
        parts.append(f"<p>{escape(_('Not shown'))} — {_inline(line)}</p>")
    if report.skipped:
        items = "".join(f"<li>{escape(s)}</li>" for s in report.skipped)
        parts.append(
            f"<details><summary>{escape(_('skipped in the directories searched'))} ({len(report.skipped)})"
            "</summary>"
            f'<ul class="source">{items}</ul></details>'
        )
    parts.append("</section></body></html>")
    return "\n".join(parts) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(t: Table) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in t.headers) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines += ["", f"_{t.caption}_"]
    return [*lines, ""]


def _md_answer(a: Answer | None) -> list[str]:
    if a is None:
        return []
    head = [_("the answer: {scenario}").format(scenario=a.scenario), a.basis]
    lines = _md_table(Table(head, [[_(LABELS[k]), v] for k, v in a.fields]))
    lines += [f"{_('serve it:')} `{a.serve_flags}`", ""] if a.serve_flags else []
    return lines + ([f"{_('check it:')} `{a.check}`", ""] if a.check else [])


def to_markdown(report: Report, charts_dir: Path, link_base: str) -> str:
    """Markdown; every chart is written as charts_dir/NAME.svg and linked as link_base/NAME.svg."""
    charts_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"# {_('ttsperf report')}", "", f"**{report.recommendation}**", ""]
    lines += _md_answer(report.answer)
    if report.recommendation_source:
        lines += [f"({_from(f'`{report.recommendation_source}`')})", ""]
    for o in report.others:
        lines += [f"**{o.sentence}**", "", *_md_answer(o.box)]
    for sec in report.sections:
        lines += ["", f"## {sec.title}", "", _from(", ".join(f"`{p}`" for p in sec.sources)), ""]
        for block in sec.blocks:
            if isinstance(block, Chart):
                (charts_dir / f"{block.name}.svg").write_text(block.svg, encoding="utf-8")
                lines += [f"![{block.title}]({link_base}/{block.name}.svg)", ""]
            elif isinstance(block, Table):
                lines += _md_table(block)
            else:
                lines += [block, ""]
    lines += ["", f"## {_('Inputs')}", ""] + _md_table(_inputs_table(report))
    lines += [f"{_('Not shown')} — {line}" for line in report.missing]
    return "\n".join(lines).rstrip() + "\n"
