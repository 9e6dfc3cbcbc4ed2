"""The report and plan's answer in Chinese (`--lang zh`): the words change, never a number; and the
answer box carries the centre streams per GPU and $/h, costs to 3 significant figures."""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser

from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.i18n import use
from ttsperf.plan.answer import cells as columns
from ttsperf.report.answer import answer, money
from ttsperf.report.inputs import read_inputs
from ttsperf.report.sentence import sentence

HAN = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


class _Cells(HTMLParser):
    """The text of every heading, table cell and answer row, in page order."""

    TAGS = ("h1", "h2", "th", "td", "dt", "dd")

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str]] = []
        self._open: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag in self.TAGS:
            self._open = tag
            self.cells.append((tag, ""))

    def handle_endtag(self, tag):
        if tag == self._open:
            self._open = None

    def handle_data(self, data):
        if self._open:
            tag, text = self.cells[-1]
            self.cells[-1] = (tag, text + data)


def cells(html: str) -> list[tuple[str, str]]:
    p = _Cells()
    p.feed(html)
    return p.cells


def _report(results, tmp_path, *flags):
    out = tmp_path / ("-".join(flags) or "en") / "r.html"
    res = CliRunner().invoke(app, ["report", str(results), *flags, "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return out, json.loads(res.stdout)


def test_the_chinese_report_has_the_english_reports_numbers_cell_by_cell(results, tmp_path):
    en, _ = _report(results, tmp_path)
    zh, meta = _report(results, tmp_path, "--lang", "zh")
    assert meta["lang"] == "zh"
    en_cells, zh_cells = cells(en.read_text()), cells(zh.read_text())
    assert [t for t, _ in en_cells] == [t for t, _ in zh_cells]  # the same page, cell for cell
    compared = 0
    for (tag, e), (_, z) in zip(en_cells, zh_cells, strict=True):
        assert Counter(NUMBER.findall(e)) == Counter(NUMBER.findall(z)), (tag, e, z)
        compared += bool(NUMBER.search(e))
    assert compared > 100  # the tables, not a handful of cells
    headings = [z for t, z in zh_cells if t in ("h1", "h2", "dt")]
    assert all(HAN.search(h) for h in headings), [h for h in headings if not HAN.search(h)]
    assert '<html lang="zh">' in zh.read_text() and zh.with_suffix(".md").read_text().startswith(
        "# ttsperf 报告"
    )


def test_the_answer_box_has_the_centre_streams_per_gpu_and_dollars_per_hour(results):
    path, plan = read_inputs([results / "plan.json"]).plans[0]
    sc = plan.scenarios[0]
    rec = sc.recommended
    row = next(r for r in sc.rows if r.gpu == rec.gpu)
    fields = dict(answer(path, sc).fields)
    assert fields["per GPU"].startswith(f"{row.max_streams} streams (")
    per_hour, per_audio_hour = money(rec.usd_per_hour), money(rec.usd_per_audio_hour)
    assert fields["cost"] == f"{per_hour}/h for {rec.gpus_needed} GPU(s); {per_audio_hour} per audio hour"
    for amount in re.findall(r"\$([\d,.]+)", fields["cost"]):
        assert len(amount.replace(",", "").replace(".", "").lstrip("0")) <= 3, amount  # no $0.003298
    with use("zh"):
        zh = dict(answer(path, sc).fields)
    assert zh["per GPU"].startswith(f"{row.max_streams} 路") and f"{money(rec.usd_per_hour)}/h" in zh["cost"]


def test_money_keeps_three_significant_figures_without_an_exponent():
    """As plan prints it: 3 significant figures, whole units from 100 up, the plan's currency."""
    assert [money(v) for v in (0.003298, 0.0123, 0.34, 12.345, 1234.6, 0)] == [
        "$0.00330", "$0.0123", "$0.340", "$12.3", "$1,235", "$0",
    ]  # fmt: skip
    assert money(9.74, "CNY") == "CNY 9.74"


def test_the_built_sentence_says_what_plans_own_sentence_says(results):
    """In English the sentence built from the fields carries plan's card, flags, range and check."""
    path, plan = read_inputs([results / "plan.json"]).plans[0]
    for sc in plan.scenarios:
        built, own = sentence(sc), sc.recommendation
        rec = sc.recommended
        assert built.startswith(own.split(":")[0] + ":")  # scenario, SLO and load
        assert f"{rec.gpus_needed} x {rec.gpu}" in built and f"{rec.gpus_needed} x {rec.gpu}" in own
        for part in re.findall(r"`[^`]+`", own):  # serve flags, profile, the bench check
            assert part in built, part
        span = re.search(
            r"\d+ streams per GPU \(\d+-\d+ over the overhead's sourced range(, so \d+-\d+ GPUs)?\)", own
        )
        assert span and span.group(0) in built
        with use("zh"):
            zh = sentence(sc)
        assert HAN.search(zh) and all(part in zh for part in re.findall(r"`[^`]+`", own))


def _command(output: str, start: str) -> str:
    """The command that starts a line, its ` \\` continuations joined: every line but its last
    ends with one."""
    lines = output.splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip().startswith(start))
    words = []
    for line in lines[i:]:
        words.append(line.strip().removesuffix("\\").strip())
        if not line.endswith(" \\"):
            break
    return " ".join(words)


def test_plan_prints_its_answer_in_chinese_with_lang_zh(monkeypatch):
    args = ["plan", "--scenario", "realtime", "--streams", "20", "--gpus", "T4,L4", "--requests", "200"]
    en = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    zh = CliRunner().invoke(app, [*args, "--lang", "zh"], env={"COLUMNS": "80"})
    assert en.exit_code == zh.exit_code == 0, zh.output
    # a block like the English one within 80 display columns (a Chinese character takes two)
    assert max(columns(line) for line in zh.output.splitlines()) <= 80
    en_text, zh_text = (re.sub(r"\s+", "", r.output) for r in (en, zh))
    assert en_text.startswith("answer,realtime(") and "checkitwith:" in en_text
    assert zh_text.startswith("realtime（") and "realtime:realtime" not in zh_text  # the head once
    assert "满足要求的最便宜方案是" in zh_text
    assert "isthecheapestthatmeetsit" not in zh_text and "answer," not in zh_text
    # each command on lines of its own, broken only with a backslash, as English prints it
    for command in ("ttsperf serve", "ttsperf bench"):
        assert _command(zh.output, command) == _command(en.output, command), command
    monkeypatch.setenv("TTSPERF_LANG", "zh")  # the variable, without the flag
    assert "满足要求的最便宜方案是" in re.sub(r"\s+", "", CliRunner().invoke(app, args).output)
    bad = CliRunner().invoke(app, [*args, "--lang", "fr"])
    assert bad.exit_code == 2 and "--lang 'fr': expected one of en, zh" in bad.output


def test_a_plan_without_recommended_gets_its_cheapest_row_in_the_sentence(results):
    """A plan written before plan recorded `recommended`: the sentence names the same card as the box."""
    path, plan = read_inputs([results / "plan.json"]).plans[0]
    sc = plan.scenarios[0].model_copy(update={"recommended": None})
    card = dict(answer(path, sc).fields)["card"]
    with use("zh"):
        zh = sentence(sc)
    gpu = card.split(" x ", 1)[1]
    assert f"满足要求的最便宜方案是 {card.split(' x ')[0]} 张 {gpu}" in zh and "没有显卡满足" not in zh
