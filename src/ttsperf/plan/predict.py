"""`ttsperf plan --predict`: what the simulator expects one device to do at one load.

Where `plan` searches for the most load a card carries under an SLO, a prediction answers the
question a server's owner asks before a load test: "what will my server do at this load?" — one
device (the profiled one, or one catalog card from defaults), one load (N streams closed loop or
R requests/s Poisson), the engine's max batch; the answer is the numbers `ttsperf bench` reports,
so the two can be held side by side.

The simulation runs bench's protocol: a closed loop's warm-up drains before bench measures, so its
N streams start together into an empty server and `requests` are measured from there (equal-length
requests then run in waves, the batch full and emptying at once); an open loop's arrivals run
from an empty server with the first tenth left out, as bench's warm-up requests are. Throughput is
bench's: the measured requests over the window from the first sent to the last answered (which
holds the last requests' whole latency, so it reads below the arrival rate on a short run).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from ttsperf.errors import UserError
from ttsperf.plan import overhead as O
from ttsperf.plan.cards import Card, build_cards, plan_dtype, profile_mode, with_overheads
from ttsperf.plan.catalog import load_catalog, split_names
from ttsperf.plan.like import RunServer, like
from ttsperf.plan.memory import Workload
from ttsperf.plan.scenarios import parse_duration
from ttsperf.plan.settings import PlanSettings, requests_flag
from ttsperf.plan.simulate import EngineModel, Load, simulate
from ttsperf.plan.steptime import GRAPHS_MAX_BATCH, StepModel
from ttsperf.profile.schema import load_profile, shipped_card_profiles


class Numbers(BaseModel):
    model_config = ConfigDict(extra="forbid")
    throughput_rps: float
    audio_seconds_per_s: float
    e2e_p50_s: float
    e2e_p99_s: float
    ttfa_p50_s: float
    ttfa_p99_s: float
    mean_batch: float
    mean_step_s: float = Field(description="seconds per decode step, host cost included, averaged over steps")
    underrun_p99_s: float | None = Field(
        None, description="worst playback stall per request, P99 (None: not streamed, nothing plays early)"
    )
    error_rate: float = Field(
        0.0,
        description="bench's error_rate: the share of measured requests not answered, here those "
        "refused (HTTP 503) because max_queue requests were waiting; the latencies are the answered ones'",
    )


class Prediction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_: str = Field("ttsperf.prediction", alias="schema")
    version: int = 1
    device: str
    basis: str = Field(description="what the step model rests on: a profile of this device, or defaults")
    profiled: bool
    load: dict[str, float | str]
    max_batch: int
    max_queue: int | None = Field(
        None, description="the server's queue: past it a request is refused (None: unbounded, none refused)"
    )
    engine: str
    workload: dict[str, float | int | str]
    like: str | None = Field(
        None, description="the bench run whose load and workload this predicts, and how read"
    )
    server: dict[str, Any] | None = Field(
        None,
        description="--like: the settings taken from the run's server (its /healthz, as bench recorded "
        "it) for what the user did not set, those the user's own settings overrode, and the line said",
    )
    streamed: bool = Field(True, description="False: the run's responses were not streamed (TTFA = E2E)")
    prediction: Numbers
    simulated_requests: int
    p99_resolved: bool

    def dump(self) -> dict:
        return self.model_dump(by_alias=True)

    def as_load(self) -> Load:
        """The load it predicts, as the simulator (and bench_flags) take it."""
        kind = {"closed loop": "streams", "poisson": "rate"}.get(str(self.load["kind"]), "constant")
        think = self.load.get("think_s")
        return Load(kind, float(self.load["value"]), None if think is None else float(think),
                    float(self.load.get("ramp_s", 0.0)))  # fmt: skip


def _device(
    profile: list[str], gpus: str | None, dtype: str | None, mode: str = "best"
) -> tuple[Card, str, str, str, int]:
    """-> the card to simulate, the dtype, the model config, what the step model rests on and the
    largest batch the profile measured (0: no profile). A catalog card ttsperf measured in `mode`
    is predicted from that measurement."""
    if len(profile) > 1:
        raise UserError(f"--predict: expected one --profile (one device), found {len(profile)}")
    names = split_names(gpus) if gpus is not None else []
    if profile:
        path, p = profile[0], load_profile(profile[0])
        dt = dtype or p.model.dtype  # the profile's own dtype unless --dtype names another
        if p.model.dtype != dt:
            raise UserError(f"--dtype {dt}: {path} was measured in {p.model.dtype}; predict at that dtype")
        # a profile of any config calibrates its own device here: the prediction is of that model
        cards = [c for c in build_cards(load_catalog(), [(path, p)], dt, any_config=True) if c.profiled]
        if not cards:  # its catalog card has no figure for this dtype
            raise UserError(f"--dtype {dt}: {p.device.name} cannot run it (the catalog has no {dt} figure)")
        card = cards[0]
        if names and card.name not in names and p.device.name not in names:
            raise UserError(f"--gpus {gpus!r}: {path} is a profile of {card.name}: give one or the other")
        basis = f"step model fitted to {path} ({p.model.config}, {dt}, measured)"
        return card, dt, p.model.config, basis, max((s.batch for s in p.steps), default=0)
    if len(names) != 1:
        raise UserError(
            "--predict: expected the device, --profile FILE (measured) or --gpus NAME (one card, "
            f"projected from defaults), found {'no device' if not names else f'{len(names)} cards'}"
        )
    dt = plan_dtype([], dtype)
    shipped = [(w, p) for w, p in shipped_card_profiles() if profile_mode(p) == mode]
    card = build_cards(load_catalog(only=names), [], dt, shipped=shipped)[0]
    if card.profiled:
        basis = f"step model fitted to {card.searched_in} ({dt}, {mode}, measured on that card)"
        return (
            card,
            dt,
            "chattts",
            basis,
            max(s.batch for w, p in shipped if w == card.searched_in for s in p.steps),
        )
    basis = (
        f"projected from documented defaults for {card.name}, not measured on it: "
        "run `ttsperf profile` on that card and pass --profile"
    )
    return card, dt, "chattts", basis, 0


def _at_mode(step: StepModel, mode: str, host_path: str | None) -> tuple[StepModel, int | None, str]:
    """A catalog card's step in one engine mode, priced by the host profile as plan prices it:
    -> the step, the mode's batch limit (CUDA graphs capture 256 rows) and how. `best` predicts
    the mode `ttsperf serve` runs without flags: eager."""
    name = "eager" if mode == "best" else mode
    profile, where = O.host_profile(host_path)
    table = O.modes_from_host(profile, where)
    if name not in table:
        raise UserError(
            f"--mode {mode}: expected one of {', '.join(table)} (one mode: the server's), found {mode!r}"
        )
    m = table[name]
    out = with_overheads(
        step,
        m.t_fixed,
        f"{m.t_fixed * 1e3:.3g} ms per step, {m.name}: {m.source}",
        m.audio.centre if m.audio is not None else None,
        None if m.audio is None else f"; fixed cost {m.audio.centre * 1e3:.3g} ms per call in {m.name}",
    )
    out.prefill_host = O.prefill_host(profile)
    flags = f" (`ttsperf serve {m.flag}`)" if m.flag else " (`ttsperf serve` without a mode flag)"
    return out, m.max_batch, f"{m.name}{flags}, its fixed costs from the host profile {where}"


def _what_ifs(step_overhead: str | None, vocoder_overhead: str | None) -> tuple:
    """--step-overhead / --vocoder-overhead -> cards.with_overheads' arguments."""
    v = None if vocoder_overhead is None else parse_duration(vocoder_overhead, "--vocoder-overhead")
    t = None if step_overhead is None else parse_duration(step_overhead, "--step-overhead")
    return (
        t,
        None if t is None else f"{t * 1e3:g} ms from --step-overhead (user what-if, not measured)",
        v,
        None if v is None else f"; launch cost {v * 1e3:g} ms from --vocoder-overhead (what-if)",
    )


