"""make_plan(): the library function behind `ttsperf plan` (same parameter names as the flags)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ttsperf import facts as F
from ttsperf.errors import UserError
from ttsperf.plan import memory as M
from ttsperf.plan import steptime as S
from ttsperf.plan.cards import build_cards, plan_dtype, profiled_name
from ttsperf.plan.catalog import load_catalog, split_names
from ttsperf.plan.cost import DEFAULT_GPUS_PER_MACHINE, parse_own
from ttsperf.plan.memory import MemoryModel, Workload
from ttsperf.plan.recommend import Settings, plan_scenarios
from ttsperf.plan.scenarios import SCENARIOS, parse_duration, parse_slo
from ttsperf.plan.schema import Default, Plan, PlanInputs
from ttsperf.plan.simulate import ENGINES, Load
from ttsperf.profile.schema import load_profile


def _defaults(workload: Workload, calibrated: bool) -> dict[str, Default]:
    d = {
        "runtime_bytes": Default(value=M.DEFAULT_RUNTIME_BYTES, source=M.DEFAULT_RUNTIME_SOURCE),
        "fragmentation": Default(value=M.DEFAULT_FRAGMENTATION, source=M.DEFAULT_FRAGMENTATION_SOURCE),
        "memory_gb_unit": Default(value="GiB", source=M.CARD_GB_IS_GIB_SOURCE),
        "t_fixed_s": Default(value=S.DEFAULT_T_FIXED_S, source=S.DEFAULT_T_FIXED_SOURCE),
        "mbu": Default(value=S.DEFAULT_MBU, source=S.DEFAULT_MBU_SOURCE),
        "mfu": Default(value=S.DEFAULT_MFU, source=S.DEFAULT_MFU_SOURCE),
        "vocoder_fixed_s": Default(
            value=S.DEFAULT_T_FIXED_S,
            source="assumption: one Decoder+Vocos call launches about as many kernels as a step",
        ),
        "audio_seconds": Default(
            value=workload.audio_seconds, source="the guide's 8 s clips (--audio-seconds)"
        ),
        "prompt_tokens": Default(
            value=workload.prompt_tokens,
            source="assumption: a sentence plus control tokens (--prompt-tokens)",
        ),
        "first_chunk_steps": Default(
            value=workload.first_chunk_steps,
            source="official streaming yields every 24 steps (reference/chattts.md)",
        ),
    }
    if calibrated:
        d["note"] = Default(
            value="", source="profiled cards replace t_fixed/MBU/MFU/runtime with fitted values"
        )
    return d


def _model_sizes(mem: MemoryModel, workload: Workload) -> dict[str, float | int | str]:
    """The numbers the guide's memory claims are checked against (docs/CLAIMS.md)."""
    return {
        "parameters": F.TOTAL_PARAMS,
        "parameters_how": "sum of the component counts in reference/chattts.md",
        "weights_bytes": float(mem.weights_bytes),  # type: ignore[arg-type]
        "weights_how": mem.how["weights_bytes"],
        "kv_bytes_per_token": float(mem.kv_bytes_per_token),  # type: ignore[arg-type]
        "kv_how": mem.how["kv_bytes_per_token"],
        "kv_bytes_per_audio_second": float(mem.kv_bytes_per_token) * F.STEPS_PER_AUDIO_SECOND,  # type: ignore[arg-type]
        "bytes_per_audio_second_with_fragmentation": mem.per_audio_second(workload),
    }


def check_inputs(
    streams: int | None,
    rate: float | None,
    audio_seconds: float,
    prompt_tokens: int,
    first_chunk_steps: int,
    requests: int,
    max_batch: int | None,
    engine: str,
) -> None:
    """The load, workload and engine flags plan and plan --predict share, each named if wrong."""
    if streams is not None and streams <= 0:
        raise UserError(f"--streams: expected a positive number of streams, found {streams}")
    if rate is not None and not rate > 0:
        raise UserError(f"--rate: expected a positive request rate (req/s), found {rate}")
    if not audio_seconds > 0:
        raise UserError(f"--audio-seconds: expected a positive number, found {audio_seconds}")
    if prompt_tokens < 1 or first_chunk_steps < 1 or requests < 10:
        raise UserError(
            "--prompt-tokens/--first-chunk-steps/--requests: expected >= 1, >= 1, >= 10, found "
            f"{prompt_tokens}, {first_chunk_steps}, {requests}"
        )
    if max_batch is not None and max_batch < 1:
        raise UserError(f"--max-batch: expected >= 1, found {max_batch}")
    if engine not in ENGINES:
        raise UserError(f"--engine: expected one of {', '.join(ENGINES)}, found {engine!r}")


def parse_modes(text: str) -> tuple[str, ...]:
    """--mode: best (every engine mode ttsperf serve offers) or one or more of them."""
    if text.strip().lower() == "best":
        return tuple(S.MODES)
    names = tuple(dict.fromkeys(m.strip().lower() for m in text.split(",") if m.strip()))
    bad = [m for m in names if m not in S.MODES]
    if bad or not names:
        raise UserError(f"--mode: expected best or any of {', '.join(S.MODES)}, found {text!r}")
    return names


