"""What a step's overhead costs on a GPU nobody here has: host work measured, kernels counted.

A GPU step is the host's work (Python, the dispatcher, launching kernels) and the device's (the
roofline, which `StepModel` adds per card, and the time each kernel costs it). `ttsperf profile
--host` measures the first on the CPU the GPU sits beside (the `skeleton` model: chattts's op
graph at widths where compute vanishes) and counts the second's kernels on `chattts`; what one
kernel costs the device is a public measurement with a range (KERNEL_COSTS). Per engine mode, the
fixed part of one decode step and of one Decoder+Vocos call:

    eager, compile: max(host seconds, kernels x launch gap)    the host launches asynchronously:
                                                               the slower side sets the pace
    cuda-graphs:    replay + graph nodes x node cost           one launch; the device walks the
                    + kernels outside the graph x launch gap   graph, the host waits for it

The scheduler's own host work per step and per row is added by the simulator (StepModel.t_host,
t_row). A range end takes the host's low or high reading (median -/+ half its IQR) with the kernel
costs' low or high end: the range plan prints comes from these, not from a quote for another
engine. The call's roofline is added on top (serially: conservative where the device's work could
hide under the host's).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ttsperf.plan.steptime import GRAPHS_MAX_BATCH, MODE_FLAGS, Mode, Span
from ttsperf.profile.schema import (
    SHIPPED_HOST,
    HostPart,
    HostProfile,
    HostSection,
    ModeCost,
    ModelProfile,
    default_host_profile,
    load_host_profile,
)

END = ("low", "mid", "high")


@dataclass(frozen=True)
class KernelCost:
    low: float  # seconds
    high: float
    source: str

    def at(self, end: str) -> float:
        """The range's low or high end, or its geometric middle."""
        return {"low": self.low, "high": self.high, "mid": (self.low * self.high) ** 0.5}[end]


_H200 = "measured on an H200 (docs/measurements/h200-2026-12-04/README.md)"
_PROBE = "ahrefs/ocannl issue 488 (RTX 5070 Ti Laptop, CUDA 13, chains of 8-117 no-op kernels, median of 200)"
KERNEL_COSTS = {
    # What one kernel costs the device when the host launches them one by one: 2.6-2.8 us of
    # enqueue when the launches run ahead, 6.3-7.5 us each when every launch is waited for.
    "launch_gap": KernelCost(2.6e-6, 7.5e-6, f"queued launch 2.6-2.8 us, launch + wait 6.3-7.5 us: {_PROBE}"),
    # A captured graph of the engine's own kernels, as one card ran it: the H200's graphed decode
    # step (871 kernels) took 2.50 ms at batch 1 and 4.23 ms at batch 256, 2.87-4.38 us per kernel
    # with the step's roofline in it (so the high end counts some of it twice: conservative). A
    # no-op kernel replays at 0.58-0.84 us per node (the probe; the H200 itself), but a real
    # kernel at these sizes runs longer than its launch: the no-op figure put a graphed step at
    # 0.5 ms where the card took 2.5.
    "graph_node": KernelCost(2.87e-6, 4.38e-6, f"{_H200}: the engine's graphed step per kernel, batch 1-256"),
    # One replay: ~15 us fixed on the probe; x2 for PyTorch's replay prologue and older drivers
    # (assumption).
    "graph_replay": KernelCost(
        15e-6, 30e-6, f"~15 us per replay: {_PROBE}; high end x2 (assumption: PyTorch's replay prologue)"
    ),
}
# The same op costs the host more on a CUDA tensor than on a CPU tensor (the launch, the stream,
# the caching allocator): 9.96 us against 3.29 us per op on the H200's host. A host profile times
# CPU ops, so where the engine runs an op eagerly on a card (eager and compile steps, every
# prefill) its host seconds are scaled by this. One box measured it; a card profile that measures
# its own host work (the shipped H200) needs none.
CUDA_OP_HOST_FACTOR = 9.96 / 3.29
CUDA_OP_HOST_SOURCE = (
    f"x{CUDA_OP_HOST_FACTOR:.2f} per eager op on a card: 9.96 us of host time per CUDA op against 3.29 "
    f"us per CPU op, {_H200}"
)
PROFILE_MODE = {"eager": "eager", "compile": "compile", "cuda-graphs": "cuda_graphs"}  # plan -> profile


