"""Per-card models: a catalog GPU (or a profiled device) -> its memory model and step-time model.

A profile calibrates the card it was measured on (same catalog name, or the profiled device
itself when it is not in the catalog, e.g. this CPU); every other card uses the documented
defaults. Measured weights bytes and KV bytes/token hold for any card at the same dtype.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, replace

from ttsperf import facts as F
from ttsperf.errors import UserError
from ttsperf.plan.catalog import Catalog, Gpu
from ttsperf.plan.memory import MemoryModel, Workload, card_bytes
from ttsperf.plan.schema import Basis
from ttsperf.plan.steptime import (
    DEFAULT_T_CHUNK_SOURCE,
    DEFAULT_T_REQUEST_SOURCE,
    Correction,
    StepModel,
    default_model,
    fit_step_times,
    roofline_bases,
)
from ttsperf.profile.schema import MaxBatchPoint, Measured, ModelProfile
from ttsperf.revisions import changed_since


@dataclass
class Card:
    name: str
    memory_bytes: float
    memory: MemoryModel
    step: StepModel | None  # None: the card cannot run this dtype
    basis: dict[str, Basis] = field(default_factory=dict)
    note: str = ""
    profiled: bool = False
    tdp_w: float | None = None  # catalog TDP, for power and energy
    searched: list[MaxBatchPoint] = field(default_factory=list)  # profile --max-batch-search here
    searched_in: str = ""  # the profile's path
    device: str = "gpu"  # "other": a profiled device that is not a catalog GPU (e.g. this CPU)
    mode: str = ""  # the engine mode a profile of this card was measured in (MODES), else ""
    # a profile of every mode (profile --modes): the card's step in each mode it measured
    mode_steps: dict[str, StepModel] = field(default_factory=dict)
    # Measured with an engine that has changed since (ttsperf.revisions): what changed, and the
    # same card projected for today's engine, planned beside it so its row can show both.
    engine_changes: list[str] = field(default_factory=list)
    projected_now: Card | None = None

    def max_batch(self, w: Workload, cap: int | None = None) -> tuple[int, Basis]:
        """Largest batch for the workload: searched on this card when its profile has it, else the
        memory model's projection."""
        projected = self.memory.max_batch(self.memory_bytes, w, cap=cap)
        prompt, new = w.serve_limits()
        basis = Basis(
            kind="projected",
            how=(
                "largest B with runtime + weights + frag x (B x slot + transients(B)) <= card memory; "
                f"slot = serve's reservation for --max-prompt-tokens {prompt} + --max-new-tokens {new}"
            ),
        )
        if not self.searched:
            return projected, basis
        ctx = w.kv_tokens
        longer = [m for m in self.searched if m.context >= ctx]
        m = min(longer, key=lambda p: p.context) if longer else max(self.searched, key=lambda p: p.context)
        found = f"{m.max_batch} at context {m.context} found by --max-batch-search in {self.searched_in}"
        if m.limit == "cap":
            basis.how += f"; the search stopped at its cap ({found}), so the projection stands"
            return projected, basis
        if m.context == ctx:
            return min(m.max_batch, cap or m.max_batch), Basis(kind="measured", how=found)
        # KV bytes dominate what a row holds; scale the searched batch by the per-row KV ratio
        batch = int(m.max_batch * (m.context + 1) / (ctx + 1))
        how = f"{found}, scaled by KV tokens per row ({m.context + 1} -> {ctx + 1})"
        return min(batch, cap or batch), Basis(kind="projected", how=how)


def profiled_name(p: ModelProfile) -> str:
    """The row of a profiled device that is not a catalog card (what --price names it by)."""
    return f"{p.device.name} (profiled)"


