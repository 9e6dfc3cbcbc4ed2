"""ttsperf.i18n: every English string a reader sees has its translation in every shipped catalog,
with the same {fields}; the catalog is read by stdlib gettext; the language comes from the flag,
TTSPERF_LANG or the locale."""

from __future__ import annotations

import gettext
import re
import shutil
import subprocess

import pytest

from ttsperf.errors import UserError
from ttsperf.i18n import (
    _,
    catalog_text,
    current,
    extract,
    languages,
    parse_po,
    resolve,
    to_mo,
    translations,
    use,
)

FIELD = re.compile(r"\{(\w*)[^}]*\}")
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(params=[lang for lang in languages() if lang != "en"])
def lang(request) -> str:
    return request.param


def test_the_source_has_strings_from_the_report_and_the_plan_answer():
    where = {f for files in extract().values() for f in files}
    assert {"ttsperf/report/render.py", "ttsperf/report/answer.py", "ttsperf/report/sentence.py"} <= where
    assert len(extract()) > 150  # the whole report, not a sample


def test_every_english_string_has_its_translation_with_the_same_fields(lang):
    catalog = parse_po(catalog_text(lang))
    source = extract()
    missing = [s for s in source if not catalog.get(s)]
    assert missing == [], f"{lang}.po lacks {len(missing)}: {missing[:5]}"
    stale = [s for s in catalog if s and s not in source]
    assert stale == [], f"{lang}.po has strings the source no longer uses: {stale[:5]}"
    for msgid in source:
        assert sorted(FIELD.findall(msgid)) == sorted(FIELD.findall(catalog[msgid])), msgid


def test_the_chinese_catalog_is_chinese():
    catalog = parse_po(catalog_text("zh"))
    worded = [s for s in catalog if s and len(re.findall(r"[a-z]{3,}", FIELD.sub("", s))) >= 2]
    untranslated = [s for s in worded if not HAN.search(catalog[s])]
    # a label that is a name in both languages (max batch, profile) may stay; a sentence may not
    assert all(len(FIELD.sub("", s).split()) <= 2 for s in untranslated), untranslated


def test_gettext_reads_the_catalog_compiled_in_memory(lang):
    catalog = parse_po(catalog_text(lang))
    t = gettext.GNUTranslations(__import__("io").BytesIO(to_mo(catalog)))
    assert all(t.gettext(k) == v for k, v in catalog.items() if k)
    assert t.info()["language"] == lang


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext's msgfmt not installed")
def test_gnu_msgfmt_accepts_the_catalog_and_reads_it_the_same(lang, tmp_path):
    po = tmp_path / f"{lang}.po"
    po.write_text(catalog_text(lang), encoding="utf-8")
    subprocess.run(["msgfmt", "--check-format", "-o", str(tmp_path / "m.mo"), str(po)], check=True)
    theirs = gettext.GNUTranslations((tmp_path / "m.mo").open("rb"))
    assert theirs._catalog == translations(lang)._catalog  # noqa: SLF001 - the two compilers agree


def test_use_switches_the_language_and_restores_it():
    assert _("cost") == "cost" and current() == "en"
    with use("zh"):
        assert _("cost") == "成本" and current() == "zh"
        with use("en"):
            assert _("cost") == "cost"
        assert _("cost") == "成本"
    assert _("cost") == "cost"


def test_resolve_reads_the_flag_then_ttsperf_lang_then_the_locale(monkeypatch):
    for var in ("TTSPERF_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    assert resolve(None) == "en"
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert resolve(None) == "zh"
    monkeypatch.setenv("LC_ALL", "C.UTF-8")  # LC_ALL, when set, decides (as for gettext)
    assert resolve(None) == "en"
    monkeypatch.setenv("TTSPERF_LANG", "zh")
    assert resolve(None) == "zh" and resolve("en") == "en" and resolve("zh-CN") == "zh"
    monkeypatch.setenv("TTSPERF_LANG", "klingon")
    with pytest.raises(UserError, match="TTSPERF_LANG 'klingon': expected one of en, zh"):
        resolve(None)
    with pytest.raises(UserError, match="--lang 'fr': expected one of en, zh"):
        resolve("fr")


def test_a_broken_catalog_line_is_named():
    with pytest.raises(ValueError, match="line 2: expected msgid, msgstr or a quoted string"):
        parse_po('msgid "a"\nmsgstr oops\n')
    assert parse_po('# c\nmsgid ""\n"a"\n"b"\nmsgstr "x\\"y"\n') == {"ab": 'x"y'}
