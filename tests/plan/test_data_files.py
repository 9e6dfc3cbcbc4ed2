"""The shipped data files themselves: every price has a currency, a date and a source and names a
catalog card; every exchange rate is sourced and dated; every blank catalog figure says why.

Read with csv.DictReader, not the loader, so these hold for the price table before and after its
`currency` column (issue 23): a file without one is priced in USD by its `usd_per_gpu_hour` column.
"""

from __future__ import annotations

import csv
import re
from importlib import resources

import pytest

from ttsperf.plan.catalog import load_catalog

DATA = resources.files("ttsperf.data")
PRICE_FILES = sorted(p.name for p in DATA.iterdir() if re.fullmatch(r"prices(-[a-z0-9-]+)?\.csv", p.name))
# The cards a team in China rents or buys (issue 23), and the V100s Alibaba's gn6v/gn6e carry.
CHINA_CARDS = [
    "H20",
    "L20",
    "RTX 4090 D",
    "A800 80GB PCIe",
    "A800 80GB SXM",
    "H800 PCIe",
    "H800 SXM",
    "V100 SXM2 16GB",
    "V100 SXM2 32GB",
]
# Optional figures a row may leave blank, and the word its source must use to say why.
OPTIONAL_FIGURES = {"bf16_dense_tflops": "bf16", "int8_dense_tops": "int8", "tdp_w": "tdp"}


def rows(name: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(DATA.joinpath(name).read_text(encoding="utf-8").splitlines())
    return list(reader.fieldnames or []), list(reader)


def catalog_names() -> set[str]:
    return {r["name"] for r in rows("gpus.csv")[1]}


def money(header: list[str], row: dict[str, str]) -> tuple[str, float, float | None, float | None]:
    """(currency, per GPU-hour, per instance-hour, GPUs) in either price-table schema."""
    if "currency" in header:
        currency, per_gpu, per_inst = row["currency"], row["per_gpu_hour"], row["per_instance_hour"]
    else:  # the table before issue 23: USD by its column names
        currency, per_gpu, per_inst = "USD", row["usd_per_gpu_hour"], row.get("usd_per_instance_hour")
    n = row.get("gpus_per_instance")
    return currency, float(per_gpu), float(per_inst) if per_inst else None, float(n) if n else None


def test_the_named_price_sets_are_shipped():
    assert {"prices.csv", "prices-aliyun.csv", "prices-cn-rental.csv"} <= set(PRICE_FILES)


@pytest.mark.parametrize("name", PRICE_FILES)
def test_every_price_row_has_currency_date_source_and_a_catalog_card(name):
    header, table = rows(name)
    cards = catalog_names()
    assert table, f"{name}: no rows"
    for line, r in enumerate(table, start=2):
        where = f"{name}: line {line}"
        currency, per_gpu, per_inst, n = money(header, r)
        assert re.fullmatch(r"[A-Z]{3}", currency), f"{where}: currency {currency!r} is not an ISO code"
        assert per_gpu > 0, where
        assert r["read_on"].strip() and r["source"].strip(), f"{where}: a price needs a date and a source"
        assert r["gpu"] in cards, f"{where}: {r['gpu']!r} is not a catalog row (exact name)"
        if per_inst and n:
            assert per_inst / n == pytest.approx(per_gpu, rel=0.01), f"{where}: per-GPU != instance / GPUs"
        if "second_hand" in header:
            assert r["second_hand"] in ("yes", "no"), f"{where}: second_hand {r['second_hand']!r}"


@pytest.mark.parametrize("name", ["prices-aliyun.csv", "prices-cn-rental.csv"])
def test_china_price_sets_are_in_cny_in_the_agreed_schema(name):
    header, table = rows(name)
    assert header == [
        "provider", "sku", "gpu", "gpus_per_instance", "currency", "per_instance_hour",
        "per_gpu_hour", "region", "tier", "read_on", "second_hand", "source",
    ]  # fmt: skip
    assert {r["currency"] for r in table} == {"CNY"}
    for r in table:  # a figure read off another page than the provider's says so where it is cited
        if r["second_hand"] == "yes":
            assert "own page" in r["source"], f"{name}: {r['sku']}: say whose page the figure is from"


def test_no_card_of_the_alibaba_set_lacks_a_catalog_row():
    cards = catalog_names()
    priced = {r["gpu"] for r in rows("prices-aliyun.csv")[1]}
    assert priced <= cards
    assert {"T4", "A10", "L20", "V100 SXM2 16GB", "V100 SXM2 32GB"} <= priced
    assert all(r["provider"] == "Alibaba Cloud" for r in rows("prices-aliyun.csv")[1])


def test_exchange_rates_are_sourced_and_dated():
    header, table = rows("fx.csv")
    assert header == ["base", "quote", "rate", "read_on", "source"]
    for r in table:
        assert re.fullmatch(r"[A-Z]{3}", r["base"]) and re.fullmatch(r"[A-Z]{3}", r["quote"])
        assert float(r["rate"]) > 0 and r["read_on"].strip() and r["source"].strip()
    usd_cny = [float(r["rate"]) for r in table if (r["base"], r["quote"]) == ("USD", "CNY")]
    assert usd_cny and 5 < usd_cny[0] < 10  # a yuan rate, not its inverse


def test_china_market_cards_are_catalog_rows_that_plan():
    cat = load_catalog(only=CHINA_CARDS)
    assert list(cat.gpus) == CHINA_CARDS
    for gpu in cat.gpus.values():
        assert gpu.memory_gb > 0 and gpu.bandwidth_gbs > 0 and gpu.tflops["fp16"], gpu.name
        assert len(gpu.source) > 80, f"{gpu.name}: say where each figure comes from"
    assert cat.gpus["V100 SXM2 16GB"].tflops["bf16"] is None  # Volta: blank, not zero


def test_every_blank_catalog_figure_says_why():
    for r in rows("gpus.csv")[1]:
        for column, word in OPTIONAL_FIGURES.items():
            if not r[column].strip():
                assert word in r["source"].lower(), f"{r['name']}: {column} is blank; its source must say why"