def plan_dtype(profiles: list[tuple[str, ModelProfile]], dtype: str | None) -> str:
    """--dtype if given, else the GPU profiles' dtype (they must agree), else fp16.

    A CPU profile's dtype is its own (fp32 or bf16 is what a CPU runs well), never the GPUs':
    its row is planned at its dtype, apart from the GPUs."""
    if dtype:
        if dtype not in F.BYTES_PER_DTYPE:
            raise UserError(f"--dtype: expected one of {', '.join(F.BYTES_PER_DTYPE)}, found {dtype!r}")
        return dtype
    kinds = {p.model.dtype for _, p in profiles if p.device.kind != "cpu"}
    if len(kinds) > 1:
        raise UserError(
            f"--profile: the GPU profiles use different dtypes ({', '.join(sorted(kinds))}); pass --dtype"
        )
    return kinds.pop() if kinds else "fp16"


_VENDOR_WORDS = {"nvidia", "geforce", "tesla", "amd", "instinct", "radeon"}


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t and t not in _VENDOR_WORDS]


def match_device(device: str, names: list[str]) -> str | None:
    """The catalog card a profiled device is, from the name torch reports, or None.

    "NVIDIA GeForce RTX 4090" -> "RTX 4090"; "NVIDIA A100-SXM4-40GB" -> "A100 40GB SXM" (every
    catalog token equals, or failing that, if a word, starts a device token; the most specific card
    wins; a tie is no match, so the device gets a row of its own rather than a wrong card's numbers).
    """
    dev = _tokens(device)
    if not dev:
        return None
    # a word may abbreviate ("sxm" for "sxm4"); a model number may not ("h20" is not "h200")
    for same in (lambda a, b: a == b, lambda a, b: a == b or (a.isalpha() and b.startswith(a))):
        hits = [n for n in names if _tokens(n) and all(any(same(t, d) for d in dev) for t in _tokens(n))]
        if hits:
            most = max(len(_tokens(n)) for n in hits)
            best = [n for n in hits if len(_tokens(n)) == most]
            return best[0] if len(best) == 1 else None
    # A name with no form factor ("NVIDIA H200": torch names the SXM part plainly) is the catalog's
    # card of that model when the catalog has one form of it; two forms ("H100 PCIe", "H100 SXM")
    # and it is no guess.
    if not any(_is_form(d) for d in dev):
        hits = [n for n in names if (t := [x for x in _tokens(n) if not _is_form(x)]) and set(t) <= set(dev)]
        return hits[0] if len(hits) == 1 else None
    return None


def _is_form(token: str) -> bool:
    """A form-factor word of a card's name: sxm, sxm4, pcie, nvl."""
    return re.fullmatch(r"sxm\d*|pcie|nvl", token) is not None


def _memory_model(dtype: str, profiles: list[tuple[str, ModelProfile]]) -> MemoryModel:
    for path, p in profiles:
        if p.model.dtype == dtype and p.model.config == "chattts":
            basis = {
                "weights_bytes": Basis.measured(f"measured in {path}: {p.weights_bytes.how}"),
                "kv_bytes_per_token": Basis.measured(f"measured in {path}: {p.kv_bytes_per_token.how}"),
            }
            return MemoryModel(dtype, p.weights_bytes.value, p.kv_bytes_per_token.value, basis=basis)
    return MemoryModel(dtype)