@dataclass(frozen=True)
class OpFactor:
    """How much more host time an eager op costs on a card than on a CPU tensor, and its source."""

    value: float
    source: str


SOURCED_FACTOR = OpFactor(CUDA_OP_HOST_FACTOR, CUDA_OP_HOST_SOURCE)


def op_factor(profiles: list[tuple[str, ModelProfile]]) -> OpFactor:
    """The first card profile's own measurement (`profile --modes all` on a GPU records it), else
    the factor the H200's box measured."""
    for path, prof in profiles:
        op = prof.per_op_host
        if op is not None and prof.device.kind != "cpu":
            return OpFactor(
                op.factor,
                f"x{op.factor:.2f} per eager op on a card: {op.device_op.value * 1e6:.3g} us of host time "
                f"per op on {prof.device.name} against {op.cpu_op.value * 1e6:.3g} us on its CPU, {path}",
            )
    return SOURCED_FACTOR


@dataclass(frozen=True)
class Part:
    """One part of the engine's work (a decode step, a Decoder+Vocos call) in one mode."""

    host_s: float  # host seconds (median), measured on the skeleton
    host_spread: float  # its interquartile range
    kernels: int  # kernels the host launches one by one (counted on chattts)
    nodes: int = 0  # kernels inside a captured graph (cuda-graphs)

    def host(self, end: str) -> float:
        half = {"low": -0.5, "mid": 0.0, "high": 0.5}[end] * self.host_spread
        return max(0.0, self.host_s + half)


def fixed_cost(part: Part, mode: str, end: str) -> float:
    """Seconds a part adds beyond its roofline, at one end of the host's and the kernels' ranges."""
    gap = KERNEL_COSTS["launch_gap"].at(end)
    if mode == "cuda-graphs":
        graph = KERNEL_COSTS["graph_replay"].at(end) + part.nodes * KERNEL_COSTS["graph_node"].at(end)
        return graph + part.kernels * gap
    return max(part.host(end), part.kernels * gap)


def bound_by(part: Part, mode: str) -> str:
    """Which side sets the part's fixed cost at the centre: 'host' or 'device'."""
    if mode == "cuda-graphs":
        return "device"
    return "host" if part.host("mid") >= part.kernels * KERNEL_COSTS["launch_gap"].at("mid") else "device"


def span(part: Part, mode: str) -> Span:
    return Span(
        centre=fixed_cost(part, mode, "mid"),
        low=fixed_cost(part, mode, "low"),
        high=fixed_cost(part, mode, "high"),
    )


def how(part: Part, mode: str) -> str:
    """The formula with its numbers, for a row's basis."""
    s = span(part, mode)
    if mode == "cuda-graphs":
        body = f"replay + {part.nodes} graph nodes x node cost + {part.kernels} kernels outside x launch gap"
    else:
        body = (
            f"max(host {part.host_s * 1e3:.2f} ms +/- {part.host_spread * 5e2:.2f}, "
            f"{part.kernels} kernels x launch gap)"
        )
    figures = f"{s.centre * 1e3:.3g} ms ({s.low * 1e3:.3g}-{s.high * 1e3:.3g})"
    return f"{body} = {figures}, {bound_by(part, mode)}-bound"


