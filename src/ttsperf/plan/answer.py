"""A scenario's answer as a block of lines within a width: what a person reads first.

The card and count with its cost (whose price; the cards meeting it without one), the `ttsperf
serve` command on lines of its own (continued with a backslash, so it pastes whole), the streams
per GPU with their range, what binds, whether the step times are measured or projected, the
cards tied with it, and the `ttsperf bench` command that checks it. It is built from the plan's
`recommended` object; a scenario without one says why in its sentence, wrapped. A sentence in
another language (`plan --lang zh`) gets the same shape from `sentence_lines`: its head as the
title, the rest wrapped in display columns, each command on lines of its own.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

from ttsperf.plan.money import money
from ttsperf.plan.recommend import TIE_RULE
from ttsperf.plan.schema import ScenarioPlan

INDENT = "  "
UNPRICED_NAMED = 3


def command_lines(cmd: str, width: int, indent: str = INDENT) -> list[str]:
    """A shell command within `width`, broken between its flags with ` \\` continuations (a flag
    stays with its value)."""
    tokens: list[str] = []
    for word in cmd.split(" "):
        if tokens and not word.startswith("--") and tokens[-1].startswith("--") and " " not in tokens[-1]:
            tokens[-1] += " " + word  # a flag's value
        else:
            tokens.append(word)
    lines, line = [], indent + tokens[0]
    for tok in tokens[1:]:
        if len(line) + 1 + len(tok) + 2 > width:  # room for " \\" after it
            lines.append(line + " \\")
            line = indent + "    " + tok
        else:
            line += " " + tok
    return [*lines, line]


def answer_lines(sc: ScenarioPlan, width: int = 80) -> list[str]:
    """The block: a title line, then indented lines, each within `width`."""
    load = f"{sc.load['value']:g} " + ("streams" if sc.load["kind"] == "streams" else "req/s")
    title = f"answer, {sc.scenario} ({load}; SLO {sc.slo.spec or 'none'}):"
    rec = sc.recommended

    def wrap(text: str) -> list[str]:
        return textwrap.wrap(text, width, initial_indent=INDENT, subsequent_indent=INDENT + "  ")

    if rec is None:  # no card meets it: the sentence says why
        return [title, *wrap(sc.recommendation.split(": ", 1)[-1])]
    head = f"{rec.gpus_needed} x {rec.gpu}"
    if rec.gpus_needed_range and rec.gpus_needed_range[0] != rec.gpus_needed_range[1]:
        head += f" ({rec.gpus_needed_range[0]}-{rec.gpus_needed_range[1]} over the overhead's range)"
    if rec.usd_per_hour is not None:
        head += ", the cheapest " + (
            "per audio hour" if sc.objective == "usd_per_audio_hour" else "meeting it"
        )
        head += f": {money(rec.usd_per_hour, rec.currency)}/h"
        if rec.usd_per_audio_hour is not None:
            head += f" ({money(rec.usd_per_audio_hour, rec.currency)} per audio hour)"
    lines = [title, *wrap(head)]
    if rec.price:
        lines += wrap(f"price: {rec.price}")
    if rec.unpriced:  # named, up to a few: --json lists them all
        few = rec.unpriced[:UNPRICED_NAMED]
        more = len(rec.unpriced) - len(few)
        lines += wrap(
            f"also meeting it, without a price: {', '.join(few)}"
            + (f" and {more} more (--json lists them)" if more else "")
        )
    if rec.settings is not None:
        lines += command_lines(rec.settings.serve_flags, width)
    streams = sc.load["kind"] == "streams"
    centre, span = (
        (rec.max_streams, rec.max_streams_range) if streams else (rec.max_rate_rps, rec.max_rate_range)
    )
    if centre is not None:
        fmt = "d" if streams else ".3g"
        cap = f"{format(centre, fmt)} {'streams' if streams else 'req/s'} per GPU"
        if span:
            cap += f" ({format(span[0], fmt)}-{format(span[1], fmt)})"
        if rec.binding:
            cap += f", bound by {rec.binding}"
        lines += wrap(cap)
    lines += wrap(
        "measured: step times from a profile of this card"
        if rec.measured
        else "projected, not measured on this card (`ttsperf profile` on it measures it)"
    )
    if rec.projected_now:  # the measurement is of an engine that has changed since
        c, low, high = rec.projected_now
        lines += wrap(f"measured with an earlier engine: today's projects {c:.3g} ({low:g}-{high:g}) per GPU")
    if rec.tied_with:
        lines += wrap(f"tied with {', '.join(rec.tied_with)} ({TIE_RULE}; picked by cost)")
    if rec.check:
        lines += [INDENT + "check it with:", *command_lines(rec.check, width, INDENT + "  ")]
    return lines


# A line may break between two CJK characters, never before closing punctuation nor after opening
_NO_BREAK_BEFORE = set("，。；：、）」』！？,.;:)")
_NO_BREAK_AFTER = set("（「『(")
_SEPARATORS = "；;，,、 "


def cells(text: str) -> int:
    """Display columns: a wide (CJK) character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pieces(text: str) -> list[str]:
    """The text cut where a line may break: at spaces (kept as " ") and between wide characters."""
    out: list[str] = []
    for run in re.findall(r"\s+|\S+", text):
        if run.isspace():
            out.append(" ")
            continue
        part = ""
        for ch in run:
            wide = cells(ch) == 2 or (part and cells(part[-1]) == 2)
            if part and wide and ch not in _NO_BREAK_BEFORE and part[-1] not in _NO_BREAK_AFTER:
                out.append(part)
                part = ""
            part += ch
        out.append(part)
    return out


def wrap_cells(text: str, width: int, first: str = INDENT, rest: str = INDENT + "  ") -> list[str]:
    """`text` in lines of at most `width` display columns (a piece wider than a line stays whole)."""
    lines: list[str] = []
    line, gap = first, False
    for piece in _pieces(text.strip()):
        if piece == " ":
            gap = True
            continue
        join = " " if gap and line.strip() else ""
        if line.strip() and cells(line) + cells(join + piece) > width:
            lines.append(line)
            line, join = rest, ""
        line, gap = line + join + piece, False
    return [*lines, line] if line.strip() else lines


def sentence_lines(text: str, head: str, width: int = 80) -> list[str]:
    """A sentence (plan's answer in another language) as a block like `answer_lines`: `head` and
    the separator after it as the title, then the body wrapped in display columns; a quoted
    command with flags goes on lines of its own with ` \\` continuations, without its quotes and
    the brackets around it, so it pastes whole. A short one (`ttsperf profile`) stays inline."""
    if not text.startswith(head):
        return wrap_cells(text, width, "", INDENT)
    title_end = len(head) + (1 if len(text) > len(head) else 0)
    lines = wrap_cells(text[:title_end], width, "", INDENT)
    parts = re.split(r"`([^`]*)`", text[title_end:])
    before = parts[0]
    for i in range(1, len(parts), 2):
        command, after = parts[i], parts[i + 1]
        if " --" not in command:
            before += f"`{command}`{after}"
            continue
        before, after = before.rstrip("（( "), after.lstrip("）) ")
        while after and after[0] in _SEPARATORS:  # "；" stays with the words it ends
            before, after = before + after[0], after[1:]
        lines += wrap_cells(before, width)
        lines += command_lines(command, width, INDENT + "  ")
        before = after
    return lines + wrap_cells(before, width)
