"""Plan: the versioned JSON `ttsperf plan` writes (pydantic).

Every number in a row carries a basis: `measured` (read from a profile of that card),
`projected` (computed by the models here; `how` gives the formula and its inputs) or `sourced`
(copied from a data file or a flag, e.g. a price; `how` names the row).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ttsperf import __version__
from ttsperf.slo import spec_of

PLAN_SCHEMA = "ttsperf.plan"
PLAN_VERSION = 1


class Basis(BaseModel):
    """Where one number comes from: measured (a profile of this card), projected (computed here)
    or sourced (a data file, a flag, a documented default), and how. The one provenance record
    the step and memory models keep per parameter, and a row's basis per number."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["measured", "projected", "sourced"]
    how: str

    @classmethod
    def measured(cls, how: str) -> Basis:
        return cls(kind="measured", how=how)

    @classmethod
    def projected(cls, how: str) -> Basis:
        return cls(kind="projected", how=how)

    @classmethod
    def sourced(cls, how: str) -> Basis:
        return cls(kind="sourced", how=how)


class Default(BaseModel):
    """An assumption the plan used, with where it comes from."""

    model_config = ConfigDict(extra="forbid")
    value: float | str
    source: str


class RowSettings(BaseModel):
    """The engine settings a row is planned at, and the `ttsperf serve` flags that set them."""

    model_config = ConfigDict(extra="forbid")
    dtype: str
    mode: str = Field(description="eager | compile | cuda-graphs, or what-if (--step-overhead)")
    step_overhead_s: float = Field(description="per-step fixed overhead planned for this mode")
    step_overhead_range_s: list[float] | None = Field(
        None, description="[low, high] sourced range of that overhead (null: measured or a what-if)"
    )
    first_chunk_steps: int
    max_batch: int
    serve_flags: str = Field(description="the `ttsperf serve` command line for these settings")
    searched: str = Field("", description="what the search compared to choose these settings")

    def words(self, short: bool = False, dtype: bool = True) -> str:
        """'cuda-graphs, fp16, first chunk 24 steps'; short (a table cell): 'graphs fp16 c24', or
        'graphs c24' without the dtype (a table whose rows share one says it in its header)."""
        if short:
            mode = _SHORT_MODE.get(self.mode, self.mode)
            return (
                f"{mode} {self.dtype} c{self.first_chunk_steps}"
                if dtype
                else f"{mode} c{self.first_chunk_steps}"
            )
        return f"{self.mode}, {self.dtype}, first chunk {self.first_chunk_steps} steps"


_SHORT_MODE = {"cuda-graphs": "graphs"}


class PlanRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gpu: str
    fits: bool
    max_batch: int = Field(description="most sequences of this workload that fit in memory")
    step_ms: float | None = Field(description="decode step at the target load per GPU")
    p50_s: float | None = Field(description="E2E latency at the target load per GPU")
    p99_s: float | None
    ttfa_p99_s: float | None
    rtf_p99: float | None = Field(None, description="E2E / audio seconds, P99, at the target load per GPU")
    underrun_p99_s: float | None = Field(None, description="worst playback stall per request, P99")
    mean_batch: float | None = Field(None, description="rows per decode step at the target load per GPU")
    max_streams: int | None = Field(description="most streams per GPU meeting the SLO (streams load)")
    max_rate_rps: float | None = Field(description="most requests/s per GPU meeting the SLO (rate load)")
    meets_slo: bool
    gpus_needed: int | None
    replicas: int | None = Field(None, description="`serve --ray` replicas at one GPU each (= gpus_needed)")
    machines: int | None = Field(None, description="ceil(gpus_needed / inputs.gpus_per_machine)")
    currency: str = Field("USD", description="of the three usd_per_* costs (named before --currency)")
    usd_per_gpu_hour: float | None = Field(description="in `currency`; basis says the price row and any rate")
    usd_per_hour: float | None = Field(description="gpus_needed x usd_per_gpu_hour, in `currency`")
    usd_per_audio_hour: float | None = Field(
        description="at the most load per GPU meeting the SLO, in `currency`"
    )
    watts: float | None = Field(None, description="TDP x busy fraction at the target load per GPU")
    kwh_per_audio_hour: float | None = Field(None, description="energy per audio hour at capacity")
    memory_bytes: dict[str, float] = Field(description="memory model at max_batch")
    note: str = ""
    basis: dict[str, Basis]
    device: Literal["gpu", "other"] = Field(
        "gpu", description="other: a profiled device that is not a catalog GPU; never recommended"
    )
    settings: RowSettings | None = None
    binding: str | None = Field(
        None,
        description="what stops more load per GPU: ttfa, underrun, e2e, rtf (an SLO limit), host "
        "(that limit, with the step mostly fixed overhead), memory or max batch (the batch is "
        "full), throughput (no SLO: the saturated card)",
    )
    binding_how: str = ""
    max_streams_range: list[int] | None = Field(
        None, description="[low, high] streams per GPU at the ends of the overhead's sourced range"
    )
    max_rate_range: list[float] | None = Field(
        None, description="[low, high] req/s per GPU at the ends of the overhead's sourced range"
    )
    projected_now: list[float] | None = Field(
        None,
        description="a card measured with an engine that has changed since: [capacity, low, high] the "
        "same card projects for today's engine (the note says what changed)",
    )
    tied_with: list[str] = Field(
        [],
        description="cards whose capacity is within the search's resolution of this one's: the "
        "simulation does not tell them apart (their order is by cost)",
    )


