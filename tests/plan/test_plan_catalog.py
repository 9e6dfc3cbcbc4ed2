"""Catalog and price files: the shipped ones parse with a source per row; every bad input is one line."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from ttsperf.errors import UserError
from ttsperf.plan.catalog import load_catalog, load_gpus, load_prices, parse_price_flag, split_names

GOOD_HEADER = (
    "name,vendor,memory_gb,mem_bandwidth_gbs,fp16_dense_tflops,bf16_dense_tflops,fp32_tflops,"
    "int8_dense_tops,tdp_w,interconnect,source"
)
GOOD_ROW = "Card X,ACME,24,1000,100,100,50,200,300,PCIe,datasheet"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def shipped_rows(name: str) -> list[dict[str, str]]:
    text = resources.files("ttsperf.data").joinpath(name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def test_shipped_catalog_parses_and_every_row_has_a_source():
    label, gpus = load_gpus()
    rows = shipped_rows("gpus.csv")
    assert len(gpus) == len(rows) >= 20
    assert all(r["source"].strip() for r in rows)
    assert gpus["RTX 4090"].memory_gb == 24 and gpus["RTX 4090"].bandwidth_gbs == 1008
    assert gpus["T4"].tflops["bf16"] is None  # Turing has no bf16: blank, not zero


def test_shipped_prices_parse_with_source_and_date_and_pick_the_cheapest():
    rows = shipped_rows("prices.csv")
    assert all(r["source"].strip() and r["read_on"].strip() and r["currency"] == "USD" for r in rows)
    assert {r["second_hand"] for r in rows} <= {"yes", "no"}
    _, gpus = load_gpus()
    _, best = load_prices(list(gpus))
    cheapest_4090 = min(float(r["per_gpu_hour"]) for r in rows if r["gpu"] == "RTX 4090")
    assert best["RTX 4090"].per_gpu_hour == cheapest_4090 and best["RTX 4090"].currency == "USD"
    assert "RTX 3080" not in best  # no shipped price: the plan must say so


def test_shipped_catalog_matches_the_reference_copy():
    # tests/fixtures/shared/reference holds a copy of the reference table (tests/fixtures/README.md)
    ref = Path(__file__).resolve().parents[1] / "fixtures" / "shared" / "reference" / "gpus.csv"
    ours = {r["name"]: r for r in shipped_rows("gpus.csv")}
    for r in csv.DictReader(ref.read_text(encoding="utf-8").splitlines()):
        assert ours[r["name"]] == r


def test_catalog_missing_column(tmp_path):
    p = write(tmp_path, "g.csv", GOOD_HEADER.replace(",memory_gb", "") + "\n" + GOOD_ROW + "\n")
    with pytest.raises(UserError, match=r"g\.csv: header: missing column\(s\) memory_gb"):
        load_gpus(p)


def test_catalog_field_not_a_number(tmp_path):
    p = write(tmp_path, "g.csv", GOOD_HEADER + "\n" + GOOD_ROW.replace(",24,", ",lots,") + "\n")
    with pytest.raises(
        UserError, match=r"g\.csv: line 2: field 'memory_gb': expected a positive number, found 'lots'"
    ):
        load_gpus(p)


def test_catalog_field_negative(tmp_path):
    p = write(
        tmp_path, "g.csv", GOOD_HEADER + "\n" + GOOD_ROW + "\n" + GOOD_ROW.replace("Card X,ACME,24", "Y,A,-8")
    )
    with pytest.raises(UserError, match=r"line 3: field 'memory_gb': expected a positive number, found '-8'"):
        load_gpus(p)


def test_catalog_required_field_empty(tmp_path):
    p = write(tmp_path, "g.csv", GOOD_HEADER + "\n" + GOOD_ROW.replace(",datasheet", ",") + "\n")
    with pytest.raises(UserError, match=r"line 2: field 'source': expected a value, found nothing"):
        load_gpus(p)


def test_catalog_duplicate_name(tmp_path):
    p = write(tmp_path, "g.csv", GOOD_HEADER + "\n" + GOOD_ROW + "\n" + GOOD_ROW + "\n")
    with pytest.raises(UserError, match=r"line 3: field 'name': expected a unique name"):
        load_gpus(p)


def test_catalog_unreadable_and_empty(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        load_gpus(tmp_path / "missing.csv")
    with pytest.raises(UserError, match="expected at least one data row"):
        load_gpus(write(tmp_path, "e.csv", GOOD_HEADER + "\n"))


def test_price_file_minimal_columns_and_unknown_gpu(tmp_path):
    ok = write(tmp_path, "p.csv", "gpu,currency,per_gpu_hour,source\nRTX 4090,USD,0.9,my quote\n")
    _, best = load_prices(["RTX 4090", "T4"], ok)
    assert best["RTX 4090"].per_gpu_hour == 0.9
    bad = write(tmp_path, "q.csv", "gpu,currency,per_gpu_hour,source\nRTX 4909,USD,0.9,quote\n")
    with pytest.raises(
        UserError, match=r"q\.csv: line 2: field 'gpu': unknown GPU 'RTX 4909' \(did you mean 'RTX 4090'\?\)"
    ):
        load_prices(["RTX 4090", "T4"], bad)


def test_price_file_bad_number_and_inconsistent_instance_price(tmp_path):
    bad = write(tmp_path, "p.csv", "gpu,currency,per_gpu_hour,source\nT4,USD,abc,quote\n")
    with pytest.raises(
        UserError, match=r"line 2: field 'per_gpu_hour': expected a positive number, found 'abc'"
    ):
        load_prices(["T4"], bad)
    text = "gpu,currency,per_gpu_hour,source,gpus_per_instance,per_instance_hour\nT4,USD,1.0,quote,8,16\n"
    with pytest.raises(
        UserError, match=r"expected per_instance_hour / gpus_per_instance = 2.0000, found 1.0"
    ):
        load_prices(["T4"], write(tmp_path, "i.csv", text))


def test_price_flag():
    known = ["RTX 4090", "T4"]
    assert parse_price_flag("RTX 4090=0.5", known).per_gpu_hour == 0.5
    assert parse_price_flag("rtx 4090 = 0.5", known).gpu == "RTX 4090"
    with pytest.raises(
        UserError, match=r"--price 'RTX 4090=abc': USD per GPU-hour: expected a positive number, found 'abc'"
    ):
        parse_price_flag("RTX 4090=abc", known)
    with pytest.raises(UserError, match=r"--price: expected NAME=USD_PER_GPU_HOUR"):
        parse_price_flag("RTX 4090", known)
    with pytest.raises(UserError, match=r"--price: unknown GPU 'X1'.*known: RTX 4090, T4"):
        parse_price_flag("X1=1", known)


def test_gpus_filter_resolves_names_and_rejects_unknown_and_ambiguous():
    cat = load_catalog(only=split_names("t4, rtx 4090,A100 40GB PCIe, RTX 4090D"))
    assert list(cat.gpus) == ["T4", "RTX 4090", "A100 40GB PCIe", "RTX 4090 D"]  # spaces don't count
    with pytest.raises(UserError, match=r"--gpus: '4090' is ambiguous: it matches RTX 4090, RTX 4090 D"):
        load_catalog(only=["4090"])
    with pytest.raises(UserError, match=r"--gpus: unknown GPU 'RTX 9090'.*known: T4, A10"):
        load_catalog(only=["RTX 9090"])
    with pytest.raises(
        UserError, match=r"--gpus: 'A100' is ambiguous: it matches A100 40GB PCIe, A100 40GB SXM"
    ):
        load_catalog(only=["A100"])
    with pytest.raises(UserError, match="--gpus: expected comma-separated GPU names"):
        split_names(" , ")


def test_user_catalog_with_shipped_prices_skips_cards_it_lacks(tmp_path):
    p = write(tmp_path, "g.csv", GOOD_HEADER + "\n" + GOOD_ROW.replace("Card X", "RTX 4090") + "\n")
    cat = load_catalog(catalog=p)
    assert list(cat.gpus) == ["RTX 4090"] and list(cat.prices) == ["RTX 4090"]


def test_price_override_wins_and_is_labelled():
    cat = load_catalog(price_flags=["RTX 4090=0.05"])
    assert cat.prices["RTX 4090"].per_gpu_hour == 0.05
    assert cat.prices["RTX 4090"].source == "user --price flag"
    assert "--price 'RTX 4090=0.05'" in cat.prices_file
