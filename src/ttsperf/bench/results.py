"""The BenchRun contract (versioned JSON) and the per-request CSV.

Times in records are seconds on one monotonic clock whose zero is the start of the run; telemetry
samples use the same clock, so a GPU sample and a request can be lined up exactly.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field, model_validator

SCHEMA = "ttsperf.benchrun/1"

ERROR_CLASSES = (
    "connect",
    "timeout",
    "http_4xx",
    "http_5xx",
    "truncated",
    "disconnected",
    "bad_audio",
    "other",
)

# Written into every result, so a reader never has to guess what a number means.
FORMULAS = {
    "window_s": "T = max(t_end) - min(t_send) over measured (post warm-up) requests",
    "latency_s": "t_end - t_send (successes only)",
    "latency_from_intended_s": "t_end - t_sched (coordinated-omission corrected)",
    "queue_s": "t_send - t_sched: client-side wait and send lag (intended vs actual send)",
    "ttfa_s": "t_first_audio - t_send, first chunk holding audio samples",
    "gap_s": "t_chunk[k] - t_chunk[k-1], pooled over requests",
    "rtf": "(t_end - t_send) / audio_seconds, per request",
    "throughput_rps": "successes / T",
    "audio_seconds_per_s": "sum(audio_seconds) / T (RTFx)",
    "system_rtf": "T / sum(audio_seconds)",
    "decode_steps_per_s": "sum(X-Decode-Steps) / T, when the server reports it",
    "goodput_rps": "#(successes meeting every per-request SLO bound) / T",
    "underrun_s": "player starts at first audio, plays in real time: max_k(t_k - t_1 - audio before k)",
    "naive_throughput_rps": "n / sum(latencies): the guide's formula, WRONG under concurrency, for contrast",
    "percentiles": "numpy linear interpolation between order statistics, from any n >= 1",
    "percentile_ci": "pXX_ci = [x_(l), x_(u)]: distribution-free two-sided interval of config.confidence "
    "(binomial order statistics); an end is null where n is too small for it to exist",
    "underrun_dist_s": "underrun_s per request, as a distribution (n = requests with audio chunks)",
    "gpu": "util and power: mean of samples inside the window; memory: max inside the window",
}


CI = list[float | None] | None  # [low, high] of a percentile; an end n cannot give is None


class Dist(BaseModel):
    """A sample's summary: each percentile with its confidence interval, beside its n."""

    n: int = 0
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p50_ci: CI = None
    p90: float | None = None
    p90_ci: CI = None
    p95: float | None = None
    p95_ci: CI = None
    p99: float | None = None
    p99_ci: CI = None


VerdictStatus = Literal["pass", "fail", "inconclusive"]


class _Judged(BaseModel):
    """A status of pass / fail / inconclusive, with `passed` kept in the JSON for older readers."""

    status: VerdictStatus = "inconclusive"

    @computed_field
    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @model_validator(mode="before")
    @classmethod
    def _from_v1(cls, data: Any) -> Any:
        # a run.json written before verdicts had three outcomes holds only `passed`
        if isinstance(data, dict) and "status" not in data and "passed" in data:
            return {**data, "status": "pass" if data["passed"] else "fail"}
        return data


class Constraint(_Judged):
    name: str
    op: str
    bound: float
    value: float | None = None
    margin: float | None = None  # bound - value for <=, value - bound for >=; negative = failing
    n: int | None = None  # samples behind a distribution's statistic
    ci: CI = None  # a percentile's [low, high] at the run's confidence; the verdict reads these ends
    settle_n: int | None = None  # inconclusive: about how many samples would decide it
    note: str = ""


class Verdict(_Judged):
    constraints: list[Constraint] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list, description="failing constraints, one line each")
    undecided: list[str] = Field(default_factory=list, description="inconclusive ones, with the n to settle")


class Strategy(BaseModel):
    kind: str  # "concurrent" (closed loop) or "rate" (open loop)
    concurrency: int | None = None
    rate: float | None = None
    arrival: str | None = None
    max_concurrency: int | None = None
    # closed loop of listeners: each plays its reply, then waits this long before the next request
    think_s: float | None = None
    # closed loop: its senders start one after another over this many seconds, not all at once
    ramp_s: float | None = None

    @property
    def label(self) -> str:
        if self.kind == "concurrent":
            return (
                f"concurrent@{self.concurrency}"
                + ("" if self.think_s is None else f",think{self.think_s:g}s")
                + (f",ramp{self.ramp_s:g}s" if self.ramp_s else "")
            )
        cap = f",max{self.max_concurrency}" if self.max_concurrency else ""
        return f"{self.arrival}@{self.rate:g}/s{cap}"

    @property
    def load(self) -> float:
        return float(self.concurrency if self.kind == "concurrent" else self.rate)


class RequestRecord(BaseModel):
    i: int
    point: int
    warmup: bool
    url: str
    chars: int
    expected_audio_s: float
    t_sched: float
    t_send: float | None = None
    t_first_audio: float | None = None
    t_end: float | None = None
    status: int | None = None
    error: str | None = None
    detail: str = ""
    bytes: int = 0
    audio_s: float | None = None
    chunks: int = 0
    chunk_t: list[float] = Field(default_factory=list, description="arrival of each audio chunk (run clock)")
    chunk_audio_s: list[float] = Field(default_factory=list, description="audio seconds received by then")
    server_audio_s: float | None = None
    decode_steps: float | None = None
    prompt_tokens: float | None = None  # the server's X-Prompt-Tokens (ttsperf serve), for plan --like
    server_queue_s: float | None = None
    server_inference_s: float | None = None
    # False until the response is fully judged (audio checked); a run cut short by Ctrl-C drops such.
    done: bool = Field(False, exclude=True)

    @property
    def ok(self) -> bool:
        return self.error is None and self.t_end is not None