class Slo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limits: dict[str, float] = Field(description="metric -> upper bound in seconds (rtf_p99: ratio)")
    how: str
    spec: str = Field("", description="the limits as --slo text: `ttsperf bench URL --slo SPEC` checks them")

    @model_validator(mode="after")
    def _write_spec(self) -> Slo:
        # derived here, so every writer of a Slo gets the string bench reads without passing it
        self.spec = self.spec or spec_of(self.limits)
        return self


class Recommended(BaseModel):
    """The recommendation's numbers, for a report to lead with."""

    model_config = ConfigDict(extra="forbid")
    gpu: str
    gpus_needed: int
    gpus_needed_range: list[int] | None = None
    settings: RowSettings | None
    binding: str | None
    max_streams: int | None = Field(None, description="centre streams per GPU meeting the SLO")
    max_streams_range: list[int] | None = None
    max_rate_rps: float | None = Field(None, description="centre requests/s per GPU meeting the SLO")
    max_rate_range: list[float] | None = None
    currency: str = Field("USD", description="of usd_per_gpu_hour, usd_per_hour, usd_per_audio_hour")
    usd_per_gpu_hour: float | None = None
    usd_per_hour: float | None
    usd_per_audio_hour: float | None
    measured: bool = Field(description="the card was profiled (its step times are measured)")
    projected_now: list[float] | None = Field(
        None, description="measured with an engine changed since: the row's projection for today's engine"
    )
    tied_with: list[str] = Field(
        default_factory=list, description="priced cards as good within the search's resolution, costing more"
    )
    check: str | None = Field(None, description="the `ttsperf bench` command that checks the answer")
    price: str | None = Field(None, description="whose price the cost rests on: provider, offer, date read")
    unpriced: list[str] = Field(
        default_factory=list, description="cards that meet the SLO too but have no price to compare"
    )


class ScenarioPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str
    description: str
    slo: Slo
    load: dict[str, float | str]
    objective: str
    rows: list[PlanRow]
    recommendation: str
    recommended: Recommended | None = None


class PlanInputs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profiles: list[str]
    calibration: str
    workload: dict[str, float | int | str]
    model: dict[str, float | int | str] = Field(description="sizes the memory model starts from, with how")
    catalog: str
    prices: str
    currency: str = Field("USD", description="every cost of the plan is in it (--currency)")
    fx: list[str] = Field(default_factory=list, description="exchange rates that converted a price")
    defaults: dict[str, Default]
    seed: int
    requests_per_simulation: int
    gpus_per_machine: int = Field(8, description="cards per machine, for the machines column")
    settings: dict[str, Any] = Field(default_factory=dict, description="every plan setting, resolved")
    settings_sources: dict[str, str] = Field(
        default_factory=dict, description="default | file | env | flag per setting (ttsperf plan)"
    )


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: Literal["ttsperf.plan"] = Field(PLAN_SCHEMA, alias="schema")
    version: Literal[1] = PLAN_VERSION
    created: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    ttsperf_version: str = __version__
    inputs: PlanInputs
    scenarios: list[ScenarioPlan]
    notes: list[str] = Field(default_factory=list)

    def dump(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)
