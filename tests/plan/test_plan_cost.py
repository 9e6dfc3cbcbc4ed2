"""Rent or own: amortisation, electricity, shipped launch prices, energy per audio hour."""

from __future__ import annotations

import pytest

from ttsperf.errors import UserError
from ttsperf.plan.api import make_plan
from ttsperf.plan.cost import load_purchases, parse_amortize, parse_electricity, parse_own

KNOWN = ["RTX 3090", "RTX 4090", "A100 40GB PCIe"]


def test_amortize_and_electricity_parse():
    assert parse_amortize("3y") == 3 * 8760
    assert parse_amortize("36m") == 36 * 730
    assert parse_amortize("10d") == 240
    assert parse_amortize("100h") == 100
    assert parse_electricity("0.15/kWh") == 0.15
    assert parse_electricity("$0.2") == 0.2
    with pytest.raises(UserError, match=r"--amortize: expected a period like 3y"):
        parse_amortize("forever")
    with pytest.raises(UserError, match=r"--amortize"):
        parse_amortize("0y")
    with pytest.raises(UserError, match=r"--electricity 'cheap': USD per kWh: expected a positive number"):
        parse_electricity("cheap")


def test_shipped_launch_prices_have_a_source():
    shipped = load_purchases(KNOWN)
    assert shipped["RTX 4090"].price == 1599 and "NVIDIA" in shipped["RTX 4090"].source
    assert "A100 40GB PCIe" not in shipped  # data-centre cards: the user's price


def test_own_flags():
    own = parse_own(["RTX 4090", "A100 40GB PCIe=9000"], KNOWN, "3y", None)
    assert own is not None and own.purchases["A100 40GB PCIe"].price == 9000
    assert parse_own([], KNOWN, "3y", None) is None
    with pytest.raises(
        UserError, match=r"--own 'A100 40GB PCIe': no shipped purchase price for A100 40GB PCIe"
    ):
        parse_own(["A100 40GB PCIe"], KNOWN, "3y", None)
    with pytest.raises(UserError, match=r"--own 'RTX 4090=lots': purchase price in USD: expected a positive"):
        parse_own(["RTX 4090=lots"], KNOWN, "3y", None)


def test_owned_hourly_cost_by_hand():
    own = parse_own(["RTX 4090=2628"], KNOWN, "1y", "0.2")
    assert own is not None
    usd, how = own.per_gpu_hour("RTX 4090", watts=450.0)
    assert usd == pytest.approx(2628 / 8760 + 0.45 * 0.2)
    assert "x USD 0.2/kWh" in how
    no_power = parse_own(["RTX 4090=2628"], KNOWN, "1y", None)
    assert no_power is not None
    usd, how = no_power.per_gpu_hour("RTX 4090", watts=450.0)
    assert usd == pytest.approx(0.3) and "electricity not included" in how


def test_plan_with_owned_card_and_energy():
    plan = make_plan(
        gpus="RTX 4090,A100 40GB PCIe", scenario="offline", own=["RTX 4090"], electricity="0.15", requests=200
    )
    rows = {r.gpu: r for r in plan.scenarios[0].rows}
    r4090, a100 = rows["RTX 4090"], rows["A100 40GB PCIe"]
    assert r4090.basis["usd_per_gpu_hour"].how.startswith("owned: $1,599")
    # offline at capacity the card is always busy: power = TDP
    assert r4090.usd_per_gpu_hour == pytest.approx(1599 / 26280 + 0.450 * 0.15, rel=1e-3)
    assert a100.basis["usd_per_gpu_hour"].kind == "sourced"  # still rented
    for r in (r4090, a100):
        assert r.kwh_per_audio_hour is not None and r.kwh_per_audio_hour > 0
        assert r.basis["kwh_per_audio_hour"].kind == "projected"
    assert not any("no price" in n for n in plan.notes)
