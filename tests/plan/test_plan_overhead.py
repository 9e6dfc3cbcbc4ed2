"""A step's fixed cost per engine mode, from a host profile (measured host work, counted kernels)
and the sourced per-kernel costs: the formulas, the shipped profile, --host-profile."""

from __future__ import annotations

import json

import pytest

from ttsperf.errors import UserError
from ttsperf.plan import overhead as O
from ttsperf.plan.api import make_plan
from ttsperf.profile.schema import HostProfile, default_host_profile

GAP, NODE, REPLAY = (O.KERNEL_COSTS[k] for k in ("launch_gap", "graph_node", "graph_replay"))


def test_eager_and_compile_pay_the_slower_of_the_host_and_the_launches():
    host_bound = O.Part(host_s=0.010, host_spread=0.002, kernels=800)
    assert O.fixed_cost(host_bound, "eager", "low") == pytest.approx(0.009)  # median - IQR/2
    assert O.fixed_cost(host_bound, "eager", "high") == pytest.approx(0.011)
    assert O.bound_by(host_bound, "eager") == "host"
    launch_bound = O.Part(host_s=0.001, host_spread=0.0, kernels=800)
    assert O.fixed_cost(launch_bound, "compile", "low") == pytest.approx(800 * GAP.low)
    assert O.fixed_cost(launch_bound, "compile", "high") == pytest.approx(800 * GAP.high)
    assert O.bound_by(launch_bound, "compile") == "device"


def test_cuda_graphs_pay_one_replay_the_nodes_and_what_is_launched_outside():
    part = O.Part(host_s=0.0, host_spread=0.0, kernels=7, nodes=864)
    for end in ("low", "high"):
        want = REPLAY.at(end) + 864 * NODE.at(end) + 7 * GAP.at(end)
        assert O.fixed_cost(part, "cuda-graphs", end) == pytest.approx(want)
    s = O.span(part, "cuda-graphs")
    assert s.low < s.centre < s.high


def test_the_shipped_profile_prices_every_mode_from_its_own_numbers():
    prof = default_host_profile()
    modes = O.default_modes()
    assert list(modes) == ["eager", "compile", "cuda-graphs"]
    p1 = min(prof.host.parts["decode"].points, key=lambda p: p.size)
    eager = p1.modes["eager"]
    assert modes["eager"].t_fixed == pytest.approx(  # CPU ops timed; on a card each costs the factor
        max(eager.host_seconds.value * O.CUDA_OP_HOST_FACTOR, eager.kernels.value * GAP.at("mid"))
    )
    assert modes["cuda-graphs"].t_fixed < modes["compile"].t_fixed < modes["eager"].t_fixed
    for m in modes.values():
        assert m.low <= m.t_fixed <= m.high and m.audio.low <= m.audio.centre <= m.audio.high
        assert m.source.startswith("host profile shipped host-amd-epyc.json (")
    assert modes["cuda-graphs"].max_batch == 256


def _host_file(tmp_path, scale: float, drop_compile: bool = False):
    """The shipped host profile with every host second x `scale` (a slower or faster CPU)."""
    data = default_host_profile().dump()
    for part in data["host"]["parts"].values():
        for point in part["points"]:
            if drop_compile:
                point["modes"].pop("compile", None)
            for cost in point["modes"].values():
                if cost["host_seconds"] is not None:
                    cost["host_seconds"]["value"] *= scale
    path = tmp_path / f"host-{scale:g}.json"
    path.write_text(json.dumps(data))
    HostProfile.model_validate(data)
    return path


def test_a_slower_host_profile_carries_fewer_eager_streams_and_every_row_names_it(tmp_path):
    # offline: an eager step on a card (~27 ms at the shipped profile) meets no realtime TTFA
    common = dict(gpus="RTX 4090", scenario="offline", mode="eager", requests=300)
    shipped = make_plan(**common).scenarios[0].rows[0]
    slow_file = _host_file(tmp_path, 3.0)
    slow = make_plan(**common, host_profile=str(slow_file)).scenarios[0].rows[0]
    assert slow.max_rate_rps < shipped.max_rate_rps
    assert str(slow_file) in slow.basis["step.t_fixed"].how
    assert "shipped host-amd-epyc.json" in shipped.basis["step.t_fixed"].how


