"""Money: the plan's currency, exchange rates with their source and date, and how a cost is printed.

A price keeps the currency it was quoted in; the plan converts it to one currency (`--currency`,
USD by default) at a rate from `data/fx.csv` (`base,quote,rate,read_on,source`: 1 base = rate
quote) or a user's `--fx USD:CNY=7.2`, and says which rate it used. A rate is used both ways
(CNY -> USD divides by the USD,CNY rate).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ttsperf.errors import UserError
from ttsperf.plan import datafile
from ttsperf.plan.datafile import parse_positive, read_rows

SHIPPED_FX = "fx.csv"
FX_COLUMNS: dict[str, tuple[bool, str]] = {
    "base": (True, "text"),
    "quote": (True, "text"),
    "rate": (True, "positive"),
    "read_on": (True, "text"),
    "source": (True, "text"),
}
DEFAULT_CURRENCY = "USD"
CONVERTED = "converted from"  # in a cost's basis when its price was quoted in another currency
SYMBOLS = {"USD": "$"}  # a bare currency sign only where it is unambiguous (¥ is also JPY)


def currency_code(text: str, where: str) -> str:
    """An ISO 4217 code, upper-cased: `cny` -> `CNY`."""
    code = text.strip().upper()
    if not re.fullmatch(r"[A-Z]{3}", code):
        raise UserError(f"{where}: expected a three-letter currency code such as USD or CNY, found {text!r}")
    return code


@dataclass(frozen=True)
class Rate:
    base: str
    quote: str
    rate: float  # 1 base = rate quote
    read_on: str
    source: str

    def label(self) -> str:
        when = f", {self.read_on}" if self.read_on else ""
        return f"1 {self.base} = {self.rate:g} {self.quote} ({self.source}{when})"


@dataclass
class Rates:
    """The exchange rates a plan may use, and where they were read."""

    by_pair: dict[tuple[str, str], Rate]
    label: str

    def convert(self, amount: float, frm: str, to: str, where: str) -> tuple[float, Rate | None]:
        """`amount` in `frm` -> in `to`, with the rate used (None: same currency)."""
        if frm == to:
            return amount, None
        if (frm, to) in self.by_pair:
            r = self.by_pair[(frm, to)]
            return amount * r.rate, r
        if (to, frm) in self.by_pair:
            r = self.by_pair[(to, frm)]
            return amount / r.rate, r
        raise UserError(
            f"{where}: priced in {frm}, planned in {to}, and no {frm}/{to} exchange rate in "
            f"{self.label}: pass --fx {frm}:{to}=RATE (1 {frm} = RATE {to}) or --currency {frm}"
        )


def load_rates(path: Path | None = None, flags: list[str] | None = None) -> Rates:
    """The shipped data/fx.csv (or `path`), with `--fx BASE:QUOTE=RATE` flags over it."""
    by_pair: dict[tuple[str, str], Rate] = {}
    none_shipped = path is None and not datafile.data_files().joinpath(SHIPPED_FX).is_file()
    label = f"ttsperf/data ({SHIPPED_FX} not shipped)" if none_shipped else ""
    if not none_shipped:
        label, rows = read_rows(path, SHIPPED_FX, FX_COLUMNS)
        for _, line, r in rows:
            where = f"{label}: line {line}"
            base, quote = (
                currency_code(str(r["base"]), f"{where}: field 'base'"),
                currency_code(str(r["quote"]), f"{where}: field 'quote'"),
            )
            by_pair[(base, quote)] = Rate(base, quote, float(r["rate"]), str(r["read_on"]), str(r["source"]))  # type: ignore[arg-type]
    for flag in flags or []:
        rate = parse_fx_flag(flag)
        by_pair.pop((rate.quote, rate.base), None)  # the user's rate replaces the shipped one both ways
        by_pair[(rate.base, rate.quote)] = rate
        label += f" + --fx {flag!r}"
    return Rates(by_pair, label)


def parse_fx_flag(text: str) -> Rate:
    """`--fx USD:CNY=7.2` -> 1 USD = 7.2 CNY, the user's rate."""
    m = re.fullmatch(r"\s*([A-Za-z]{3})\s*[:/]\s*([A-Za-z]{3})\s*=\s*(\S+)\s*", text)
    if not m:
        raise UserError(
            f"--fx: expected BASE:QUOTE=RATE (1 BASE = RATE QUOTE, e.g. USD:CNY=7.2), found {text!r}"
        )
    rate = parse_positive(m.group(3), f"--fx {text!r}: rate")
    return Rate(m.group(1).upper(), m.group(2).upper(), rate, "", "user --fx")


def amount(x: float) -> str:
    """A cost in 3 significant figures (whole units from 100 up): 0.00330, 1.23, 12.3, 1,235."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:,.{decimals}f}"


def unit(currency: str) -> str:
    """A column header's currency: `$` for USD, else the code (`CNY/h`)."""
    return SYMBOLS.get(currency, currency)


def money(x: float | None, currency: str) -> str:
    """`$1.23` for USD, `CNY 1.23` for the rest; `-` for no figure."""
    if x is None:
        return "-"
    sign = SYMBOLS.get(currency)
    return f"{sign}{amount(x)}" if sign else f"{currency} {amount(x)}"