def make_plan(
    profile: list[str] | None = None,
    scenario: str | None = None,
    streams: int | None = None,
    rate: float | None = None,
    slo: str | None = None,
    gpus: str | None = None,
    catalog: str | None = None,
    prices: str | None = None,
    price: list[str] | None = None,
    dtype: str | None = None,
    audio_seconds: float = 8.0,
    prompt_tokens: int = 64,
    first_chunk_steps: int | None = None,
    max_batch: int | None = None,
    mode: str = "best",
    slot_tokens: int | None = None,
    step_overhead: str | None = None,
    vocoder_overhead: str | None = None,
    engine: str = "ttsperf",
    own: list[str] | None = None,
    amortize: str = "3y",
    electricity: str | None = None,
    memory_at: int | None = None,
    requests: int = 1000,
    seed: int = 0,
    gpus_per_machine: int = DEFAULT_GPUS_PER_MACHINE,
    progress: Callable[[str], None] | None = None,
) -> Plan:
    if streams is not None and rate is not None:
        raise UserError("--streams and --rate: expected one load, found both")
    first_chunk_steps_given = first_chunk_steps is not None
    if first_chunk_steps is None:
        first_chunk_steps = F.STREAM_CHUNK_STEPS
    check_inputs(streams, rate, audio_seconds, prompt_tokens, first_chunk_steps, requests, max_batch, engine)
    if gpus_per_machine < 1:
        raise UserError(f"--gpus-per-machine: expected >= 1, found {gpus_per_machine}")
    names = [scenario] if scenario else list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            raise UserError(f"--scenario: expected one of {', '.join(SCENARIOS)}, found {n!r}")
    profiles = [(p, load_profile(p)) for p in profile or []]
    cat = load_catalog(
        Path(catalog) if catalog else None,
        Path(prices) if prices else None,
        price or [],
        split_names(gpus) if gpus is not None else None,
        others=[profiled_name(p) for _, p in profiles],
    )
    dt = plan_dtype(profiles, dtype)
    workload = Workload(
        audio_seconds=audio_seconds,
        prompt_tokens=prompt_tokens,
        first_chunk_steps=first_chunk_steps,
        slot_tokens=slot_tokens,
    )
    if slot_tokens is not None and slot_tokens < workload.context_tokens:
        raise UserError(
            f"--slot-tokens: expected at least the {workload.context_tokens} tokens one request holds "
            f"({prompt_tokens} prompt + {workload.steps} steps), found {slot_tokens}"
        )
    cards = build_cards(cat, profiles, dt)
    calibrated = any(c.profiled for c in cards)
    note_extra = "" if engine == "ttsperf" else f"; engine what-if '{engine}': {ENGINES[engine]}"
    if step_overhead is not None:
        note_extra += f"; per-step overhead {step_overhead} set by --step-overhead (what-if)"
    if vocoder_overhead is not None:
        note_extra += f"; vocoder call overhead {vocoder_overhead} set by --vocoder-overhead (what-if)"
    if calibrated:
        note = (
            "profiled cards fitted to "
            + ", ".join(p for p, _ in profiles)
            + "; other cards projected from defaults"
        )
    else:
        note = "projected from documented defaults (assumptions), no profile given"
    note += note_extra
    target = Load("streams", streams) if streams else Load("rate", rate) if rate else None
    slo_limits = parse_slo(slo) if slo is not None else None
    own_cards = parse_own(own or [], list(cat.gpus), amortize, electricity)
    settings = Settings(
        cat, workload, requests, seed, memory_at, max_batch, own_cards, engine, gpus_per_machine,
        modes=parse_modes(mode),
        first_chunk_fixed=first_chunk_steps_given,
        step_overhead=None if step_overhead is None else parse_duration(step_overhead, "--step-overhead"),
        vocoder_overhead=(
            None if vocoder_overhead is None else parse_duration(vocoder_overhead, "--vocoder-overhead")
        ),
    )  # fmt: skip
    scenarios = plan_scenarios(
        [SCENARIOS[n] for n in names], cards, target, slo_limits, settings, note, progress
    )
    owned = own_cards.purchases if own_cards else {}
    missing = [c.name for c in cards if c.name not in cat.prices and c.name not in owned]
    notes = []
    if missing:
        notes.append(
            "no price for " + ", ".join(missing) + ": supply with --price NAME=USD or --prices FILE "
            "(the guide's Alibaba Cloud prices are not shipped)"
        )
    inputs = PlanInputs(
        profiles=[p for p, _ in profiles],
        calibration=note,
        workload={
            "dtype": dt,
            "audio_seconds": audio_seconds,
            "steps": workload.steps,
            "prompt_tokens": prompt_tokens,
            "context_tokens": workload.context_tokens,
            "kv_tokens_per_sequence": workload.kv_tokens,
            "first_chunk_steps": first_chunk_steps,
            "chunk_steps": workload.chunk_steps,
            "engine": engine,
        },
        model=_model_sizes(cards[0].memory if cards else MemoryModel(dt), workload),
        catalog=cat.gpus_file,
        prices=cat.prices_file,
        defaults=_defaults(workload, calibrated),
        seed=seed,
        requests_per_simulation=requests,
        gpus_per_machine=gpus_per_machine,
    )
    return Plan(inputs=inputs, scenarios=scenarios, notes=notes)