def _card_step(card: Card, s: PlanSettings, basis: str) -> tuple[StepModel, int | None, str]:
    """The card's step at the asked mode -> (step, the mode's batch cap, the basis said so far).
    A card without a profile: the mode's costs from the host profile, then the what-ifs."""
    if card.profiled:
        if not s.profile:  # ttsperf's measurement of this card, in the mode asked for
            return card.step, GRAPHS_MAX_BATCH if card.mode == "cuda-graphs" else None, basis
        if s.mode in card.mode_steps:  # a profile of every mode (profile --modes): that mode's
            cap = GRAPHS_MAX_BATCH if s.mode == "cuda-graphs" else None
            return card.mode_steps[s.mode], cap, f"{basis}; {s.mode} as measured there"
        if s.mode != "best":
            measured = ", ".join(card.mode_steps) or "its own mode"
            raise UserError(f"--mode {s.mode}: {s.profile[0]} measured {measured}; predict it as measured")
        return card.step, None, basis
    step, mode_cap, how = _at_mode(card.step, s.mode, s.host_profile)
    basis += f"; {how}"
    step = with_overheads(step, *_what_ifs(s.step_overhead, s.vocoder_overhead))
    for flag, value in (("--step-overhead", s.step_overhead), ("--vocoder-overhead", s.vocoder_overhead)):
        if value is not None:
            basis += f"; {flag} {value} (what-if)"
    return step, mode_cap, basis


