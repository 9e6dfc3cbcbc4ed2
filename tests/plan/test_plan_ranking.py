"""The card ranking a buyer reads: a card at least another's memory, bandwidth and peak carries at
least its load, or the two are marked tied; ties are said in the answer."""

from __future__ import annotations

import pytest

from ttsperf.plan.api import make_plan
from ttsperf.plan.catalog import load_gpus
from ttsperf.plan.recommend import mark_ties
from ttsperf.plan.schema import PlanRow
from ttsperf.plan.search import RESOLUTION


def _measured(r: PlanRow) -> bool:
    basis = getattr(r, "basis", None) or {}  # rows made by hand below carry none
    return "step.t_fixed" in basis and basis["step.t_fixed"].kind == "measured"


def dominance_breaks(rows: list[PlanRow], dtype: str = "fp16") -> list[tuple[str, str]]:
    """(a, b) where card a has at least b's memory, bandwidth and peak, carries less and is not
    marked tied with b. A property of the projection: a card planned from its measurement (the
    shipped H200: its host core binds at ~115 streams where the projection of its specs said 485)
    is what it measured, and is compared with nothing here."""
    _, gpus = load_gpus()
    out = []
    for a in rows:
        for b in rows:
            if a is b or not (a.fits and b.fits) or a.gpu not in gpus or b.gpu not in gpus:
                continue
            if _measured(a) or _measured(b):
                continue
            ga, gb = gpus[a.gpu], gpus[b.gpu]
            at_least = (
                ga.memory_gb >= gb.memory_gb
                and ga.bandwidth_gbs >= gb.bandwidth_gbs
                and (ga.tflops.get(dtype) or 0) >= (gb.tflops.get(dtype) or 0)
            )
            ca = a.max_streams if a.max_streams is not None else a.max_rate_rps
            cb = b.max_streams if b.max_streams is not None else b.max_rate_rps
            if at_least and ca is not None and cb is not None and ca < cb and b.gpu not in a.tied_with:
                out.append((a.gpu, b.gpu))
    return out


def _row(gpu: str, streams: int) -> PlanRow:
    # only what ties and dominance read (the rest of a row is the planner's)
    return PlanRow.model_construct(gpu=gpu, fits=True, max_streams=streams, max_rate_rps=None, tied_with=[])


def test_capacities_within_the_resolution_are_tied_both_ways_and_others_are_not():
    a, b, c = _row("A", 100), _row("B", int(100 * (1 + RESOLUTION))), _row("C", 120)
    mark_ties([a, b, c])
    assert a.tied_with == ["B"] and b.tied_with == ["A"] and c.tied_with == []


def test_a_tie_breaks_no_dominance_and_a_gap_does():
    weak, strong = _row("T4", 101), _row("A100 80GB SXM", 100)
    mark_ties([weak, strong])
    assert dominance_breaks([weak, strong]) == []
    strong.max_streams, strong.tied_with, weak.tied_with = 80, [], []
    assert dominance_breaks([weak, strong]) == [("A100 80GB SXM", "T4")]


@pytest.mark.slow
def test_realtime_100_streams_every_dominating_card_carries_at_least_as_many_or_is_tied():
    """The issue's must-show over the whole shipped catalog."""
    plan = make_plan(scenario="realtime", streams=100)
    rows = plan.scenarios[0].rows
    assert len(rows) >= 20
    assert dominance_breaks(rows) == []


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["realtime", "offline"])
def test_raising_bandwidth_peak_or_memory_alone_never_lowers_capacity(tmp_path, scenario):
    """A property over made-up cards: from a base card, more bandwidth, more peak or more memory
    (nothing else changed) carries at least the base's load, or is tied with it."""
    header = "name,memory_gb,mem_bandwidth_gbs,fp16_dense_tflops,fp32_tflops,source\n"
    rows = []
    for name, mem, bw, peak in (("L4", 24, 300, 121), ("A100 40GB PCIe", 40, 1555, 312)):
        rows += [
            f"{name} base,{mem},{bw},{peak},{peak / 4},test",
            f"{name} bw,{mem},{bw * 1.5},{peak},{peak / 4},test",
            f"{name} peak,{mem},{bw},{peak * 2},{peak / 4},test",
            f"{name} mem,{mem * 2},{bw},{peak},{peak / 4},test",
        ]
    catalog = tmp_path / "gpus.csv"
    catalog.write_text(header + "\n".join(rows) + "\n")
    plan = make_plan(catalog=str(catalog), scenario=scenario)
    got = {r.gpu: r for r in plan.scenarios[0].rows}
    for base in ("L4", "A100 40GB PCIe"):
        b = got[f"{base} base"]
        for more in ("bw", "peak", "mem"):
            r = got[f"{base} {more}"]
            cap_r = r.max_streams if r.max_streams is not None else r.max_rate_rps
            cap_b = b.max_streams if b.max_streams is not None else b.max_rate_rps
            assert cap_r >= cap_b or b.gpu in r.tied_with, (r.gpu, cap_r, b.gpu, cap_b)


@pytest.mark.parametrize(
    ("scenario", "gpus", "overhead"),
    [("concurrency", "RTX 3090,RTX 4090 D", None), ("realtime", "L20,T4,A10,RTX 3090", "3ms")],
)
def test_a_row_meeting_the_slo_meets_it_at_the_load_each_gpu_gets(scenario, gpus, overhead):
    # the L20: 101 streams per GPU, yet "at 100 streams per GPU: underrun_p99 0.101 > 0.1"
    # in its note while it counted as meeting the SLO; now a GPU more, or not meeting it (at
    # 10,000 streams the RTX 3090 met 235 per GPU but missed at the 233 each of 43 would get)
    kw = {"step_overhead": overhead} if overhead else {}
    plan = make_plan(scenario=scenario, gpus=gpus, **kw)
    sc = plan.scenarios[0]
    for r in sc.rows:
        if r.meets_slo:
            assert r.ttfa_p99_s <= sc.slo.limits["ttfa_p99"], (r.gpu, r.note)
            assert r.underrun_p99_s <= sc.slo.limits["underrun_p99"], (r.gpu, r.note)
            assert "per GPU:" not in r.note or ", so " in r.note, r.note  # a miss only with its extra GPU