def test_a_mode_the_host_profile_did_not_measure_is_a_clear_error(tmp_path):
    path = _host_file(tmp_path, 1.0, drop_compile=True)
    with pytest.raises(UserError, match="--mode compile: the host profile measured only eager, cuda-graphs"):
        make_plan(gpus="RTX 4090", scenario="offline", mode="compile", host_profile=str(path), requests=100)


def test_every_gpu_rows_range_spans_at_most_2x_and_names_the_host_profile():
    """Issue 21's must-show, on the realtime scenario at 100 streams over four cards."""
    plan = make_plan(scenario="realtime", streams=100, gpus="T4,RTX 4090,A100 80GB SXM,H100 SXM")
    for r in plan.scenarios[0].rows:
        low, high = r.max_streams_range
        assert 0 < low <= r.max_streams <= high <= 2 * low, r.gpu
        assert "host profile shipped host-amd-epyc.json" in r.basis["step.t_fixed"].how


def test_a_card_profile_that_measured_its_per_op_cost_prices_the_projected_cards_eager_ops(tmp_path):
    """`profile --modes all` on a card records an eager op's host time there against its CPU:
    plan prices every projected card's eager ops by that, not by the H200 box's 3.03, and says so.
    A CPU's own figure (1.0 by definition) leaves the sourced factor."""
    from tests.plan.conftest import make_profile

    from ttsperf.profile.schema import Measured, PerOpHost

    def profile_with(kind: str, factor: float):
        prof = make_profile(device="RTX 4090", kind=kind)
        op = Measured(value=3.0e-6 * factor, unit="s", how="test")
        prof.per_op_host = PerOpHost(device_op=op, cpu_op=Measured(value=3.0e-6, unit="s", how="test"),
                                     factor=factor, how="test")  # fmt: skip
        path = tmp_path / f"{kind}-{factor:g}.json"
        path.write_text(json.dumps(prof.dump()))
        return str(path)

    common = dict(gpus="RTX 4090,T4", scenario="offline", mode="eager", requests=300)
    t4 = {}
    for name, path in (("card", profile_with("cuda", 1.5)), ("cpu", profile_with("cpu", 1.0))):
        rows = {r.gpu: r for r in make_plan(**common, profile=[path]).scenarios[0].rows}
        t4[name] = rows["T4"].basis["step.t_fixed"]
        assert rows["RTX 4090"].basis["step.t_fixed"].kind == "measured"  # the profiled card: its own
    assert "x1.50 per eager op" in t4["card"].how and "RTX 4090" in t4["card"].how
    assert "x3.03 per eager op" in t4["cpu"].how
    card_ms, cpu_ms = (float(t4[k].how.split(" ms per step")[0]) for k in ("card", "cpu"))
    assert card_ms < cpu_ms  # an eager op at 1.5x its CPU cost, not 3.03x


def test_a_card_profile_that_measured_its_host_prices_the_projected_cards_by_it(tmp_path):
    """`profile --modes all` on a card records the host profile of the CPU beside it: with no
    --host-profile, plan prices every projected card's fixed costs by that CPU (a slower one: fewer
    eager requests per second) and names it. A CPU profile's host section leaves the shipped one,
    and --host-profile wins over both."""
    from tests.plan.conftest import make_profile

    def profile_with(kind: str, scale: float) -> str:
        prof = make_profile(device="RTX 4090", kind=kind)
        prof.host = HostProfile.model_validate(json.loads(_host_file(tmp_path, scale).read_text())).host
        path = tmp_path / f"{kind}-host-{scale:g}.json"
        path.write_text(json.dumps(prof.dump()))
        return str(path)

    common = dict(gpus="RTX 4090,T4", scenario="offline", mode="eager", requests=300)

    def t4(**flags):
        return next(r for r in make_plan(**common, **flags).scenarios[0].rows if r.gpu == "T4")

    card, on_cpu = profile_with("cuda", 3.0), profile_with("cpu", 3.0)
    slow, shipped = t4(profile=[card]), t4(profile=[on_cpu])
    assert slow.max_rate_rps < shipped.max_rate_rps
    assert f"beside RTX 4090, {card}" in slow.basis["step.t_fixed"].how
    assert "shipped host-amd-epyc.json" in shipped.basis["step.t_fixed"].how
    given = str(_host_file(tmp_path, 1.0))
    assert given in t4(profile=[card], host_profile=given).basis["step.t_fixed"].how
