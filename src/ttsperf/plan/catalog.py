"""GPU and price catalogs: data files with a source per row, validated on load.

Every problem with a file is a UserError naming the file, the line, the field, what was expected
and what was found, so a user can fix the row without reading code.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ttsperf.errors import UserError
from ttsperf.plan import datafile
from ttsperf.plan.datafile import parse_positive, read_rows
from ttsperf.plan.money import CONVERTED, DEFAULT_CURRENCY, Rate, Rates, currency_code, load_rates

SHIPPED_GPUS = "gpus.csv"
SHIPPED_PRICES = "prices.csv"

# Column -> (required?, kind). Blank optional numbers mean "not published / not supported"
# (e.g. T4 has no bf16).
GPU_COLUMNS: dict[str, tuple[bool, str]] = {
    "name": (True, "text"),
    "vendor": (False, "text"),
    "memory_gb": (True, "positive"),
    "mem_bandwidth_gbs": (True, "positive"),
    "fp16_dense_tflops": (True, "positive"),
    "bf16_dense_tflops": (False, "positive"),
    "fp32_tflops": (True, "positive"),
    "int8_dense_tops": (False, "positive"),
    "tdp_w": (False, "positive"),
    "interconnect": (False, "text"),
    "source": (True, "text"),
}
# A user's own price file needs only the first four; the shipped ones carry them all (data/README.md).
PRICE_COLUMNS: dict[str, tuple[bool, str]] = {
    "gpu": (True, "text"),
    "currency": (True, "text"),
    "per_gpu_hour": (True, "positive"),
    "source": (True, "text"),
    "provider": (False, "text"),
    "sku": (False, "text"),
    "gpus_per_instance": (False, "positive"),
    "per_instance_hour": (False, "positive"),
    "region": (False, "text"),
    "tier": (False, "text"),
    "read_on": (False, "text"),
    "second_hand": (False, "text"),
}
# the columns before prices carried their currency: named so an old file's error says what changed
OLD_PRICE_COLUMNS = {"usd_per_gpu_hour": "per_gpu_hour", "usd_per_instance_hour": "per_instance_hour"}


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gb: float  # vendor "GB" of VRAM: binary (GiB) in practice, see memory.py
    bandwidth_gbs: float
    tflops: dict[str, float | None]  # dtype -> dense peak; None = unsupported
    tdp_w: float | None
    source: str
    vendor: str = ""


@dataclass(frozen=True)
class Price:
    """One card's hourly price, in the plan's currency; `quoted` keeps the row's own figure."""

    gpu: str
    per_gpu_hour: float  # in `currency`
    currency: str
    source: str
    provider: str = ""
    sku: str = ""
    tier: str = ""
    read_on: str = ""
    region: str = ""
    second_hand: bool = False
    quoted: tuple[float, str] | None = None  # (figure, currency) as the row gives it, when converted
    fx: Rate | None = None  # the rate that converted it

    def brief(self) -> str:
        """Who, which offer, when: the plan's sentence names it (the label has the figures and sources)."""
        tier = "" if self.tier.lower() in self.sku.lower().split() else self.tier  # "community RTX 3090"
        where = " ".join(x for x in (self.provider, self.sku, tier) if x)
        when = f", read {self.read_on}" if self.read_on else ""
        return f"{where or 'user'}{when}"

    def label(self) -> str:
        hand = " (second-hand)" if self.second_hand else ""
        text = f"{self.brief()}: {self.currency} {self.per_gpu_hour:.4g}/GPU-h"
        if self.quoted is not None and self.fx is not None:
            text += f" {CONVERTED} {self.quoted[1]} {self.quoted[0]:.4g} at {self.fx.label()}"
        return f"{text}; {self.source}{hand}"

    def to(self, currency: str, rates: Rates, where: str) -> Price:
        """This price in `currency`, converted at a rate of `rates` (and saying so)."""
        value, rate = rates.convert(self.per_gpu_hour, self.currency, currency, where)
        if rate is None:
            return self
        return replace(self, per_gpu_hour=value, currency=currency, quoted=(self.per_gpu_hour, self.currency),
                       fx=rate)  # fmt: skip


@dataclass
class Catalog:
    gpus: dict[str, Gpu]
    gpus_file: str
    prices: dict[str, Price] = field(default_factory=dict)  # cheapest per card
    prices_file: str = ""
    known: list[str] = field(default_factory=list)  # every card in the file, before --gpus
    currency: str = DEFAULT_CURRENCY  # every price above is in it
    rates: Rates | None = None  # the exchange rates the plan may use
    rows: list[Price] = field(default_factory=list)  # every price considered, before the cheapest