def _calibrate(card: Card, path: str, p: ModelProfile, dtype: str, any_config: bool = False) -> None:
    """Fit the step model (and the runtime memory term) of `card` to a profile measured on it.
    any_config: a profile of another config (tiny) calibrates too (plan --predict of that model)."""
    if p.measured_modes():
        _calibrate_modes(card, path, p, dtype, any_config)
        return
    if p.model.dtype != dtype or (p.model.config != "chattts" and not any_config):
        card.note = f"profile {path} is {p.model.config}/{p.model.dtype}, plan is chattts/{dtype}: not used"
        return
    pts = [(s.batch, s.context, s.seconds.value) for s in p.steps]
    assert card.step is not None
    fit = fit_step_times(pts, dtype, card.step.kv_per_token, where=path)
    how = f"least-squares fit to {fit.n} step times measured in {path} (relative RMS error {fit.rel_rms:.1%})"
    card.step.t_fixed, card.step.inv_bw = fit.t_fixed, fit.inv_bw
    card.step.basis["t_fixed"] = Basis.measured(f"{fit.t_fixed * 1e3:.2f} ms, {how}")
    card.step.basis["mbu"] = Basis.measured(f"1/(BW x MBU) = {fit.inv_bw * 1e9:.4g} s/GB, {how}")
    # the profile's own estimates, beside ours, so a disagreement is visible
    if p.fixed_step_overhead_s is not None:
        card.step.basis[
            "t_fixed"
        ].how += f"; the profile's own estimate: {p.fixed_step_overhead_s.value * 1e3:.2f} ms"
    if p.host_per_row_step_s is not None:
        card.step.t_row = p.host_per_row_step_s.value
        card.step.basis["t_row"] = Basis.measured(
            f"{card.step.t_row * 1e6:.1f} us, measured in {path}: {p.host_per_row_step_s.how}"
        )
    # a server on the CPU it computes on hands its chunks out on that CPU: the engine waits
    card.step.chunk_serial = p.device.kind == "cpu"
    if card.step.chunk_serial:
        card.step.basis["t_chunk"] = Basis.sourced(
            f"{card.step.t_chunk * 1e3:g} ms per chunk, on the engine's CPU (a CPU profile), "
            + DEFAULT_T_CHUNK_SOURCE
        )
        card.step.basis["t_request"] = Basis.sourced(
            f"{card.step.t_request * 1e3:g} ms per request taken in, on the engine's CPU (a CPU "
            "profile), " + DEFAULT_T_REQUEST_SOURCE
        )
    if p.host_per_step_s is not None:
        card.step.t_host = p.host_per_step_s.value
        card.step.basis["t_host"] = Basis.measured(
            f"{card.step.t_host * 1e6:.0f} us per step, measured in {path}: {p.host_per_step_s.how}"
        )
    if p.achieved_bandwidth_gbs is not None:
        card.step.basis[
            "mbu"
        ].how += f"; the profile's achieved bandwidth: {p.achieved_bandwidth_gbs.value:.4g} GB/s"
    if fit.inv_flops is not None:
        card.step.inv_flops = fit.inv_flops
        card.step.basis["mfu"] = Basis.measured(f"1/(peak x MFU) = {fit.inv_flops * 1e12:.4g} s/TFLOP, {how}")
    else:
        card.step.basis["mfu"].how += " (not identified: no measured point was compute-bound)"
    card.step.correction = Correction.from_points(pts, card.step)
    card.step.basis["correction"] = Basis.measured(
        f"step times x measured/roofline at the {len(pts)} measured (batch, context) points of {path}, "
        "interpolated in log batch and log context; nearest edge outside"
    )
    _fit_calls(card.step, path, p)
    if p.memory:
        _fit_runtime_memory(card, path, p)
    card.searched, card.searched_in = list(p.max_batch), path
    card.profiled = True
    card.mode = profile_mode(p)


def _calibrate_modes(card: Card, path: str, p: ModelProfile, dtype: str, any_config: bool) -> None:
    """A profile of every mode: the card's step in each mode, each fitted as a profile of that one
    mode would be; the card's own step (and mode) is the first mode measured."""
    before = copy.deepcopy(card)
    for mode in p.measured_modes():
        one = copy.deepcopy(before)
        _calibrate(one, path, profile_for_mode(p, mode), dtype, any_config)
        if one.profiled:
            card.mode_steps[mode] = one.step  # type: ignore[assignment]
    _calibrate(card, path, profile_for_mode(p, p.measured_modes()[0]), dtype, any_config)