def _flags_load(s: PlanSettings) -> Load:
    """The load the flags ask for; --think-time: bench's listeners (`bench --users N --think-time S`)."""
    if s.streams is not None:
        return Load("streams", s.streams, s.think_s(), s.ramp_up or 0.0)
    return Load("rate", float(s.rate))


def _load_fields(load: Load) -> dict:
    kind = {"streams": "closed loop", "rate": "poisson"}.get(load.kind, "constant")
    return {
        "kind": kind,
        "value": load.value,
        **({"think_s": load.think_s} if load.think_s is not None else {}),
        **({"ramp_s": load.ramp_s} if load.ramp_s else {}),
    }


# the plan settings a run's server says, as the line names them
FROM_RUN = {
    "mode": "{}",
    "dtype": "{}",
    "max_batch": "max batch {}",
    "max_queue": "queue {}",
    "first_chunk_steps": "first chunk {} steps",
}


def _from_run(s: PlanSettings, srv: RunServer | None) -> tuple[PlanSettings, dict[str, Any] | None]:
    """The run's server settings for what the user did not set: a flag, a TTSPERF_PLAN_* variable,
    a settings file or a keyword argument wins (each is in the settings' fields_set; plan's defaults
    are not). A profile measured its own mode and dtype, so those stay the profile's.
    -> the settings to predict with, and what was taken, what overridden and the line that says so."""
    if srv is None:
        return s, None
    said = {"mode": srv.mode, "dtype": srv.dtype, "max_batch": srv.max_batch,
            "max_queue": srv.max_queue, "first_chunk_steps": srv.first_chunk_steps}  # fmt: skip
    taken, overridden, profiles = {}, {}, {}
    for name, value in said.items():
        if value is None:
            continue
        if name in s.model_fields_set:
            overridden[name] = value
        elif s.profile and name in ("mode", "dtype"):
            profiles[name] = value
        else:
            taken[name] = value
    several = srv.engines is not None and srv.engines > 1
    turns = srv.steps_per_turn is not None and srv.steps_per_turn > 1
    if not (taken or overridden or profiles or several or turns):
        return s, None
    parts = [FROM_RUN[n].format(v) for n, v in taken.items()]
    where = ", ".join(x for x in (urlsplit(srv.source).path or srv.source, srv.about) if x)
    line = f"from the run: {', '.join(parts) or 'nothing'} ({where})"
    for name, value in overridden.items():
        flag = "--" + name.replace("_", "-")
        line += f"; {flag} {getattr(s, name)} as given (the run's: {FROM_RUN[name].format(value)})"
    if profiles:
        line += (
            f"; {' and '.join(profiles)} the profile's (the run's: {', '.join(map(str, profiles.values()))})"
        )
    if several:  # plan models one engine process per card
        line += f"; the run's server ran {srv.engines} engines (serve --engines): predicted as one"
    if turns:  # plan prices a host turn per decode step
        line += (
            f"; the run's server ran {srv.steps_per_turn} steps a turn (serve --steps-per-turn): "
            "predicted as one"
        )
    out = s.model_copy(update=taken) if taken else s
    info = {"source": srv.source, "taken": taken, "overridden": overridden, "line": line}
    if several:
        info["engines"] = srv.engines
    if turns:
        info["steps_per_turn"] = srv.steps_per_turn
    return out, info


def _check_runs(card: Card, dt: str, config: str, max_batch: int | None, server: dict | None) -> None:
    """Refuse, in one line, a prediction plan cannot make: a non-chattts profile without the
    server's max batch (the memory model is chattts's), or a dtype the card cannot run."""
    if config != "chattts" and max_batch is None:
        raise UserError(
            f"--max-batch: expected the server's max batch with a {config} profile "
            "(plan's memory model is chattts's)"
        )
    if card.step is None:
        ran = (
            " (the dtype the run's server ran: --dtype names another)"
            if server and "dtype" in server["taken"]
            else ""
        )
        raise UserError(f"--dtype {dt}: {card.name} cannot run it ({card.note}){ran}")


