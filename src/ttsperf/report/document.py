"""What a report says, independent of how it is written: sections of paragraphs, tables and
charts, each section naming the files it came from. `render.py` writes it as HTML and as Markdown."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ttsperf.report.answer import Answer


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Chart:
    name: str  # file stem when written beside report.md, and the element id in the HTML page
    title: str
    svg: str


@dataclass
class Section:
    title: str
    sources: list[Path]
    blocks: list[str | Table | Chart] = field(default_factory=list)

    def say(self, text: str) -> Section:
        self.blocks.append(text)
        return self

    def charts(self) -> list[Chart]:
        return [b for b in self.blocks if isinstance(b, Chart)]


@dataclass
class ScenarioAnswer:
    """A scenario after the first: its sentence, and its box (None when no GPU meets its SLO)."""

    scenario: str
    sentence: str
    box: Answer | None


@dataclass
class Report:
    recommendation: str
    recommendation_source: Path | None
    others: list[ScenarioAnswer]  # every other scenario of the plan, each shown in a box like the first
    sections: list[Section]
    inputs: list[tuple[Path, str]]
    skipped: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what a reader may look for and why it is absent
    answer: Answer | None = None  # the box on top: card, count, setting, cost, range, binding limit
    lead_scenario: str | None = None  # the plan's first scenario, whose sentence is on top; None: no plan

    def scenarios(self) -> list[ScenarioAnswer]:
        """Every planned scenario's sentence and box, the lead one first; none without a plan."""
        if self.lead_scenario is None:
            return []
        return [ScenarioAnswer(self.lead_scenario, self.recommendation, self.answer), *self.others]

    def charts(self) -> list[Chart]:
        return [c for s in self.sections for c in s.charts()]


def num(v: float | None, fmt: str = ".3g", unit: str = "") -> str:
    """A number for a table cell; a missing one is an en dash, never a made-up zero."""
    if v is None:
        return "–"
    return f"{v:{fmt}}{unit}"


def ms(v: float | None) -> str:
    return "–" if v is None else f"{1000 * v:,.0f} ms" if v < 10 else f"{v:,.1f} s"


def mb(v: float | None) -> str:
    return "–" if v is None else f"{v / 1e6:,.1f} MB"