class PointResult(BaseModel):
    strategy: Strategy
    label: str
    requests: int
    warmup: int
    successes: int
    window_s: float
    throughput_rps: float
    audio_seconds_per_s: float
    system_rtf: float | None
    decode_steps_per_s: float | None
    goodput_rps: float | None
    naive_throughput_rps: float | None
    latency_s: Dist
    latency_from_intended_s: Dist
    queue_s: Dist
    ttfa_s: Dist
    gap_s: Dist
    rtf: Dist
    underrun_s: Dist = Field(default_factory=Dist, description="per-request worst stall")
    underrun: dict[str, Any]
    errors: dict[str, int]
    error_rate: float
    error_examples: dict[str, str] = Field(default_factory=dict)
    max_in_flight: int
    achieved_send_rate: float | None = None
    telemetry: dict[str, float] = Field(default_factory=dict)
    slo: Verdict | None = None
    added_requests: int = Field(0, description="sent past --requests by --until-decided to decide the SLO")


class ServerSettings(BaseModel):
    """What a `ttsperf serve` under test said about itself (`GET /healthz`, read once before the
    load): the settings `plan --predict --like` needs to predict the server that ran."""

    source: str = Field(description="where it was read, e.g. http://127.0.0.1:8080/healthz")
    version: str | None = None  # ttsperf's on the server
    status: str | None = None  # ok | draining | engine stopped, when read
    mode: Literal["eager", "compile", "cuda-graphs"] = Field(
        description="the engine mode as plan names it: the switch that applied (CUDA graphs over compile)"
    )
    dtype: str | None = None
    int8: bool = False
    max_batch: int | None = None
    max_queue: int | None = None
    engines: int | None = None  # serve --engines: engine processes, each with max_batch and max_queue
    first_chunk_steps: int | None = None
    steps_per_turn: int | None = None  # serve --steps-per-turn: decode steps per host turn
    chunk_steps: int | None = None
    max_new_tokens: int | None = None
    device: str | None = None
    model: str | None = None
    weights: str | None = None  # synthetic | assets

    def summary(self) -> str:
        """One line, e.g. `cuda-graphs, fp16, max batch 256, queue 256, first chunk 24 steps`."""
        parts = [self.mode, *([self.dtype] if self.dtype else []), *(["int8"] if self.int8 else [])]
        if self.max_batch is not None:
            parts.append(f"max batch {self.max_batch}")
        if self.max_queue is not None:
            parts.append(f"queue {self.max_queue}")
        if self.engines is not None and self.engines > 1:
            parts.append(f"{self.engines} engines, each with that batch and queue")
        if self.first_chunk_steps is not None:
            parts.append(f"first chunk {self.first_chunk_steps} steps")
        if self.steps_per_turn is not None and self.steps_per_turn > 1:
            parts.append(f"{self.steps_per_turn} steps a turn")
        return ", ".join(parts)


class BenchRun(BaseModel):
    schema_: str = Field(SCHEMA, alias="schema")
    tool_version: str
    created_utc: str
    interrupted: bool = False
    targets: list[str]
    adapter: str
    config: dict[str, Any]
    config_sources: dict[str, str] = Field(default_factory=dict, description="default | file | env | flag")
    workload: dict[str, Any]
    server: ServerSettings | None = Field(
        None, description="the server's settings from its /healthz (ttsperf serve); None: not said"
    )
    server_note: str = Field("", description="why `server` is None: not ttsperf, or no answer")
    formulas: dict[str, str] = Field(default_factory=lambda: dict(FORMULAS))
    points: list[PointResult] = Field(default_factory=list)
    slo: Verdict | None = None
    find_max: dict[str, Any] | None = None
    telemetry_notes: list[str] = Field(default_factory=list)
    telemetry: list[dict[str, float]] = Field(default_factory=list)
    records: list[RequestRecord] = Field(default_factory=list)

    model_config = {"populate_by_name": True}

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)

    @classmethod
    def read(cls, path: str | Path) -> BenchRun:
        """Load a run.json (for `report`, `plan` or a CI check); refuses another schema version."""
        from ttsperf.errors import UserError

        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{path}: not a readable run.json ({exc})") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise UserError(f"{path}: schema {found!r}, expected {SCHEMA!r}")
        return cls.model_validate(data)


CSV_FIELDS = [
    "point", "i", "warmup", "url", "chars", "expected_audio_s", "t_sched", "t_send", "t_first_audio",
    "t_end", "e2e_s", "ttfa_s", "rtf", "status", "error", "detail", "bytes", "audio_s", "chunks",
    "server_audio_s", "decode_steps", "prompt_tokens", "server_queue_s", "server_inference_s",
]  # fmt: skip


def write_csv(path: Path, records: list[RequestRecord]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in records:
            row = r.model_dump(exclude={"chunk_t", "chunk_audio_s"})
            if r.ok and r.t_send is not None:
                row["e2e_s"] = r.t_end - r.t_send
                row["ttfa_s"] = None if r.t_first_audio is None else r.t_first_audio - r.t_send
                row["rtf"] = (r.t_end - r.t_send) / r.audio_s if r.audio_s else None
            w.writerow(row)


def write_outputs(run: BenchRun, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    # whole or not at all: a second Ctrl-C ends bench at once, perhaps in the middle of this write
    tmp = out / "run.json.part"
    tmp.write_text(run.to_json(), encoding="utf-8")
    tmp.replace(out / "run.json")
    write_csv(out / "requests.csv", run.records)
    return [out / "run.json", out / "requests.csv"]