def _part(p: HostPart, mode: str, factor: float) -> Part | None:
    """The part at its smallest size (beyond it the skeleton's sampling and ISTFT, kept at
    chattts's sizes, add compute a GPU would do), in one mode; None if the profile lacks it."""
    point = min(p.points, key=lambda x: x.size)
    cost: ModeCost | None = point.modes.get(PROFILE_MODE[mode])  # type: ignore[call-overload]
    eager = point.modes.get("eager")
    if cost is None or eager is None:
        return None
    if mode == "cuda-graphs":  # no host seconds without CUDA: the graph's own costs
        if cost.graph_nodes is None:
            return None
        return Part(0.0, 0.0, cost.kernels.value, cost.graph_nodes.value)
    if cost.host_seconds is None:
        return None
    spread = (cost.host_seconds.spread or 0.0) * factor
    return Part(cost.host_seconds.value * factor, spread, cost.kernels.value)


def host_label(profile: HostProfile, where: str) -> str:
    cpu = profile.host.cpu
    return f"host profile {where} ({cpu.model}, {cpu.threads} torch thread(s), torch {cpu.torch})"


def modes_from_host(profile: HostProfile, where: str, factor: OpFactor = SOURCED_FACTOR) -> dict[str, Mode]:
    """The engine's modes as this host profile prices them, each eager op at `factor`: each mode's
    decode step and audio call fixed cost (centre, low, high) and how; a mode the profile did not
    measure is absent."""
    h: HostSection = profile.host
    label = host_label(profile, where)
    out: dict[str, Mode] = {}
    for name, flag in MODE_FLAGS.items():
        step = _part(h.parts["decode"], name, factor.value)
        audio = _part(h.parts["audio"], name, factor.value) if "audio" in h.parts else None
        if step is None:
            continue
        s = span(step, name)
        eager = f"eager ops (prefill's in every mode) {factor.source}"
        source = f"{label}, {eager}: decode step {how(step, name)}"
        a = None
        if audio is not None:
            a = span(audio, name)
            source += f"; Decoder+Vocos call {how(audio, name)}"
        out[name] = Mode(
            name, flag, s.centre, s.low, s.high, source,
            max_batch=GRAPHS_MAX_BATCH if name == "cuda-graphs" else None, audio=a,
        )  # fmt: skip
    return out


def prefill_host(profile: HostProfile, factor: OpFactor = SOURCED_FACTOR) -> list[tuple[int, float]]:
    """(rows, host seconds on a card) of the batched prefill, which runs eagerly in every mode."""
    part = profile.host.parts.get("prefill")  # type: ignore[call-overload]
    if part is None:
        return []
    out = []
    for p in part.points:
        eager = p.modes.get("eager")
        if eager is not None and eager.host_seconds is not None:
            gap = eager.kernels.value * KERNEL_COSTS["launch_gap"].at("mid")
            out.append((p.size, max(eager.host_seconds.value * factor.value, gap)))
    return out


def sources() -> str:
    """Where each per-kernel cost comes from, for the plan's defaults."""
    return "; ".join(
        f"{k} {c.low * 1e6:.2g}-{c.high * 1e6:.2g} us ({c.source})" for k, c in KERNEL_COSTS.items()
    )


def host_profile(
    path: str | None, profiles: list[tuple[str, ModelProfile]] | None = None
) -> tuple[HostProfile, str]:
    """--host-profile FILE; else the host profile the first card profile recorded of the CPU beside
    its card (`profile --modes all` on a GPU), as op_factor takes that card's per-op factor; else
    the host profile shipped with ttsperf. And how to name it."""
    if path is not None:
        return load_host_profile(path), path
    for where, prof in profiles or []:
        if prof.host is not None and prof.device.kind != "cpu":
            return HostProfile(host=prof.host), f"{prof.host.cpu.model} beside {prof.device.name}, {where}"
    return default_host_profile(), f"shipped {SHIPPED_HOST}"


@functools.cache
def default_modes() -> dict[str, Mode]:
    """The modes as the host profile shipped with ttsperf prices them."""
    return modes_from_host(*host_profile(None))
