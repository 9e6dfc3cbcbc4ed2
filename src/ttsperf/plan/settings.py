"""Every `ttsperf plan` setting, once: its flags, a settings file's [plan] table, the TTSPERF_PLAN_*
variables and the keyword arguments of `make_plan` and `predict` are these fields (ttsperf.settings)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ttsperf import facts as F
from ttsperf.errors import UserError
from ttsperf.i18n import resolve
from ttsperf.plan.cost import DEFAULT_GPUS_PER_MACHINE
from ttsperf.plan.memory import Workload
from ttsperf.plan.money import currency_code
from ttsperf.plan.scenarios import parse_duration
from ttsperf.plan.simulate import ENGINES
from ttsperf.settings import SECONDS, Flag, Layered, at_most
from ttsperf.textsets import TEXT_SETS, lengths

# The workload plan simulates by default: the guide's stated one ("单句 8 s", 100 Chinese
# utterances of 8 s), as the texts of bench's built-in `zh-8s` set (ttsperf/textsets.py), so a
# plan's check command sends the requests the plan simulated.
DEFAULT_TEXT_SET = "zh-8s"
# --audio-seconds without --prompt-tokens: assumption, a sentence plus ChatTTS's control tokens
DEFAULT_PROMPT_TOKENS = 64
# Bounds on the load and workload (issue 35: `--predict --streams 100000000` printed nothing for
# 120 s). --predict simulates every stream on one card: a million streams take 3 s and 0.4 GB, a
# hundred million would take minutes and tens of GB; a million listeners is 100x the guide's
# 10,000-user scenario. 10,000 requests/s of 8 s utterances is thousands of cards, and --predict at
# 100,000 req/s took 15 s and 1 GB. 100,000 simulated requests a point take 13 s a card (p99.9 needs
# ~3,700). A request's audio: serve stops at --max-new-tokens (2048 steps, 43.7 s by default).
MAX_STREAMS, MAX_RATE, MAX_REQUESTS = 1_000_000, 10_000, 100_000
MAX_AUDIO_S, MAX_STEPS, MAX_BATCH, HOUR = 600.0, 32_768, 65_536, 3600.0


def requests_flag(text_set: str | None) -> str:
    """How plan.json says where its requests came from: `--text-set NAME`, or `--audio-seconds`."""
    return f"--text-set {text_set}" if text_set else "--audio-seconds"


class PlanSettings(Layered):
    """The cards, the load, the workload, the engine's settings to search and the cost inputs."""

    model_config = SettingsConfigDict(env_prefix="TTSPERF_PLAN_")

    profile: Annotated[list[str], Flag(repeat=True)] = Field(
        [], description="ModelProfile JSON from `ttsperf profile` (repeatable)."
    )
    scenario: str | None = Field(None, description="realtime | offline | concurrency (default: all three).")
    streams: int | None = Field(None, description="Target load: N concurrent streams (closed loop).")
    rate: float | None = Field(None, description="Target load: R requests/s (Poisson).")
    users: int | None = Field(
        None,
        description="Target load as people count it: N users, each a listener who plays its reply, "
        "thinks --think-time (default 0s) and asks again (--streams N of listeners).",
    )
    like: str | None = Field(
        None,
        description="--predict: a bench run (run.json or the folder bench -o wrote): its load, "
        "requests, audio and prompt per request, streaming.",
    )
    think_time: Annotated[float | None, SECONDS] = Field(
        None,
        description="A dialogue stream is a listener: how long it thinks after a reply has played, "
        "before its next request, e.g. 2s (default 0s).",
    )
    ramp_up: Annotated[float | None, SECONDS] = Field(
        None,
        description="--predict: the streams start one after another over this long (e.g. 8s), "
        "as `bench --ramp-up 8s` starts them (default: all at once, as bench does without it).",
    )
    slo: str | None = Field(None, description="e.g. 'ttfa_p99=300ms,underrun_p99=100ms', 'p99=10s', 'none'.")
    gpus: str | None = Field(
        None, description='Cards to consider, e.g. "T4,RTX 3090,RTX 4090" (default: all).'
    )
    catalog: str | None = Field(None, description="GPU catalog CSV (default: the shipped one).")
    prices: str | None = Field(
        None,
        description="A shipped price set instead of the default, for the cards it prices "
        "(e.g. aliyun), or a CSV merged over the default: the cards it names take its prices "
        "(gpu,currency,per_gpu_hour,source).",
    )
    price: Annotated[list[str], Flag(repeat=True)] = Field(
        [], description='Override one card: "RTX 4090=0.5" (per GPU-hour in --currency; repeatable).'
    )
    currency: str = Field(
        "USD", description="Currency of every cost (USD, CNY, ...); other prices converted at a sourced rate."
    )
    fx: Annotated[list[str], Flag(repeat=True)] = Field(
        [], description='Exchange rate over the shipped data/fx.csv: "USD:CNY=7.2" = 1 USD is 7.2 CNY.'
    )
    dtype: str | None = Field(None, description="fp16 | bf16 | fp32 (default: the profile's, else fp16).")
    text_set: str | None = Field(
        None,
        description=f"Requests drawn from bench's built-in text set NAME, each as long as its text's "
        f"speech and prompt: the work `bench --text-set NAME` sends (default {DEFAULT_TEXT_SET}: the "
        "guide's 8 s utterances).",
    )
    audio_seconds: float | None = Field(
        None, description="Every request this many seconds of audio, instead of a text set (the guide's: 8)."
    )
    prompt_tokens: int | None = Field(
        None,
        description=f"With --audio-seconds: prompt tokens per request (default {DEFAULT_PROMPT_TOKENS}).",
    )
    first_chunk_steps: int | None = Field(
        None,
        description="Decode steps before the first audio chunk (default: searched from the official 24).",
    )
    mode: str = Field(
        "best",
        description="Engine modes to search: best (eager, compile, cuda-graphs) or a list, e.g. eager.",
    )
    max_batch: int | None = Field(
        None, description="Cap the engine's batch (slots) below what memory allows."
    )
    max_queue: int | None = Field(
        None,
        description="--predict: serve's --max-queue: a request that finds this many waiting is refused "
        "(503); default: the --like run's server's, else none (the queue holds every request).",
    )
    max_prompt_tokens: int | None = Field(
        None, description="serve's prompt limit (sizes its slots); default: the longest prompt + 25%."
    )
    max_new_tokens: int | None = Field(
        None, description="serve's audio limit in steps (sizes its slots); default: the longest reply + 25%."
    )
    slot_tokens: int | None = Field(
        None,
        description="KV tokens per slot, the two limits' sum (serve's defaults: 512 + 2048); "
        "default: the limits'.",
    )
    engine: str = Field(
        "ttsperf",
        description="ttsperf: the engine as built (the only one; v1 was retired).",
    )
    vocoder_overhead: str | None = Field(
        None, description="What-if launch cost of one Decoder+Vocos call, e.g. 2ms."
    )
    step_overhead: str | None = Field(None, description="What-if per-step fixed overhead, e.g. 3ms.")
    host_profile: str | None = Field(
        None,
        description="Host profile of the CPU the GPUs sit beside (`ttsperf profile --host -o FILE`); "
        "default: the one shipped, measured on the development machine.",
    )
    own: Annotated[list[str], Flag(repeat=True)] = Field(
        [], description='Bought, not rented: "RTX 4090" (launch price shipped) or "A100 40GB PCIe=9000".'
    )
    amortize: str = Field("3y", description="Spread an owned card's price over 3y, 36m, ...")
    electricity: str | None = Field(
        None, description="Price per kWh for owned cards (--currency), e.g. 0.15."
    )
    memory_at: int | None = Field(None, description="Also show the memory breakdown at this batch.")
    requests: int = Field(
        1000,
        description="Measured requests per simulation (p99 needs >= 1000); --predict: bench's --requests.",
    )
    seed: int = Field(0, description="Simulation seed (results are deterministic per seed).")
    gpus_per_machine: int = Field(
        DEFAULT_GPUS_PER_MACHINE,
        description="Cards per machine, for the machines column (8: cloud GPU servers).",
    )
    lang: str | None = Field(
        None, description="Language of the answer lines: en | zh (default: TTSPERF_LANG, else the locale)."
    )

    def lengths(self) -> tuple[list[tuple[float, int]], str | None]:
        """Each request's (audio seconds, prompt tokens) to draw from, and the text set they come
        from: None for --audio-seconds (every request alike), else the --text-set (default zh-8s)."""
        if self.audio_seconds is not None or self.prompt_tokens is not None:
            audio = 8.0 if self.audio_seconds is None else self.audio_seconds
            return [(audio, self.prompt_tokens or DEFAULT_PROMPT_TOKENS)], None
        name = self.text_set or DEFAULT_TEXT_SET
        return lengths(name), name

    def first_chunk(self) -> int:
        """Steps before the first audio: the setting, else the official 24 (plan searches from it)."""
        return F.STREAM_CHUNK_STEPS if self.first_chunk_steps is None else self.first_chunk_steps

    def check(self) -> PlanSettings:
        """The load, workload and engine flags plan and plan --predict share, each named if wrong."""
        self._users_as_streams()
        if self.streams is not None and self.rate is not None:
            raise UserError("--streams and --rate: expected one load, found both")
        if self.streams is not None and self.streams <= 0:
            raise UserError(f"--streams: expected a positive number of streams, found {self.streams}")
        if self.rate is not None and not self.rate > 0:
            raise UserError(f"--rate: expected a positive request rate (req/s), found {self.rate}")
        if self.audio_seconds is not None and not self.audio_seconds > 0:
            raise UserError(f"--audio-seconds: expected a positive number, found {self.audio_seconds}")
        if self.text_set is not None and (self.audio_seconds is not None or self.prompt_tokens is not None):
            flag = "--audio-seconds" if self.audio_seconds is not None else "--prompt-tokens"
            raise UserError(
                f"--text-set {self.text_set} and {flag}: choose one (the set's texts say each "
                "request's audio and prompt; --audio-seconds makes every request alike)"
            )
        if self.text_set is not None and self.text_set not in TEXT_SETS:
            raise UserError(
                f"--text-set: unknown set {self.text_set!r}; expected one of {', '.join(TEXT_SETS)}"
            )
        self._bounds()
        chunk = self.first_chunk_steps
        if (self.prompt_tokens or 1) < 1 or (chunk is not None and chunk < 1) or self.requests < 10:
            raise UserError(
                "--prompt-tokens/--first-chunk-steps/--requests: expected >= 1, >= 1, >= 10, found "
                f"{self.prompt_tokens}, {chunk}, {self.requests}"
            )
        if self.max_batch is not None and self.max_batch < 1:
            raise UserError(f"--max-batch: expected >= 1, found {self.max_batch}")
        if self.max_queue is not None and self.max_queue < 1:
            raise UserError(f"--max-queue: expected >= 1, found {self.max_queue}")
        if self.engine not in ENGINES:
            raise UserError(f"--engine: expected one of {', '.join(ENGINES)}, found {self.engine!r}")
        if self.memory_at is not None and self.memory_at < 1:
            raise UserError(f"--memory-at: expected a batch >= 1, found {self.memory_at}")
        self.currency = currency_code(self.currency, "--currency")
        if self.gpus_per_machine < 1:
            raise UserError(f"--gpus-per-machine: expected >= 1, found {self.gpus_per_machine}")
        if self.lang is not None:
            resolve(self.lang)  # an unknown language is named here, before minutes of planning
        return self

    def with_limits(self, w: Workload) -> Workload:
        """`w` with serve's limits (which size its slots): the flags', else the workload's own
        with a margin (Workload.serve_limits); --slot-tokens splits into the two."""
        given = [n for n in ("max_prompt_tokens", "max_new_tokens") if getattr(self, n) is not None]
        if self.slot_tokens is not None and given:
            raise UserError(f"--slot-tokens and --{given[0].replace('_', '-')}: give the limits or their sum")
        prompt, steps = w.longest
        if self.slot_tokens is not None:
            if self.slot_tokens < prompt + steps:
                raise UserError(
                    f"--slot-tokens: expected at least the {prompt + steps} tokens of the longest prompt "
                    f"and reply ({prompt} + {steps} steps), found {self.slot_tokens}"
                )
            limit = min(w.serve_limits()[0], self.slot_tokens - steps)
            return replace(w, max_prompt_tokens=limit, max_new_tokens=self.slot_tokens - limit)
        for name, least, what in (("max_prompt_tokens", prompt, "tokens of the longest prompt"),
                                  ("max_new_tokens", steps, "steps of the longest reply")):  # fmt: skip
            value = getattr(self, name)
            if value is not None and value < least:
                raise UserError(f"--{name.replace('_', '-')} {value}: expected at least the {least} {what}")
        return replace(w, max_prompt_tokens=self.max_prompt_tokens, max_new_tokens=self.max_new_tokens)

    def _bounds(self) -> None:
        """The upper bounds, each named by its flag (the lower ones are check()'s)."""
        flag = "--users" if self.users is not None else "--streams"
        at_most(flag, self.streams, MAX_STREAMS, f"{flag[2:]} (a simulation holds each one)")
        at_most("--rate", self.rate, MAX_RATE, "requests/s (thousands of cards)")
        at_most("--requests", self.requests, MAX_REQUESTS, "simulated requests (p99.9 needs ~3,700)")
        at_most("--audio-seconds", self.audio_seconds, MAX_AUDIO_S, "s of audio a request")
        at_most("--prompt-tokens", self.prompt_tokens, MAX_STEPS, "tokens")
        at_most("--first-chunk-steps", self.first_chunk_steps, MAX_STEPS, "steps")
        at_most("--max-prompt-tokens", self.max_prompt_tokens, MAX_STEPS, "tokens")
        at_most("--max-new-tokens", self.max_new_tokens, MAX_STEPS, "steps")
        at_most("--slot-tokens", self.slot_tokens, 2 * MAX_STEPS, "tokens")
        at_most("--max-batch", self.max_batch, MAX_BATCH, "sequences")
        at_most("--max-queue", self.max_queue, MAX_STREAMS, "requests")
        at_most("--memory-at", self.memory_at, MAX_BATCH, "sequences")
        at_most("--gpus-per-machine", self.gpus_per_machine, 64, "cards")
        at_most("--think-time", self.think_time, HOUR, "(an hour)", unit="s")
        at_most("--ramp-up", self.ramp_up, HOUR, "(an hour)", unit="s")
        for name in ("step_overhead", "vocoder_overhead"):  # 3 would be 3 s: it needs its unit
            if (text := getattr(self, name)) is not None:
                parse_duration(text, "--" + name.replace("_", "-"))

    def _users_as_streams(self) -> None:
        """--users N is --streams N of listeners (think_s says 0 s for them)."""
        if self.users is None:
            return
        if self.rate is not None or self.streams not in (None, self.users):
            raise UserError(
                "--users and --" + ("rate" if self.rate is not None else "streams")
                + ": expected one load (--users N is --streams N of listeners)"
            )  # fmt: skip
        if self.users <= 0:
            raise UserError(f"--users: expected a positive number of users, found {self.users}")
        self.streams = self.users

    def think_s(self) -> float | None:
        """A closed loop's think time: --think-time; users are listeners, 0 s unless it is given;
        None: --predict --streams's streams, back to back (plan's dialogue scenarios default to
        listeners themselves)."""
        if self.think_time is None and self.users is not None:
            return 0.0
        return self.think_time

    def for_predict(self) -> PlanSettings:
        """--predict: one device at one load; the settings it does not use said so, not ignored."""
        self._users_as_streams()
        unused = [
            name for name in ("scenario", "slo", "catalog", "prices", "price", "slot_tokens", "own",
                              "electricity", "memory_at", "fx")
            if getattr(self, name)
        ]  # fmt: skip
        if unused:
            flags = ", ".join("--" + n.replace("_", "-") for n in unused)
            raise UserError(f"--predict: {flags} not used (one device, one load, no SLO or cost)")
        if self.like is None and (self.streams is None) == (self.rate is None):
            found = "both" if self.streams is not None else "neither"
            raise UserError(f"--predict: expected one load, --streams N or --rate R, found {found}")
        if self.think_time is not None and self.rate is not None:
            raise UserError(
                "--predict: --think-time is a closed loop's listeners; give --streams N, not --rate"
            )
        if self.like is not None and self.streams is not None and self.rate is not None:
            raise UserError("--predict --like: --streams or --rate names the run's load point; give one")
        if self.like is not None and (self.text_set is not None or self.audio_seconds is not None):
            flag = "--text-set" if self.text_set is not None else "--audio-seconds"
            raise UserError(
                f"--predict --like: {flag} not used (the run's own requests are predicted, each "
                "with the audio it got; --prompt-tokens stands in where the run does not say)"
            )
        if self.ramp_up is not None and (self.rate is not None or self.like or not self.ramp_up >= 0):
            raise UserError(
                f"--ramp-up {self.ramp_up:g}s: expected seconds >= 0 with --streams or --users (a closed "
                "loop's streams; --like takes the run's own ramp-up)"
            )
        return self.check()