def resolve_name(name: str, known: list[str], where: str) -> str:
    """A user-typed card name -> the catalog's name (exact, case-insensitive, or a unique part).

    Spaces do not count in the exact match: "RTX 4090D" is NVIDIA's "RTX 4090 D".
    """
    wanted = " ".join(name.split()).lower()
    by_squashed = {k.lower().replace(" ", ""): k for k in known}
    if wanted.replace(" ", "") in by_squashed:
        return by_squashed[wanted.replace(" ", "")]
    partial = [k for k in known if wanted and wanted in k.lower()]
    if len(partial) == 1:
        return partial[0]
    if len(partial) > 1:
        raise UserError(f"{where}: {name!r} is ambiguous: it matches {', '.join(partial)}; name one")
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.4)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UserError(f"{where}: unknown GPU {name!r}{hint}; known: {', '.join(known)}")


def load_gpus(path: Path | None = None) -> tuple[str, dict[str, Gpu]]:
    label, rows = read_rows(path, SHIPPED_GPUS, GPU_COLUMNS)
    gpus: dict[str, Gpu] = {}
    for _, line, r in rows:
        name = str(r["name"])
        if name in gpus:
            raise UserError(
                f"{label}: line {line}: field 'name': expected a unique name, found {name!r} again"
            )
        gpus[name] = Gpu(
            name=name,
            memory_gb=float(r["memory_gb"]),  # type: ignore[arg-type]
            bandwidth_gbs=float(r["mem_bandwidth_gbs"]),  # type: ignore[arg-type]
            tflops={
                "fp16": r["fp16_dense_tflops"],  # type: ignore[dict-item]
                "bf16": r["bf16_dense_tflops"],  # type: ignore[dict-item]
                "fp32": r["fp32_tflops"],  # type: ignore[dict-item]
            },
            tdp_w=r["tdp_w"],  # type: ignore[arg-type]
            source=str(r["source"]),
            vendor=str(r["vendor"]),
        )
    return label, gpus


def price_rows(
    known: list[str],
    path: Path | None = None,
    currency: str = DEFAULT_CURRENCY,
    rates: Rates | None = None,
    shipped: str = SHIPPED_PRICES,
) -> tuple[str, list[Price]]:
    """Every row of a price file, each in `currency` (converted at a rate of `rates`, and saying so).

    A user's file must name catalog cards; a shipped file may price cards a user's own
    catalog (--catalog) does not have, and those rows are skipped.
    """
    label, rows = read_rows(path, shipped, PRICE_COLUMNS, OLD_PRICE_COLUMNS)
    rates = rates or load_rates()
    out: list[Price] = []
    for _, line, r in rows:
        if path is None and not any(str(r["gpu"]).lower() == k.lower() for k in known):
            continue
        where = f"{label}: line {line}"
        gpu = resolve_name(str(r["gpu"]), known, f"{where}: field 'gpu'")
        per_gpu = float(r["per_gpu_hour"])  # type: ignore[arg-type]
        n, per_inst = r["gpus_per_instance"], r["per_instance_hour"]
        if n and per_inst and abs(per_inst / n - per_gpu) > 0.01 * per_gpu + 0.001:  # type: ignore[operator]
            raise UserError(
                f"{where}: field 'per_gpu_hour': expected per_instance_hour / "
                f"gpus_per_instance = {per_inst / n:.4f}, found {per_gpu}"  # type: ignore[operator]
            )
        hand = str(r["second_hand"]).lower()
        if hand not in ("", "yes", "no"):
            raise UserError(f"{where}: field 'second_hand': expected yes or no, found {r['second_hand']!r}")
        price = Price(
            gpu=gpu,
            per_gpu_hour=per_gpu,
            currency=currency_code(str(r["currency"]), f"{where}: field 'currency'"),
            source=str(r["source"]),
            provider=str(r["provider"]),
            sku=str(r["sku"]),
            tier=str(r["tier"]),
            read_on=str(r["read_on"]),
            region=str(r["region"]),
            second_hand=hand == "yes",
        )
        out.append(price.to(currency, rates, where))
    return label, out


def load_prices(
    known: list[str],
    path: Path | None = None,
    currency: str = DEFAULT_CURRENCY,
    rates: Rates | None = None,
    shipped: str = SHIPPED_PRICES,
) -> tuple[str, dict[str, Price]]:
    """The cheapest per-GPU hourly price for each card the file names, in `currency`."""
    label, prices = price_rows(known, path, currency, rates, shipped)
    return label, cheapest(prices)