def predict(settings: PlanSettings | None = None, **fields: Any) -> Prediction:
    """Simulate one device at one load: `settings`, or keyword arguments named as its fields."""
    if settings is not None and fields:
        raise TypeError(f"predict: give settings or keyword arguments, not both ({', '.join(fields)})")
    s = (settings or PlanSettings.build(**fields)).for_predict()
    lk = like(s.like, s.streams, s.rate) if s.like else None
    s, server = _from_run(s, lk.server if lk is not None else None)
    max_batch, requests, seed = s.max_batch, s.requests, s.seed
    # the requests: a bench run's own (--like), else the flags' (a text set's, or one length)
    flag_lengths, text_set = s.lengths()
    prompt_tokens = round(sum(p for _, p in flag_lengths) / len(flag_lengths))
    if lk is not None:  # the run's work, not the flags' defaults
        requests = lk.requests
        prompt_tokens = lk.prompt_tokens or prompt_tokens
    first_chunk_steps = s.first_chunk()
    card, dt, config, basis, measured_batch = _device(s.profile, s.gpus, s.dtype, s.mode)
    _check_runs(card, dt, config, max_batch, server)
    step, mode_cap, basis = _card_step(card, s, basis)
    if lk is not None:  # the run's own lengths, in the order it sent them
        lengths = [(a, prompt_tokens if p is None else int(p)) for a, p in lk.lengths]
    else:
        lengths = flag_lengths
    w = s.with_limits(Workload.mixed(lengths, first_chunk_steps=first_chunk_steps, ordered=lk is not None))
    longest = max(a for a, _ in w.classes())
    maxb = max_batch or card.max_batch(w)[0]
    if max_batch is None and mode_cap is not None and mode_cap < maxb:  # graphs capture 256 rows
        maxb = mode_cap
    if maxb < 1:
        raise UserError(f"{card.name}: one {longest:g} s request does not fit in memory at {dt}")
    if measured_batch and maxb > measured_batch:
        basis += (
            f"; batches above {measured_batch} extrapolated from the profile's largest: "
            f"`ttsperf profile --batches ...,{maxb}` measures them"
        )
    if lk is not None and lk.prompt_tokens is None:
        basis += f"; prompt {prompt_tokens} tokens (--prompt-tokens: the run does not say)"
    load = lk.load if lk is not None else _flags_load(s)
    cold = load.kind == "streams"  # bench's closed loop: N streams sent at once, after a drained warm-up
    try:
        r = simulate(EngineModel.of(step, maxb, w, s.max_queue), load, requests, seed, cold_start=cold)
    except ValueError as exc:  # every measured request refused: no latency to predict
        raise UserError(f"--max-queue {s.max_queue}: {exc}") from None
    streamed = lk is None or lk.streamed
    ttfa_p50, ttfa_p99 = (r.ttfa_p50, r.ttfa_p99) if streamed else (r.e2e_p50, r.e2e_p99)
    return Prediction(
        device=card.name,
        basis=basis,
        profiled=card.profiled,
        load=_load_fields(load),
        max_batch=maxb,
        max_queue=s.max_queue,
        engine=s.engine,
        workload={
            "audio_seconds": w.audio_seconds,  # the mean, of several lengths
            **({"audio_max_s": longest, "lengths": len(w.lengths)} if w.lengths else {}),
            "steps": w.steps,
            "prompt_tokens": w.prompt_tokens,
            "first_chunk_steps": first_chunk_steps,
            **({"requests": requests_flag(text_set)} if lk is None else {}),
            **({"text_set": text_set} if lk is None and text_set else {}),
        },
        like=lk.how if lk is not None else None,
        server=server,
        streamed=streamed,
        prediction=Numbers(
            throughput_rps=r.window_rps,
            audio_seconds_per_s=r.window_rps * r.audio_mean_s,
            e2e_p50_s=r.e2e_p50,
            e2e_p99_s=r.e2e_p99,
            ttfa_p50_s=ttfa_p50,
            ttfa_p99_s=ttfa_p99,
            mean_batch=r.mean_batch,
            mean_step_s=r.mean_step_s,
            underrun_p99_s=r.underrun_p99 if streamed else None,
            error_rate=r.error_rate,
        ),
        simulated_requests=r.n,
        p99_resolved=r.p99_resolved,
    )
