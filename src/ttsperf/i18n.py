"""What ttsperf says to a reader (the report, plan's answer) in the reader's language: gettext.

English is the source: every string a reader sees is written in English inside `_()` (or `N_()`
for a constant translated where it is shown). One catalog per other language,
`ttsperf/data/locale/LANG.po`, is the only file a translation needs: it is read when first used
and compiled in memory into stdlib `gettext.GNUTranslations`, so no compiled .mo ships that could
drift from its source. Numbers, units and commands stay outside the strings, as `{name}` fields
the translation keeps.

    with use("zh"):
        print(_("cost"))  # 成本

A third language: `python -m ttsperf.i18n template > LANG.po`, fill in each msgstr, move it to
src/ttsperf/data/locale/. After adding strings to the source, `python -m ttsperf.i18n template zh
> new.po` keeps zh's translations and lists the new strings empty (write another file, then move
it: redirecting onto zh.po would empty it before it is read). tests/test_i18n.py checks that every
string has its translation in every catalog.
"""

from __future__ import annotations

import ast
import contextlib
import gettext
import io
import os
import re
import struct
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from functools import cache
from importlib import resources
from pathlib import Path

from ttsperf.errors import UserError

SOURCE = "en"
LOCALE = "locale"  # ttsperf/data/locale/LANG.po
_current: ContextVar[gettext.NullTranslations | None] = ContextVar("ttsperf_lang", default=None)
_ENGLISH = gettext.NullTranslations()


def languages() -> list[str]:
    """English and every language with a catalog."""
    shipped = resources.files("ttsperf.data").joinpath(LOCALE)
    return [SOURCE, *sorted(p.name.removesuffix(".po") for p in shipped.iterdir() if p.name.endswith(".po"))]


def resolve(lang: str | None = None, where: str = "--lang") -> str:
    """`lang` if given, else TTSPERF_LANG, else the locale's language (LC_ALL, LC_MESSAGES, LANG:
    the first one set decides, as for gettext), else English. `zh_CN.UTF-8` -> zh."""
    if not lang:
        if env := os.environ.get("TTSPERF_LANG"):
            lang, where = env, "TTSPERF_LANG"
        else:
            loc = next((v for k in ("LC_ALL", "LC_MESSAGES", "LANG") if (v := os.environ.get(k))), "")
            code = re.split(r"[_.@-]", loc.lower())[0]
            return code if code in languages() else SOURCE
    code = lang.strip().lower().replace("-", "_").split("_")[0]
    if code not in languages():
        raise UserError(f"{where} {lang!r}: expected one of {', '.join(languages())}")
    return code


def parse_po(text: str) -> dict[str, str]:
    """msgid -> msgstr of a .po file (the header is msgid ""; untranslated entries are kept, empty)."""
    entries: dict[str, str] = {}
    key, parts = None, {"msgid": [], "msgstr": []}

    def flush() -> None:
        if parts["msgid"] or parts["msgstr"]:
            entries["".join(parts["msgid"])] = "".join(parts["msgstr"])
        parts["msgid"], parts["msgstr"] = [], []

    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if m := re.match(r"(msgid|msgstr)\s+(\".*\")$", line):
            if m.group(1) == "msgid":
                flush()
            key, line = m.group(1), m.group(2)
        if key is None or not (line.startswith('"') and line.endswith('"')):
            raise ValueError(f"line {n}: expected msgid, msgstr or a quoted string, got {raw!r}")
        parts[key].append(ast.literal_eval(line))
    flush()
    return entries


def to_mo(entries: dict[str, str]) -> bytes:
    """The GNU .mo bytes of a catalog (what msgfmt writes), for gettext.GNUTranslations."""
    pairs = sorted((k.encode(), v.encode()) for k, v in entries.items() if v)
    ids, strs = b"".join(k + b"\0" for k, _ in pairs), b"".join(v + b"\0" for _, v in pairs)
    start = 7 * 4 + 16 * len(pairs)  # header, then the two (length, offset) tables
    offs, o = [], 0
    for k, _ in pairs:
        offs += [len(k), start + o]
        o += len(k) + 1
    soffs, o = [], 0
    for _, v in pairs:
        soffs += [len(v), start + len(ids) + o]
        o += len(v) + 1
    head = struct.pack("Iiiiiii", 0x950412DE, 0, len(pairs), 7 * 4, 7 * 4 + 8 * len(pairs), 0, 0)
    return head + struct.pack(f"{len(offs)}i", *offs) + struct.pack(f"{len(soffs)}i", *soffs) + ids + strs


def catalog_text(lang: str) -> str:
    return resources.files("ttsperf.data").joinpath(LOCALE, f"{lang}.po").read_text(encoding="utf-8")


@cache
def translations(lang: str) -> gettext.NullTranslations:
    if lang == SOURCE:
        return gettext.NullTranslations()
    return gettext.GNUTranslations(io.BytesIO(to_mo(parse_po(catalog_text(lang)))))


@contextlib.contextmanager
def use(lang: str) -> Iterator[None]:
    """Everything `_()` returns inside the block is in `lang` (a code from `resolve`)."""
    token = _current.set(translations(lang))
    try:
        yield
    finally:
        _current.reset(token)


def current() -> str:
    """The language `_()` speaks now: "en", or the catalog's Language header."""
    return (_current.get() or _ENGLISH).info().get("language", SOURCE)


def _(message: str) -> str:
    return (_current.get() or _ENGLISH).gettext(message)


def N_(message: str) -> str:  # noqa: N802 - gettext's name for "mark for translation, translate later"
    return message


def extract(root: Path | None = None) -> dict[str, list[str]]:
    """Every string literal given to `_()` or `N_()` in ttsperf's source -> the files using it."""
    root = root or Path(__file__).parent
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "_(" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("_", "N_")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                where = found.setdefault(node.args[0].value, [])
                if (name := str(path.relative_to(root.parent))) not in where:
                    where.append(name)  # the file, not the line: lines move with every edit
    return found


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def template(existing: dict[str, str] | None = None) -> str:
    """A .po file for every string in the source, keeping the translations `existing` has."""
    existing = existing or {}
    header = existing.get("", "Content-Type: text/plain; charset=UTF-8\nLanguage: LANG\n")
    out = ['msgid ""', f"msgstr {_quote(header)}", ""]
    for msgid, where in extract().items():
        out += [
            f"#: {' '.join(where)}",
            f"msgid {_quote(msgid)}",
            f"msgstr {_quote(existing.get(msgid, ''))}",
            "",
        ]
    return "\n".join(out)


if __name__ == "__main__":  # python -m ttsperf.i18n template [LANG]: a .po to fill in (or to update)
    if len(sys.argv) < 2 or sys.argv[1] != "template":
        sys.exit("usage: python -m ttsperf.i18n template [LANG]  (prints a .po for LANG, its strings kept)")
    print(template(parse_po(catalog_text(sys.argv[2])) if len(sys.argv) > 2 else None), end="")