def profile_for_mode(p: ModelProfile, mode: str) -> ModelProfile:
    """A profile of every mode seen as a profile of `mode` alone: that mode's steps, prefill and
    audio calls. Its steps are the engine's whole step, which holds the host's work per row and
    per step that the eager grid's profile measures beside its bare step: counted once, there."""
    m = p.modes[mode]
    runtime = {k: v for k, v in p.runtime.items() if k not in ("compile", "cuda_graphs")}
    runtime |= (
        {"compile": True} if mode == "compile" else {"cuda_graphs": True} if mode == "cuda-graphs" else {}
    )
    inside = Measured(
        value=0.0, unit="s", how=f"inside the engine's whole step measured in {mode} (profile --modes)"
    )
    return p.model_copy(
        update={
            "steps": m.steps, "prefill": m.prefill, "audio_calls": m.audio_calls, "runtime": runtime,
            "host_per_row_step_s": inside, "host_per_step_s": inside, "fixed_step_overhead_s": None,
            "modes": {},
        }
    )  # fmt: skip


def profile_mode(p: ModelProfile) -> str:
    """The engine mode a profile's steps were measured in."""
    rt = p.runtime
    return "cuda-graphs" if rt.get("cuda_graphs") else "compile" if rt.get("compile") else "eager"


def _fit_calls(step: StepModel, path: str, p: ModelProfile) -> None:
    """The prefill and Decoder+Vocos calls measured in a profile, where it has them."""
    step.prefill_points = [(q.rows * q.prompt_tokens, q.seconds.value) for q in p.prefill]
    if p.prefill:
        step.basis["prefill"] = Basis.measured(
            f"interpolated from {len(p.prefill)} prefill times measured in {path}"
        )
    if p.audio_calls:
        step.audio_points = [(a.rows, a.seconds.value) for a in p.audio_calls]
        rows = ", ".join(str(a.rows) for a in p.audio_calls)
        step.basis["vocoder"] = Basis.measured(
            f"the engine's batched call measured in {path} at {rows} rows, interpolated in rows"
        )
    elif p.vocoder_chunk_seconds is not None:
        step.vocoder_call_s = p.vocoder_chunk_seconds.value
        step.basis["vocoder"] = Basis.measured(
            f"one chunk's call measured in {path}: {p.vocoder_chunk_seconds.how}"
        )
    elif p.decode_seconds_per_audio_second is not None:
        step.vocoder_s_per_audio_s = p.decode_seconds_per_audio_second.value
        step.basis["vocoder"] = Basis.measured(f"measured in {path}: {p.decode_seconds_per_audio_second.how}")


def _fit_runtime_memory(card: Card, path: str, p: ModelProfile) -> None:
    """The runtime term set so the model covers every measured peak (the rest of the model is
    architecture): what the measurements hold beyond weights + KV + transients."""
    # The points are decode-step peaks, so no prefill term (prompt 1).
    excess = []
    for m in p.memory:
        b = card.memory.breakdown_at(m.batch, m.context, 1, F.STREAM_CHUNK_STEPS)
        excess.append(m.peak_bytes.value - (b["total"] - b["runtime"]))
    card.memory.runtime_bytes = max(0.0, max(excess))
    card.memory.basis["runtime_bytes"] = Basis.measured(
        f"fitted: the largest excess of {len(excess)} measured peaks in {path} over weights+KV+transients"
    )


