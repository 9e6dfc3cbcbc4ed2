"""Every `ttsperf serve` setting, once: its flags, a settings file's [serve] table and the
TTSPERF_SERVE_* variables are made from these fields (ttsperf.settings). The engine's switches and
limits keep their defaults in engine/config.py; here they get their flags and help."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from ttsperf.engine.config import EngineConfig, Switches
from ttsperf.engine.pool import MAX_ENGINES
from ttsperf.errors import UserError
from ttsperf.model.settings import ModelSettings
from ttsperf.settings import SECONDS, Flag, at_most

_E, _S = EngineConfig, Switches  # the engine's own defaults
LOG_LEVELS = ("debug", "info", "warning", "error")
RAY_ONLY = ("replicas", "autoscale", "gpus_per_replica", "address", "start_timeout")
MAX_START_SECONDS = 86_400.0  # a day: longer than any model load or cluster scale-up


class ServeSettings(ModelSettings):
    """The model, the engine's switches and limits, the HTTP server and, with --ray, the deployment."""

    model_config = SettingsConfigDict(env_prefix="TTSPERF_SERVE_")

    seed: int = Field(0, description="Seed of the synthetic weights.")
    host: str = Field("127.0.0.1", description="Address to bind; 0.0.0.0 exposes the server.")
    port: int = Field(8080, description="TCP port; 0 picks a free one (the log says which).")
    max_batch: Annotated[int | None, Flag(cli_type=str)] = Field(
        _E.max_batch, description="Rows decoded together: N, or auto (from free memory; the default)."
    )
    max_queue: int | None = Field(
        _E.max_queue,
        description="Requests waiting beyond the batch; more get 503 (default: the max batch, at least 64).",
    )
    request_timeout: float = Field(
        _E.request_timeout, description="Seconds from arrival to last audio; then 504."
    )
    # a secret: never printed (SecretStr), best given as TTSPERF_SERVE_API_KEY, not on a command line
    api_key: SecretStr | None = Field(
        None,
        description="Require 'Authorization: Bearer KEY' on /invoke and /v1/* (env TTSPERF_SERVE_API_KEY).",
    )
    # the two limits size every slot's KV at start (facts.slot_bytes): plan prints them for its workload
    max_prompt_tokens: int = Field(
        _E.max_prompt_tokens, description="Prompt tokens per request at most; longer texts get 413."
    )
    max_new_tokens: int = Field(
        _E.max_new_tokens, description="Decode steps per request at most (2048 = 43.7 s)."
    )
    first_chunk_steps: int = Field(
        _E.first_chunk_steps, description="Steps before the first streamed chunk (24 = 0.51 s)."
    )
    steps_per_turn: int = Field(
        _E.steps_per_turn,
        description="Decode steps the engine runs per host turn; its per-turn host work is spread "
        "over them (events up to that many steps later).",
    )
    drain_timeout: float = Field(60.0, description="On SIGTERM, seconds to finish accepted requests.")
    max_body_bytes: int = Field(64 * 1024, description="Larger request bodies get 413.")
    read_timeout: float = Field(
        10.0, description="Seconds a client may take to send headers, and again the body (408)."
    )
    autocast: bool = Field(_S.autocast, description="fp32 weights, fp16/bf16 matmuls.")
    tf32: Annotated[bool, Flag(("--tf32/--no-tf32",))] = Field(
        _S.tf32, description="TF32 matmuls (CUDA, Ampere+)."
    )
    cudnn_benchmark: Annotated[bool, Flag(("--cudnn-benchmark/--no-cudnn-benchmark",))] = Field(
        _S.cudnn_benchmark, description="cuDNN autotuning (CUDA)."
    )
    inference_mode: Annotated[bool, Flag(("--inference-mode/--no-grad",))] = Field(
        _S.inference_mode, description="torch.inference_mode or no_grad."
    )
    compile: bool = Field(
        _S.compile, description="torch.compile the decode step, at start (chattts: ~1 min on 2 CPU cores)."
    )
    cuda_graphs: bool = Field(
        _S.cuda_graphs, description="CUDA graphs of the decode step per batch/context bucket (CUDA)."
    )
    int8: bool = Field(_S.int8, description="int8 weight-only quantisation of the GPT's linear layers.")
    engines: int = Field(
        1,
        description="Engine processes behind the front, each its own --max-batch and --max-queue, for "
        "when one host core binds (one GPU: under CUDA MPS only, see doctor).",
    )
    threads: int | None = Field(
        None,
        description="torch's intra-op threads in each engine process (default: the cores / --engines).",
    )
    log_level: str = Field("info", description="debug, info, warning or error.")
    ray: bool = Field(False, description="Serve as a Ray Serve deployment, one engine per replica.")
    replicas: int | None = Field(None, description="--ray: replicas (default 1).")
    autoscale: str | None = Field(None, description="--ray: MIN:MAX replicas, scaled on ongoing requests.")
    gpus_per_replica: float | None = Field(
        None, description="--ray: GPUs each replica reserves (default: 1 on cuda, 0 on cpu)."
    )
    max_queued: int = Field(
        64, description="--ray: requests waiting for a replica; more get 503 + Retry-After."
    )
    address: str | None = Field(
        None, description="--ray: join this cluster ('auto': the one `ray start` made here)."
    )
    # None: 10 minutes (ray_deployment.DEFAULT_START_TIMEOUT); unset, so that --start-timeout
    # without --ray is refused like the other Ray flags
    start_timeout: Annotated[float | None, SECONDS] = Field(
        None,
        description="--ray: time for the replicas to be placed, load and warm up; then one line, exit 2 "
        "(default 10min).",
    )

    @field_validator("max_batch", mode="before")
    @classmethod
    def _auto(cls, value):
        """auto (None: from free memory) or N >= 1, from a flag, a variable or a file."""
        if isinstance(value, str) and value.strip().lower() == "auto":
            return None
        text = str(value).strip()
        if value is not None and (not (text.isascii() and text.isdigit()) or int(text) < 1):
            raise ValueError("expected a positive integer or auto")
        return value

    def check(self) -> ServeSettings:
        """What the types cannot say, each named by its flag; before any model loads."""
        if self.log_level not in LOG_LEVELS:
            raise UserError(f"--log-level {self.log_level!r}: expected one of {', '.join(LOG_LEVELS)}")
        if not 0 <= self.port <= 65535:
            raise UserError(f"--port {self.port}: expected 0 to 65535")
        for name in ("request_timeout", "drain_timeout", "read_timeout"):
            if not getattr(self, name) > 0:
                value = getattr(self, name)
                raise UserError(f"--{name.replace('_', '-')} {value}: expected a positive number of seconds")
        if self.max_body_bytes < 1024:
            raise UserError(f"--max-body-bytes {self.max_body_bytes}: expected at least 1024")
        if self.api_key is not None and not self.api_key.get_secret_value().strip():
            raise UserError("--api-key is empty: expected a secret, or leave the option out")
        if self.start_timeout is not None and not self.start_timeout > 0:
            raise UserError(
                f"--start-timeout {self.start_timeout:g}s: expected a positive duration, e.g. 10min"
            )
        at_most("--start-timeout", self.start_timeout, MAX_START_SECONDS, "(a day)", unit="s")
        if not 1 <= self.engines <= MAX_ENGINES:
            raise UserError(f"--engines {self.engines}: expected 1 to {MAX_ENGINES}")
        if self.threads is not None and not 1 <= self.threads <= 1024:
            raise UserError(f"--threads {self.threads}: expected 1 to 1024")
        if self.ray and self.threads is not None:
            raise UserError(f"--threads {self.threads} with --ray: each replica keeps torch's default")
        if self.ray and self.engines != 1:
            raise UserError(f"--engines {self.engines} with --ray: each replica runs one engine (--replicas)")
        if not self.ray and (given := [n for n in RAY_ONLY if getattr(self, n) is not None]):
            raise UserError(f"--{given[0].replace('_', '-')} needs --ray")
        self.switches()
        self.engine_config()
        return self

    def switches(self) -> Switches:
        return Switches(**_shared(self, Switches)).validate()

    def engine_config(self) -> EngineConfig:
        return EngineConfig(**_shared(self, EngineConfig)).validate()

    def key(self) -> str | None:
        return None if self.api_key is None else self.api_key.get_secret_value()


def _shared(settings: ServeSettings, kind: type) -> dict:
    """The settings a dataclass of the engine's takes, by name: a serve setting named as an engine
    setting is that setting (test_settings checks the defaults agree), so none is listed twice."""
    names = type(settings).model_fields
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(kind) if f.name in names}
