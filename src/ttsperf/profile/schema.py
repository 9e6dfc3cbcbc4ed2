"""ModelProfile: what `ttsperf profile` measured on one device, the contract `ttsperf plan` reads.

Versioned JSON (pydantic). Every number is a `Measured`: value, unit, and how it was measured
(clock, statistic, repeats), so a reader can tell a measurement from a projection. `plan` never
imports a model; this file is all it needs to know about a profile.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ttsperf.errors import UserError

PROFILE_SCHEMA = "ttsperf.profile"
PROFILE_VERSION = 3
# Version 2 added `max_batch` (profile --max-batch-search), version 3 `modes`, `per_op_host` and
# `host` (profile --modes); an older file is a valid version 3 without them, so plan still reads
# profiles written before.
READABLE_VERSIONS = (1, 2, 3)
PROFILE_MODEL = "chattts"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Measured(_Strict):
    """One measured number: value in `unit`, and how (e.g. "median of 20 steps after 5 warm-up,
    torch.cuda.synchronize before each clock read")."""

    kind: Literal["measured"] = "measured"
    value: float
    unit: str
    how: str
    spread: float | None = Field(None, description="e.g. interquartile range, same unit")
    n: int | None = Field(None, ge=1, description="repeats behind the statistic")


class DeviceInfo(_Strict):
    name: str = Field(description='e.g. "RTX 4090" (a catalog name where possible) or the CPU model')
    kind: Literal["cuda", "cpu", "mps", "other"]
    memory_bytes: int | None = Field(None, gt=0, description="total memory the device offers")
    bandwidth_gbs: float | None = Field(None, gt=0, description="peak memory bandwidth if known")
    peak_tflops: float | None = Field(
        None, gt=0, description="peak dense TFLOPS in the profile dtype if known"
    )


class ModelInfo(_Strict):
    name: Literal["chattts"] = PROFILE_MODEL
    config: str = Field(description='"chattts" (full size) or "tiny"')
    dtype: Literal["fp32", "fp16", "bf16"]
    parameters: dict[str, int] = Field(
        description="parameter count per component, as in the checkpoint (before weight norm is folded)"
    )
    synthetic: bool = Field(description="random weights of the real shapes")


class MemoryPoint(_Strict):
    batch: int = Field(ge=1)
    context: int = Field(ge=1, description="tokens per sequence in the KV cache")
    peak_bytes: Measured
    rss_bytes: Measured | None = None  # CPU: process RSS beside the engine's tensor bytes


class StepPoint(_Strict):
    batch: int = Field(ge=1)
    context: int = Field(ge=1)
    seconds: Measured


class PrefillPoint(_Strict):
    prompt_tokens: int = Field(ge=1)
    rows: int = Field(1, ge=1, description="prompts prefilled together in one call (the engine's admission)")
    seconds: Measured


class AudioCallPoint(_Strict):
    """The engine's one Decoder+Vocos call for `rows` rows emitting a streamed chunk at one step."""

    rows: int = Field(ge=1)
    seconds: Measured


class MaxBatchPoint(_Strict):
    """The largest batch that fits at one context, found by `profile --max-batch-search`."""

    context: int = Field(ge=1, description="tokens per sequence in the KV cache")
    max_batch: int = Field(ge=0, description="0: not even one sequence fits")
    limit: Literal["oom", "budget", "cap"] = Field(
        description="what stopped the search: a CUDA out-of-memory, the memory budget, or the search cap"
    )
    method: str = Field(description="how fitting was decided (OOM-safe bisection, or a budget and how)")
    budget_bytes: float | None = Field(None, description="the memory budget, when one applied")
    bytes_at_max: Measured | None = Field(None, description="memory at max_batch (allocator peak or RSS)")
    probes: list[tuple[int, bool]] = Field(
        default_factory=list, description="(batch, fits) in the order tried"
    )


# the engine's modes as serve and plan name them (plan.settings.MODE_FLAGS)
ENGINE_MODES = ("eager", "compile", "cuda-graphs")
EngineMode = Literal["eager", "compile", "cuda-graphs"]


class ModeMeasurement(_Strict):
    """What one engine mode costs on the device (`profile --modes`): the engine's whole step per
    batch, prefill per rows x prompt and the audio call per rows, each run as serve runs that mode;
    or why the mode was not measured here."""

    skipped: str = Field("", description='why the mode was not measured (e.g. "needs CUDA"); "" when it was')
    steps: list[StepPoint] = Field(default_factory=list)
    prefill: list[PrefillPoint] = Field(default_factory=list)
    audio_calls: list[AudioCallPoint] = Field(default_factory=list)
    setup_seconds: float | None = Field(
        None, ge=0, description="compiling or capturing before the first timed call (None: nothing to build)"
    )


class PerOpHost(_Strict):
    """The host's seconds per eager op on the device against the same op on a CPU tensor: how much
    more host time a card's eager launches cost than the host profile's CPU ops (plan's factor)."""

    device_op: Measured
    cpu_op: Measured
    factor: float = Field(gt=0, description="device_op / cpu_op; 1.0 on a CPU (the same op, by definition)")
    how: str


class ModelProfile(_Strict):
    schema_: Literal["ttsperf.profile"] = Field(PROFILE_SCHEMA, alias="schema")
    version: Literal[1, 2, 3] = PROFILE_VERSION
    created: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    ttsperf_version: str = ""
    engine_revision: int | None = Field(
        None, description="ttsperf.revisions.ENGINE_REVISION of the engine measured; null: before revisions"
    )
    device: DeviceInfo
    model: ModelInfo
    runtime: dict[str, bool | str | int | float] = Field(
        default_factory=dict, description="runtime switches: autocast, tf32, cudnn_benchmark, compile, ..."
    )
    weights_bytes: Measured
    kv_bytes_per_token: Measured
    memory: list[MemoryPoint] = Field(default_factory=list)
    steps: list[StepPoint] = Field(default_factory=list)
    prefill: list[PrefillPoint] = Field(default_factory=list)
    decode_seconds_per_audio_second: Measured | None = Field(
        None, description="Decoder + Vocos wall time per second of audio"
    )
    vocoder_chunk_seconds: Measured | None = Field(
        None,
        description="one row's Decoder + Vocos call over one streamed chunk (its new steps + left context)",
    )
    audio_calls: list[AudioCallPoint] = Field(
        default_factory=list,
        description="the engine's batched Decoder + Vocos call vs the rows emitting a chunk at once",
    )
    fixed_step_overhead_s: Measured | None = None
    host_per_row_step_s: Measured | None = Field(
        None, description="the engine's host work per row per step, beyond the decode step (plan's t_row)"
    )
    host_per_step_s: Measured | None = Field(
        None, description="the engine's host work per step whatever its rows, beyond the decode step"
    )
    achieved_bandwidth_gbs: Measured | None = None
    max_batch: list[MaxBatchPoint] = Field(
        default_factory=list, description="largest batch per context (profile --max-batch-search)"
    )
    modes: dict[EngineMode, ModeMeasurement] = Field(
        default_factory=dict, description="per engine mode, as serve runs it (profile --modes; version 3)"
    )
    per_op_host: PerOpHost | None = Field(None, description="an eager op's host time, device vs CPU")
    host: HostSection | None = Field(None, description="the host profile of the CPU beside the device")
    settings: dict[str, Any] = Field(default_factory=dict, description="every profile setting, resolved")
    settings_sources: dict[str, str] = Field(
        default_factory=dict, description="default | file | env | flag per setting (ttsperf profile)"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def dump(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)

    def measured_modes(self) -> list[str]:
        """The engine modes `modes` measured here (none: a single-mode profile)."""
        return [m for m in ENGINE_MODES if m in self.modes and not self.modes[m].skipped]


HOST_SCHEMA = "ttsperf.host-profile"
HOST_VERSION = 1
HOST_MODES = ("eager", "compile", "cuda_graphs")


class Counted(_Strict):
    """A number of device kernels, counted (not timed) on `counted_on`'s op graph."""

    kind: Literal["counted"] = "counted"
    value: int = Field(ge=0)
    counted_on: str = Field(description='the model config counted, e.g. "chattts"')
    how: str


class ModeCost(_Strict):
    """One part of the engine's work at one size in one mode: the host's seconds and the kernels."""

    host_seconds: Measured | None = Field(
        None, description="host work per call on the skeleton (None: the mode cannot run on this host)"
    )
    kernels: Counted = Field(description="kernels the host launches one by one per call")
    graph_nodes: Counted | None = Field(
        None, description="cuda_graphs: kernels replayed inside a captured graph (one launch for all)"
    )
    note: str = ""


class HostPoint(_Strict):
    size: int = Field(ge=1, description="the part's `size_name`: batch (decode) or rows (prefill, audio)")
    context: int | None = Field(None, description="decode: KV tokens per row during the timed steps")
    modes: dict[Literal["eager", "compile", "cuda_graphs"], ModeCost]


class HostPart(_Strict):
    what: str = Field(description="the engine's code path measured")
    size_name: Literal["batch", "rows"]
    points: list[HostPoint]


class CPUInfo(_Strict):
    model: str = Field(description="/proc/cpuinfo's model name (or platform.processor())")
    flags: list[str] = Field(default_factory=list, description="/proc/cpuinfo's flags")
    cores: int | None = Field(None, ge=1)
    threads: int = Field(ge=1, description="torch threads the host work ran on")
    torch: str = Field(description="torch version")


class HostSection(_Strict):
    """What a step costs the host, per part of the engine's work, size and mode (`profile --host`):
    host seconds on the `skeleton` config (chattts's op graph, negligible widths) and the kernels the
    same part of `chattts` launches, counted on the CPU."""

    cpu: CPUInfo
    timed_config: str = Field(description='"skeleton": the config whose host seconds were timed')
    counted_config: str = Field(description='"chattts": the config whose kernels were counted')
    dtype: Literal["fp32", "fp16", "bf16"]
    modes: list[Literal["eager", "compile", "cuda_graphs"]]
    parts: dict[Literal["decode", "prefill", "audio"], HostPart]
    how: str = Field(description="how host seconds and kernel counts were obtained, per mode")
    seconds_total: float = Field(ge=0, description="wall seconds the measurement took")


ModelProfile.model_rebuild()  # its `host` is a HostSection, defined above it only now


class HostProfile(_Strict):
    """A host profile file: `ttsperf profile --host -o host.json`; plan's --host-profile reads it."""

    schema_: Literal["ttsperf.host-profile"] = Field(HOST_SCHEMA, alias="schema")
    version: Literal[1] = HOST_VERSION
    created: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    ttsperf_version: str = ""
    host: HostSection
    settings: dict[str, Any] = Field(default_factory=dict, description="every profile setting, resolved")
    settings_sources: dict[str, str] = Field(default_factory=dict, description="default | file | env | flag")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def dump(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)


def load_host_profile(path: str | Path) -> HostProfile:
    """Read and validate a host profile; anything wrong is one UserError line naming file and field."""
    p = Path(path)
    raw = _read_json(p)
    if not isinstance(raw, dict) or raw.get("schema") != HOST_SCHEMA:
        found = raw.get("schema") if isinstance(raw, dict) else type(raw).__name__
        raise UserError(
            f"{p}: field 'schema': expected {HOST_SCHEMA!r} (ttsperf profile --host), found {found!r}"
        )
    if raw.get("version") != HOST_VERSION:
        raise UserError(f"{p}: field 'version': expected {HOST_VERSION}, found {raw.get('version')!r}")
    return _validate(HostProfile, raw, p)


SHIPPED_HOST = "host-amd-epyc.json"  # src/ttsperf/data: measured on the development machine


def default_host_profile() -> HostProfile:
    """The host profile shipped with ttsperf: measured on the development machine, its CPU named
    inside (src/ttsperf/data/host-amd-epyc.json)."""
    from importlib.resources import as_file, files

    with as_file(files("ttsperf.data") / SHIPPED_HOST) as p:
        return load_host_profile(p)


# src/ttsperf/data: cards ttsperf measured, each put together from a card's own measurements
# (scripts/build_card_h200.py says from which); plan uses one for its catalog card by default
SHIPPED_CARDS = ("card-h200-sxm.json",)


def shipped_card_profiles() -> list[tuple[str, ModelProfile]]:
    """The card profiles shipped with ttsperf -> (where it lives, the profile)."""
    from importlib.resources import as_file, files

    out = []
    for name in SHIPPED_CARDS:
        with as_file(files("ttsperf.data") / name) as p:
            out.append((f"ttsperf's measured card (src/ttsperf/data/{name})", load_profile(p)))
    return out


def _read_json(p: Path) -> object:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{p}: expected JSON, found a syntax error at line {exc.lineno}: {exc.msg}") from None


def _validate(model: type[BaseModel], raw: dict, p: Path):
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise UserError(f"{p}: field {where!r}: {err['msg']}, found {err.get('input')!r}") from None


def load_profile(path: str | Path) -> ModelProfile:
    """Read and validate a profile; anything wrong is one UserError line naming file and field."""
    p = Path(path)
    return profile_from_raw(_read_json(p), p)


def profile_from_raw(raw: object, p: Path) -> ModelProfile:
    """Validate a parsed profile (for a reader that has the JSON already); errors name `p`."""
    if not isinstance(raw, dict):
        raise UserError(f"{p}: expected a JSON object (a ttsperf profile), found {type(raw).__name__}")
    if raw.get("schema") != PROFILE_SCHEMA:
        raise UserError(f"{p}: field 'schema': expected {PROFILE_SCHEMA!r}, found {raw.get('schema')!r}")
    if raw.get("version") not in READABLE_VERSIONS:
        raise UserError(
            f"{p}: field 'version': expected {' or '.join(map(str, READABLE_VERSIONS))} (the profile "
            f"versions this ttsperf reads), found {raw.get('version')!r}"
        )
    model = raw.get("model") if isinstance(raw.get("model"), dict) else {}
    if model.get("name") != PROFILE_MODEL:
        raise UserError(f"{p}: field 'model.name': expected {PROFILE_MODEL!r}, found {model.get('name')!r}")
    return _validate(ModelProfile, raw, p)