def build_cards(
    catalog: Catalog,
    profiles: list[tuple[str, ModelProfile]],
    dtype: str,
    any_config: bool = False,
    shipped: list[tuple[str, ModelProfile]] | None = None,
) -> list[Card]:
    """The catalog's cards, each calibrated by the user's profile of it, else by ttsperf's shipped
    measurement of it (`shipped`, at the plan's dtype), else projected from the catalog."""
    mem_template = _memory_model(dtype, profiles)
    cards: list[Card] = []

    def memory() -> MemoryModel:
        return MemoryModel(
            dtype,
            mem_template.weights_bytes,
            mem_template.kv_bytes_per_token,
            basis={k: b.model_copy() for k, b in mem_template.basis.items()},
        )

    for gpu in catalog.gpus.values():
        cards.append(_catalog_card(gpu, dtype, memory()))
    by_name = {c.name: c for c in cards}
    for path, p in profiles:
        # match against the whole catalog: a profile of a card left out by --gpus adds no row
        name = match_device(p.device.name, catalog.known or list(catalog.gpus))
        if name is not None:
            if name in by_name and by_name[name].step is not None:
                _calibrate_catalog_card(by_name[name], path, p, dtype, any_config)
            continue
        # The profiled device is not a catalog card (e.g. this CPU): a row of its own, at the
        # profile's dtype, shown apart from the GPUs and never recommended.
        if p.device.memory_bytes is None:
            raise UserError(f"{path}: field 'device.memory_bytes': expected the device's memory, found null")
        own = p.model.dtype
        template = _memory_model(own, profiles)
        card = Card(
            name=profiled_name(p),
            memory_bytes=float(p.device.memory_bytes),
            memory=template,
            step=StepModel(
                dtype=own,
                kv_per_token=float(template.kv_bytes_per_token),
                t_fixed=0.0,
                inv_bw=0.0,
                inv_flops=0.0,
                basis={"mfu": Basis.sourced("0: compute term off"), **roofline_bases()},
            ),
            basis={"memory": Basis(kind="measured", how=f"{path}: device.memory_bytes")},
            device="other",
        )
        _calibrate(card, path, p, own, any_config)
        if not card.profiled:  # its steps were not measured for this model: nothing to plan it from
            card.step = None
        cards.append(card)
    for path, p in shipped or []:
        card = by_name.get(match_device(p.device.name, list(by_name)) or "")
        if card is not None and not card.profiled and card.step is not None and p.model.dtype == dtype:
            _calibrate_catalog_card(card, path, p, dtype)
    return cards


def _calibrate_catalog_card(
    card: Card, path: str, p: ModelProfile, dtype: str, any_config: bool = False
) -> None:
    """_calibrate, keeping the card's projection beside it when the profile measured an engine that
    has changed since: a measurement is of the engine that ran, the projection of today's."""
    changes = changed_since(p.engine_revision)
    if changes:
        card.projected_now = copy.deepcopy(card)  # _calibrate changes the card's models in place
        card.engine_changes = changes
    _calibrate(card, path, p, dtype, any_config)


def with_overheads(
    step: StepModel,
    t_fixed: float | None,
    t_how: str | None,
    vocoder_fixed: float | None = None,
    vocoder_how: str | None = None,
) -> StepModel:
    """A copy of `step` at another per-step overhead and Decoder+Vocos launch cost (None: as it is),
    each with how it was set: an engine mode's planned figure, or a what-if flag. The one place
    plan's settings search and `plan --predict` re-set a card's overheads."""
    out = replace(step, basis={k: b.model_copy() for k, b in step.basis.items()})
    if t_fixed is not None:
        out.t_fixed = t_fixed
        out.basis["t_fixed"] = Basis.sourced(t_how or "")
    if vocoder_fixed is not None:
        out.vocoder_fixed = vocoder_fixed
        out.basis["vocoder"].how += vocoder_how or ""
    return out


def _catalog_card(gpu: Gpu, dtype: str, memory: MemoryModel) -> Card:
    peak = gpu.tflops.get(dtype)
    card = Card(
        name=gpu.name,
        memory_bytes=card_bytes(gpu.memory_gb),
        memory=memory,
        step=None,
        tdp_w=gpu.tdp_w,
        basis={
            "memory": Basis(kind="sourced", how=f"catalog memory_gb {gpu.memory_gb:g} (as GiB): {gpu.source}")
        },
    )
    if peak is None:
        card.note = f"no {dtype} support listed in the catalog"
        return card
    card.step = default_model(dtype, float(memory.kv_bytes_per_token), gpu.bandwidth_gbs, peak)
    card.step.basis["bandwidth"] = Basis.sourced(
        f"{gpu.bandwidth_gbs:g} GB/s, {peak:g} TFLOPS {dtype} (catalog: {gpu.source[:60]}...)"
    )
    return card