def cheapest(prices: list[Price]) -> dict[str, Price]:
    """Each card's cheapest price (the first of equals)."""
    best: dict[str, Price] = {}
    for price in prices:
        if price.gpu not in best or price.per_gpu_hour < best[price.gpu].per_gpu_hour:
            best[price.gpu] = price
    return best


def parse_price_flag(text: str, known: list[str], currency: str = DEFAULT_CURRENCY) -> Price:
    """`--price "RTX 4090=0.5"` -> a user-supplied price per GPU-hour, in the plan's currency."""
    name, sep, value = text.rpartition("=")
    if not sep or not name.strip():
        raise UserError(
            f'--price: expected NAME={currency}_PER_GPU_HOUR (e.g. "RTX 4090=0.5"), found {text!r}'
        )
    gpu = resolve_name(name.strip(), known, "--price")
    per_gpu = parse_positive(value.strip(), f"--price {text!r}: {currency} per GPU-hour")
    return Price(
        gpu=gpu, per_gpu_hour=per_gpu, currency=currency, source="user --price flag", provider="user"
    )


PRICE_SET = "prices-{}.csv"  # a named price set: --prices aliyun plans with data/prices-aliyun.csv


def price_sets() -> list[str]:
    """The shipped price sets' names: `default` (prices.csv) and each prices-NAME.csv."""
    named = sorted(
        f.name[len("prices-") : -len(".csv")]
        for f in datafile.data_files().iterdir()
        if f.name.startswith("prices-") and f.name.endswith(".csv")
    )
    return ["default", *named]


def price_set(text: str | None) -> tuple[str, Path | None]:
    """--prices: (the shipped set to start from, a user's file to merge over it or None).

    A bare name that is not a file selects a shipped set instead of the default; a file merges."""
    if text is None:
        return SHIPPED_PRICES, None
    path = Path(text)
    if path.exists() or any(c in text for c in "/\\.") or not text.strip():
        return SHIPPED_PRICES, path
    name = text.strip().lower()
    sets = price_sets()
    if name not in sets:
        raise UserError(
            f"--prices: {text!r} is neither a file nor a price set; expected a CSV file or one of "
            f"{', '.join(sets)}"
        )
    return (SHIPPED_PRICES if name == "default" else PRICE_SET.format(name)), None


def load_catalog(
    catalog: Path | None = None,
    prices: str | None = None,
    price_flags: list[str] | None = None,
    only: list[str] | None = None,
    others: list[str] | None = None,
    currency: str = DEFAULT_CURRENCY,
    rates: Rates | None = None,
) -> Catalog:
    """GPUs (optionally only the named ones, in the order given) with the cheapest known price each,
    in `currency`.

    `prices`: a shipped price set's name (`aliyun`: data/prices-aliyun.csv) plans with that set
    instead of the default one, and (without `only`) the cards it prices; a FILE merges over the
    default (e.g. your own quotes): a card it prices takes its price, the others keep the shipped
    one; `--price NAME=AMOUNT` then overrides single cards. `others`: the rows of profiled
    devices outside the catalog (this CPU), which --price may name too.
    """
    rates = rates or load_rates()
    gpus_label, gpus = load_gpus(catalog)
    known = list(gpus)
    shipped, user_file = price_set(prices)
    prices_label, rows = price_rows(known, None, currency, rates, shipped)
    if user_file is not None:
        user_label, user = price_rows(known, user_file, currency, rates)
        mine = {p.gpu for p in user}
        rows = [p for p in rows if p.gpu not in mine] + user
        prices_label += f" with {user_label} over it ({len(mine)} card(s) priced from it)"
    for flag in price_flags or []:
        price = parse_price_flag(flag, known + [o for o in others or [] if o not in known], currency)
        rows = [p for p in rows if p.gpu != price.gpu] + [price]
        prices_label += f" + --price {flag!r}"
    best = cheapest(rows)
    if only is None and shipped != SHIPPED_PRICES:  # a named set plans the cards it prices
        gpus = {n: g for n, g in gpus.items() if n in best}
        prices_label += " (the cards it prices; --gpus for others)"
    if only:
        chosen = [resolve_name(n, known, "--gpus") for n in only]
        gpus = {n: gpus[n] for n in dict.fromkeys(chosen)}
    return Catalog(gpus=gpus, gpus_file=gpus_label, prices=best, prices_file=prices_label, known=known,
                   currency=currency, rates=rates, rows=rows)  # fmt: skip


def split_names(text: str) -> list[str]:
    """`"T4,RTX 3090, A100 40GB PCIe"` -> names (a comma separates; spaces belong to names)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError(f"--gpus: expected comma-separated GPU names, found {text!r}")
    return names
