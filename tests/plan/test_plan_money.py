"""Prices in their currency, named price sets, exchange rates and how a plan prints its costs
(issue 23 items 2-3, issue 25 item 5). The CNY set and rate are fixtures (tests/fixtures/prices/),
not real figures."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ttsperf.cli.main import app
from ttsperf.errors import UserError
from ttsperf.plan import datafile
from ttsperf.plan.catalog import load_catalog, load_prices, price_sets
from ttsperf.plan.money import CONVERTED, amount, load_rates, money, parse_fx_flag

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prices"
FEW = ["--requests", "200"]
SET_CARDS = "T4,A10,RTX 4090"  # every card the fixture set prices


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    """The shipped data folder plus the fixture CNY set and rate, as the package's data."""
    shipped = resources.files("ttsperf.data")
    for name in ("gpus.csv", "prices.csv", "purchase.csv"):
        (tmp_path / name).write_text(shipped.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
    for f in FIXTURES.iterdir():
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.setattr(datafile, "data_files", lambda: tmp_path)
    return tmp_path


def test_amount_keeps_three_significant_figures():
    assert [amount(x) for x in (0.003298, 0.34, 1.2345, 12.345, 123.4, 1234.6)] == [
        "0.00330", "0.340", "1.23", "12.3", "123", "1,235"
    ]  # fmt: skip
    assert money(0.003298, "USD") == "$0.00330" and money(12.345, "CNY") == "CNY 12.3"
    assert money(None, "USD") == "-"


def test_rates_convert_both_ways_and_a_flag_replaces_the_file(data):
    rates = load_rates()
    assert rates.convert(1.0, "USD", "CNY", "x") == (7.0, rates.by_pair[("USD", "CNY")])
    assert rates.convert(14.0, "CNY", "USD", "x")[0] == pytest.approx(2.0)
    assert rates.convert(3.0, "USD", "USD", "x") == (3.0, None)
    mine = load_rates(flags=["cny:usd=0.125"])  # the user's rate, written the other way round
    assert mine.convert(8.0, "CNY", "USD", "x")[0] == 1.0 and ("USD", "CNY") not in mine.by_pair
    assert mine.by_pair[("CNY", "USD")].source == "user --fx"
    with pytest.raises(UserError, match=r"p\.csv: line 2: priced in EUR, planned in USD, and no EUR/USD"):
        rates.convert(1.0, "EUR", "USD", "p.csv: line 2")
    with pytest.raises(UserError, match=r"--fx: expected BASE:QUOTE=RATE"):
        parse_fx_flag("7.2")
    with pytest.raises(UserError, match=r"--fx 'USD:CNY=-1': rate: expected a positive number"):
        parse_fx_flag("USD:CNY=-1")


def test_no_shipped_rate_says_which_flag_to_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(datafile, "data_files", lambda: tmp_path)  # no fx.csv
    with pytest.raises(UserError, match=r"pass --fx CNY:USD=RATE \(1 CNY = RATE USD\) or --currency CNY"):
        load_rates().convert(1.0, "CNY", "USD", "x")


def test_a_converted_price_names_its_rate_source_and_date(data):
    _, best = load_prices(["T4", "A10", "RTX 4090"], FIXTURES / "prices-cnfixture.csv", "USD", load_rates())
    t4 = best["T4"]
    assert t4.currency == "USD" and t4.per_gpu_hour == pytest.approx(9 / 7)
    assert t4.quoted == (9.0, "CNY")
    label = t4.label()
    assert f"{CONVERTED} CNY 9 at 1 USD = 7 CNY (ttsperf test fixture (not a real rate), 2026-12-01)" in label
    assert "read 2026-12-01" in label and "Fixture Cloud fc.t4.1 pay-as-you-go" in label


def test_bad_currency_and_second_hand_fields_are_one_line(tmp_path):
    head = "gpu,currency,per_gpu_hour,source,second_hand\n"
    bad = tmp_path / "p.csv"
    bad.write_text(head + "T4,dollars,1,quote,no\n")
    with pytest.raises(UserError, match=r"p\.csv: line 2: field 'currency': expected a three-letter"):
        load_prices(["T4"], bad)
    bad.write_text(head + "T4,USD,1,quote,maybe\n")
    with pytest.raises(UserError, match=r"p\.csv: line 2: field 'second_hand': expected yes or no"):
        load_prices(["T4"], bad)
    old = tmp_path / "old.csv"
    old.write_text("gpu,usd_per_gpu_hour,source\nT4,1,quote\n")
    with pytest.raises(UserError, match=r"usd_per_gpu_hour is now per_gpu_hour with a currency column"):
        load_prices(["T4"], old)


def test_a_named_set_replaces_the_default_and_a_file_merges(data, tmp_path):
    assert price_sets() == ["cnfixture", "default"] or price_sets() == ["default", "cnfixture"]
    named = load_catalog(prices="cnfixture", currency="CNY")
    assert set(named.prices) == {"T4", "A10", "RTX 4090"}  # the shipped USD rows are not in it
    assert list(named.gpus) == ["T4", "A10", "RTX 4090"]  # without --gpus: the cards the set prices
    assert named.prices["A10"].per_gpu_hour == 12 and named.prices["A10"].currency == "CNY"
    assert named.prices_file.startswith("ttsperf/data/prices-cnfixture.csv (the cards it prices")
    merged = load_catalog(prices=str(FIXTURES / "prices-cnfixture.csv"), currency="USD")
    assert "H100 SXM" in merged.prices and merged.prices["T4"].quoted == (9.0, "CNY")
    with pytest.raises(UserError, match=r"--prices: 'nosuch' is neither a file nor a price set; .*cnfixture"):
        load_catalog(prices="nosuch")


def test_cny_plan_recommends_a_card_priced_in_cny_with_source_and_date(data):
    args = ["plan", "--scenario", "realtime", "--streams", "100", "--prices", "cnfixture",
            "--currency", "CNY", "--gpus", SET_CARDS, *FEW]  # fmt: skip
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    data_ = json.loads(r.stdout)
    sc = data_["scenarios"][0]
    rec = sc["recommended"]
    assert data_["inputs"]["currency"] == "CNY" and data_["inputs"]["fx"] == []
    assert rec["currency"] == "CNY" and rec["usd_per_hour"] > 0 and rec["max_streams"] > 0
    assert all(row["usd_per_gpu_hour"] is not None and row["currency"] == "CNY" for row in sc["rows"])
    assert f"CNY {amount(rec['usd_per_hour'])}/h" in sc["recommendation"]
    best = next(row for row in sc["rows"] if row["gpu"] == rec["gpu"])
    assert "read 2026" in sc["recommendation"]  # whose price and when; its source in the row's basis
    assert "not a real price" in best["basis"]["usd_per_gpu_hour"]["how"]
    assert f"{rec['max_streams']} streams per GPU" in sc["recommendation"]
    table = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    assert "CNY/h" in table.stdout and "CNY/audio" in table.stdout and "no price" not in table.stdout


def test_a_usd_plan_over_cny_prices_marks_and_states_the_rate(data):
    r = runner.invoke(app, ["plan", "--scenario", "offline", "--prices", "cnfixture", "--gpus", "T4", *FEW])
    assert r.exit_code == 0, r.output
    t4 = next(line for line in r.stdout.splitlines() if line.startswith("T4 "))
    assert t4.rstrip().endswith("~")  # the T4 row's cost is marked converted
    assert "~ USD converted at 1 USD = 7 CNY (ttsperf test fixture (not a real rate), 2026-12-01)" in r.stdout
    plan = json.loads(runner.invoke(app, ["plan", "--scenario", "offline", "--prices", "cnfixture",
                                          "--gpus", "T4", *FEW, "--json"]).stdout)  # fmt: skip
    row = plan["scenarios"][0]["rows"][0]
    assert row["currency"] == "USD" and CONVERTED in row["basis"]["usd_per_gpu_hour"]["how"]
    assert plan["inputs"]["fx"] == ["1 USD = 7 CNY (ttsperf test fixture (not a real rate), 2026-12-01)"]


def test_currency_is_a_setting_from_the_environment_and_a_flag_rate_works(data):
    r = runner.invoke(
        app, ["plan", "--scenario", "offline", "--gpus", "RTX 4090", "--fx", "USD:CNY=8", *FEW, "--json"],
        env={"TTSPERF_PLAN_CURRENCY": "cny"},
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert plan["inputs"]["settings_sources"]["currency"] == "env"
    row = plan["scenarios"][0]["rows"][0]
    assert row["currency"] == "CNY" and row["usd_per_gpu_hour"] == pytest.approx(0.34 * 8)
    bad = runner.invoke(app, ["plan", "--currency", "yuan"])
    assert bad.exit_code == 2 and "--currency: expected a three-letter currency code" in bad.output


def test_own_offers_every_shipped_purchase_whatever_gpus_holds():
    r = runner.invoke(app, ["plan", "--gpus", "T4", "--own", "A100 40GB PCIe", "--scenario", "offline"])
    assert r.exit_code == 2
    assert "(shipped: RTX 3080, RTX 3090, RTX 4090, RTX 5090)" in r.output


def test_owned_purchase_converts_to_the_plan_currency(data):
    r = runner.invoke(app, ["plan", "--gpus", "RTX 4090", "--own", "RTX 4090", "--currency", "CNY",
                            "--scenario", "offline", *FEW, "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    how = json.loads(r.stdout)["scenarios"][0]["rows"][0]["basis"]["usd_per_gpu_hour"]["how"]
    assert how.startswith("owned: CNY 11,193 (") and f"{CONVERTED} USD 1,599 at 1 USD = 7 CNY" in how


def test_list_prices_names_provider_tier_date_at_80_columns(data):
    r = runner.invoke(app, ["plan", "--list-prices", "--prices", "cnfixture"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "…" not in r.stdout and max(len(line) for line in r.stdout.splitlines()) <= 80
    assert "Fixture Cloud" in r.stdout and "pay-as-you-go" in r.stdout and "2026-12-01" in r.stdout
    assert "CNY/GPU" not in r.stdout and "$/GPU" in r.stdout and "~ converted at 1 USD = 7 CNY" in r.stdout
    js = runner.invoke(app, ["plan", "--list-prices", "--prices", "cnfixture", "--currency", "CNY", "--json"])
    rows = json.loads(js.stdout)["rows"]
    assert [p["gpu"] for p in rows] == ["A10", "RTX 4090", "T4"]
    assert rows[1]["second_hand"] is True and rows[0]["per_gpu_hour"] == 12 and rows[0]["fx"] is None
    assert rows[0]["sku"] == "fc.a10.4" and rows[0]["region"] == "cn-test-1"
