"""Every `ttsperf profile` setting, once: its flags, a settings file's [profile] table and the
TTSPERF_PROFILE_* variables are made from these fields (ttsperf.settings)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ttsperf.errors import UserError
from ttsperf.model.settings import ModelSettings
from ttsperf.profile.schema import ENGINE_MODES
from ttsperf.settings import at_most

# Upper bounds (issue 35): past them a grid point allocates more than any card holds, or the grid
# takes days. 65,536 sequences a batch; a 32,768-token KV (8x ChatTTS's 4,096 positions); 10,000
# repeats a point; a 64 TiB budget.
MAX_BATCH, MAX_TOKENS, MAX_REPEATS, MAX_BUDGET_GIB = 65_536, 32_768, 10_000, 65_536.0
QUICK = {"batches": [1, 4], "contexts": [64, 512], "prompts": [16, 64], "repeats": 3}  # --quick


class ProfileSettings(ModelSettings):
    """The model, the grid it is measured on, and what else to measure."""

    model_config = SettingsConfigDict(env_prefix="TTSPERF_PROFILE_")

    batches: list[int] = Field([1, 4, 16], description="Batch sizes of the decode-step grid.")
    contexts: list[int] = Field([64, 512, 2048], description="KV lengths of the decode-step grid.")
    prompts: list[int] = Field([16, 64, 256], description="Prompt lengths for prefill timing.")
    repeats: int = Field(10, description="Timed repeats per point (median).")
    quick: bool = Field(False, description="Batches 1,4; contexts 64,512; prompts 16,64; 3 repeats.")
    optimizations: bool = Field(
        False, description="Measure the guide's optimisations against fp32 instead (one process each)."
    )
    host: bool = Field(
        False,
        description="Measure the host instead (no GPU needed): each part's host seconds on the skeleton "
        "config and chattts's kernel count, per batch/rows and mode (eager; compile).",
    )
    host_compile: bool = Field(True, description="With --host: also compile (about a minute of Inductor).")
    modes: str | None = Field(
        None,
        description="Also measure each engine mode as serve runs it, into the same file: all (eager, "
        "compile, cuda-graphs; cuda-graphs needs CUDA and is marked skipped without it) or a list, e.g. "
        "eager,compile. With the host's per-op cost on the device and, unless --no-modes-host, the host "
        "profile.",
    )
    modes_host: bool = Field(
        True, description="With --modes: also this CPU's host profile (--host; --no-host-compile applies)."
    )
    max_batch_search: bool = Field(
        False,
        description="Also find the largest batch that fits at each context (CUDA: OOM-safe bisection; "
        "CPU: a memory budget).",
    )
    memory_budget: float | None = Field(
        None,
        description="GiB the process may use in --max-batch-search (CPU default: available RAM minus "
        "max(1 GiB, 10%); CUDA default: none, out-of-memory decides).",
    )
    max_batch_cap: int | None = Field(
        None, description="Largest batch --max-batch-search tries (default 4096)."
    )

    def check(self) -> ProfileSettings:
        """What the types cannot say, each named by its flag; --quick applied."""
        quick = {k: list(v) if isinstance(v, list) else min(v, self.repeats) for k, v in QUICK.items()}
        s = self.model_copy(update=quick) if self.quick else self
        for name in ("batches", "contexts", "prompts"):
            values = getattr(s, name)
            if not values or any(v < 1 for v in values):
                raise UserError(
                    f"--{name} {','.join(map(str, values))!r}: expected positive integers, e.g. 1,4,16"
                )
        if s.repeats < 1:
            raise UserError(f"--repeats {s.repeats}: expected at least 1")
        at_most("--batches", s.batches, MAX_BATCH, "sequences a batch")
        at_most("--contexts", s.contexts, MAX_TOKENS, "KV tokens")
        at_most("--prompts", s.prompts, MAX_TOKENS, "prompt tokens")
        at_most("--repeats", s.repeats, MAX_REPEATS, "repeats a point")
        at_most("--max-batch-cap", s.max_batch_cap, MAX_BATCH, "sequences a batch")
        at_most("--memory-budget", s.memory_budget, MAX_BUDGET_GIB, "GiB")
        if s.memory_budget is not None and not s.memory_budget > 0:
            raise UserError(f"--memory-budget {s.memory_budget:g}: expected a positive number of GiB, e.g. 8")
        if s.max_batch_cap is not None and s.max_batch_cap < 1:
            raise UserError(f"--max-batch-cap {s.max_batch_cap}: expected at least 1")
        if s.memory_budget is not None and not s.max_batch_search:
            raise UserError("--memory-budget: applies to --max-batch-search only; add --max-batch-search")
        if s.max_batch_cap is not None and not s.max_batch_search:
            raise UserError("--max-batch-cap: applies to --max-batch-search only; add --max-batch-search")
        if s.host and (s.optimizations or s.max_batch_search):
            raise UserError("--host: not with --optimizations or --max-batch-search (run them one at a time)")
        if s.modes is not None and (s.host or s.optimizations):
            raise UserError("--modes: not with --host or --optimizations (--modes measures the host too)")
        if s.modes is not None:
            parse_modes(s.modes)  # a wrong name in one line now, before the model loads
        if s.optimizations and s.max_batch_search:
            raise UserError("--max-batch-search: not with --optimizations (run them one at a time)")
        return s


def parse_modes(text: str) -> list[str]:
    """--modes: all, or any of eager,compile,cuda-graphs -> the modes in ENGINE_MODES' order."""
    names = [m.strip().lower() for m in text.split(",") if m.strip()]
    if names == ["all"]:
        return list(ENGINE_MODES)
    bad = [m for m in names if m not in ENGINE_MODES]
    if bad or not names:
        raise UserError(f"--modes {text!r}: expected all or any of {','.join(ENGINE_MODES)}")
    return [m for m in ENGINE_MODES if m in names]
