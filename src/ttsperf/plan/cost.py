"""Rent or own: a bought card's hourly cost = purchase price amortised + electricity.

    per GPU-hour (owned) = purchase / amortisation hours + TDP x busy fraction / 1000 x price per kWh

in the plan's currency (a purchase quoted in another is converted at a sourced rate, and says so).

The busy fraction is the simulated share of time the worker is prefilling, stepping or vocoding
at the card's capacity; a busy card is assumed to draw its TDP and an idle one nothing (no
measured power yet: `bench` reads NVML where a GPU is present). Launch prices of consumer cards
ship in data/purchase.csv with their source; any other purchase price is the user's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ttsperf.errors import UserError
from ttsperf.plan.catalog import resolve_name
from ttsperf.plan.datafile import parse_positive, read_rows
from ttsperf.plan.money import CONVERTED, DEFAULT_CURRENCY, Rates, amount, load_rates, money

SHIPPED_PURCHASES = "purchase.csv"
PURCHASE_COLUMNS: dict[str, tuple[bool, str]] = {
    "gpu": (True, "text"),
    "currency": (True, "text"),
    "price": (True, "positive"),
    "date": (True, "text"),
    "source": (True, "text"),
}
HOURS = {"h": 1.0, "d": 24.0, "m": 730.0, "y": 8760.0}  # a month = 8760 / 12 hours
# The common GPU server: the cloud's 8-GPU machines (AWS p4d/p5, Azure ND A100 v4, GCP a2-highgpu-8g)
# and DGX/HGX boards hold 8 cards; --gpus-per-machine says otherwise (e.g. 4 for a workstation).
DEFAULT_GPUS_PER_MACHINE = 8


def machines_needed(gpus: int, gpus_per_machine: int) -> int:
    """Machines to hold `gpus` cards (a Ray Serve replica per GPU): ceil(gpus / gpus_per_machine)."""
    return math.ceil(gpus / gpus_per_machine)


@dataclass(frozen=True)
class Purchase:
    gpu: str
    price: float  # in the plan's currency
    source: str  # where the price comes from, and the rate when converted


@dataclass(frozen=True)
class Ownership:
    """Cards the team buys instead of renting, and how their cost is spread."""

    purchases: dict[str, Purchase]
    hours: float  # amortisation period
    per_kwh: float | None  # None: electricity left out (and said so)
    currency: str = DEFAULT_CURRENCY  # of the purchases and per_kwh

    def per_gpu_hour(self, gpu: str, watts: float | None) -> tuple[float, str]:
        p = self.purchases[gpu]
        cost = p.price / self.hours
        how = f"{money(p.price, self.currency)} ({p.source}) / {self.hours:,.0f} h"
        if self.per_kwh is None:
            return cost, how + f"; electricity not included (pass --electricity {self.currency}/kWh)"
        if watts is None:
            return cost, how + "; no TDP in the catalog, electricity not included"
        cost += watts / 1000 * self.per_kwh
        return cost, how + f" + {watts:.0f} W (TDP x busy fraction) x {self.currency} {self.per_kwh:g}/kWh"


def parse_amortize(text: str) -> float:
    """`3y`, `36m`, `1095d`, `26280h` -> hours."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([hdmy])\s*", text.lower())
    if not m or not float(m.group(1)) > 0:
        raise UserError(f"--amortize: expected a period like 3y, 36m, 1095d or 26280h, found {text!r}")
    return float(m.group(1)) * HOURS[m.group(2)]


def parse_electricity(text: str, currency: str = DEFAULT_CURRENCY) -> float:
    """`0.15` or `0.15/kWh` -> price per kWh in the plan's currency."""
    raw = text.strip()
    if raw.lower().endswith("/kwh"):
        raw = raw[: -len("/kwh")]
    return parse_positive(raw.strip().lstrip("$"), f"--electricity {text!r}: {currency} per kWh")


def load_purchases(
    known: list[str], path: Path | None = None, currency: str = DEFAULT_CURRENCY, rates: Rates | None = None
) -> dict[str, Purchase]:
    """Launch prices by card, in `currency` (converted at a sourced rate where quoted in another)."""
    label, rows = read_rows(path, SHIPPED_PURCHASES, PURCHASE_COLUMNS, {"usd": "price"})
    out: dict[str, Purchase] = {}
    for _, line, r in rows:
        try:
            gpu = resolve_name(str(r["gpu"]), known, f"{label}: line {line}: field 'gpu'")
        except UserError:
            if path is not None:
                raise
            continue  # a shipped price for a card the user's own catalog lacks
        quoted, frm = float(r["price"]), str(r["currency"]).upper()  # type: ignore[arg-type]
        value, rate = (rates or load_rates()).convert(quoted, frm, currency, f"{label}: line {line}")
        source = f"{r['source']}, {r['date']}" + (
            f"; {CONVERTED} {frm} {amount(quoted)} at {rate.label()}" if rate else ""
        )
        out[gpu] = Purchase(gpu, value, source)
    return out


def parse_own(
    flags: list[str],
    known: list[str],
    amortize: str,
    electricity: str | None,
    currency: str = DEFAULT_CURRENCY,
    rates: Rates | None = None,
) -> Ownership | None:
    """`--own "RTX 4090=1599"` (in the plan's currency), or `--own "RTX 4090"` for the shipped
    launch price -> Ownership. `known`: every catalog card, whatever --gpus selects."""
    if not flags:
        return None
    shipped = load_purchases(known, None, currency, rates)
    purchases: dict[str, Purchase] = {}
    for flag in flags:
        name, sep, value = flag.rpartition("=") if "=" in flag else (flag, "", "")
        gpu = resolve_name(name.strip(), known, "--own")
        if sep:
            price = parse_positive(value.strip().lstrip("$"), f"--own {flag!r}: purchase price in {currency}")
            purchases[gpu] = Purchase(gpu, price, "user --own")
        elif gpu in shipped:
            purchases[gpu] = shipped[gpu]
        else:
            raise UserError(
                f"--own {flag!r}: no shipped purchase price for {gpu} (shipped: "
                f"{', '.join(shipped) or 'none'}); expected NAME={currency}"
            )
    return Ownership(
        purchases,
        parse_amortize(amortize),
        parse_electricity(electricity, currency) if electricity else None,
        currency,
    )
