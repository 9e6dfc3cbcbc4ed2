"""Every bench setting, once: `ttsperf bench`'s flags, a settings file's [bench] table and the
TTSPERF_BENCH_* variables are all made from the fields below (ttsperf.settings)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ttsperf.bench.quantiles import CONFIDENCE
from ttsperf.errors import UserError
from ttsperf.settings import SECONDS, Flag, Layered, at_most

if TYPE_CHECKING:
    from ttsperf.bench.results import Strategy

DEFAULT_REQUESTS = 100
DEFAULT_MAX_REQUESTS = 2000  # p99.9's high end needs 3,688: past this a verdict costs more than a default run
# Bounds past which bench measures itself, not the server (issue 35: --concurrency 100000000 grew to
# 22 GB before the kernel killed it). Each request in flight holds a task and a socket, and one
# client has ~28k-64k local ports to a server port and commonly a 1,024-1,048,576 file limit: past
# 100,000 in flight (or arriving a second) it runs out of those long before the server is loaded.
MAX_IN_FLIGHT = 100_000
# Every request's record is kept (requests.csv), ~1 KB each: a million is a gigabyte of memory.
MAX_REQUESTS = 1_000_000
HOUR, DAY = 3600.0, 86400.0


class BenchSettings(Layered):
    """What `run_bench` does; `validate()` checks what the types cannot, naming the flag."""

    model_config = SettingsConfigDict(env_prefix="TTSPERF_BENCH_")

    urls: Annotated[list[str], Flag(argument=True)] = Field(
        [], description="server URL(s); several share the load round-robin"
    )
    adapter: str = Field("invoke", description="invoke | openai | chattts-api | forge | template")
    concurrency: list[int] = Field([], description="closed loop: N in flight; a list sweeps, e.g. 1,4,16")
    think_time: Annotated[float | None, SECONDS] = Field(
        None,
        description="closed loop of listeners: each plays its reply as it arrives, then waits this long "
        "(e.g. 2s) before its next request (0s: asks again when the reply has played)",
    )
    users: list[int] = Field(
        [],
        description="closed loop of N users (listeners): each plays its reply as it arrives, thinks "
        "--think-time (default 0s), then asks again; a list sweeps",
    )
    ramp_up: Annotated[float, SECONDS] = Field(
        0.0,
        description="closed loop: start the N senders one after another over this long (e.g. 8s), as "
        "users arrive, not all in one wave (each phase: warm-up, measured); ~one request's cycle",
    )
    rate: list[float] = Field([], description="open loop: requests/s; a list sweeps, e.g. 2,4,8")
    arrival: str = Field("poisson", description="open-loop arrivals: poisson | constant | gamma[:SHAPE]")
    max_concurrency: int | None = Field(None, description="open loop: cap on requests in flight")
    requests: int | None = Field(
        None, description=f"measured requests per load point (default {DEFAULT_REQUESTS})"
    )
    duration: Annotated[float | None, SECONDS] = Field(
        None, description="time per load point instead of --requests"
    )
    warmup: int = Field(0, description="requests sent first and left out of every statistic")
    texts: Annotated[str | None, Flag(cli_type=Path)] = Field(
        None, description="texts file: .txt one per line, or .jsonl with 'text'"
    )
    text_set: str | None = Field(
        None, description="built-in: guide | zh | en | mixed | zh-short | en-long ..."
    )
    slo: str | None = Field(
        None, description="e.g. ttfa_p99=300ms,e2e_p99=5s,rtf_p95=1,error_rate=1%; a plan's slo.spec as is"
    )
    confidence: float = Field(  # of every percentile's interval, and so of the SLO verdict
        CONFIDENCE, description="of each percentile's interval and the SLO verdict"
    )
    until_decided: bool = Field(
        True, description="an SLO left inconclusive by too few requests: send more at the same load"
    )
    max_requests: int = Field(
        DEFAULT_MAX_REQUESTS, description="--until-decided: at most this many measured requests a point"
    )
    find_max: bool = Field(False, description="search the most load meeting --slo")
    timeout: Annotated[float, SECONDS] = Field(60.0, description="time before a request counts as a timeout")
    seed: int = Field(0, description="seed of the arrival schedule")
    format: str = Field("wav", description="openai: wav | pcm | mp3 | opus | flac")
    stream: bool = Field(False, description="openai: ask the server to stream")
    voice: str = Field("default", description="openai: voice")
    model: str = Field("chattts", description="openai: model")
    pcm_rate: int = Field(24_000, description="sample rate of raw PCM responses")
    template_body: str | None = Field(None, description="template: JSON body with a {text} placeholder")
    template_kind: str = Field("wav", description="template: response kind wav | pcm | mp3 | zip-mp3")
    audio_check: bool = Field(True, description="check each audio body: parses, duration, not silent")
    header: Annotated[list[str], Flag(("--header", "-H"), repeat=True, secret=True)] = Field(
        [], description="extra request header 'Name: value', e.g. an Authorization bearer token"
    )
    server_pid: int | None = Field(None, description="sample CPU and memory of this local server process")
    metrics_url: str | None = Field(
        None, description="Prometheus endpoint to scrape (DCGM exporter, /metrics)"
    )
    gpu: bool = Field(True, description="sample local GPUs through NVML")
    telemetry_interval: Annotated[float, SECONDS] = Field(0.5, description="time between telemetry samples")

    def validate(self) -> None:
        # imported here: every `ttsperf` command builds its options from these fields at start
        from ttsperf.bench.adapters import CHUNKED, check_url, streamed
        from ttsperf.bench.arrivals import parse_arrival
        from ttsperf.slo import parse

        if not self.urls:
            raise UserError("URL: give at least one server URL, e.g. http://127.0.0.1:8080")
        for u in self.urls:
            check_url(u)
        if self.concurrency and self.rate:
            raise UserError("--concurrency and --rate: choose one (closed loop or open loop)")
        if self.users and (self.concurrency or self.rate):
            other = "--concurrency" if self.concurrency else "--rate"
            raise UserError(
                f"--users and {other}: choose one (--users N is --concurrency N --think-time S, "
                "requests in flight that are listeners)"
            )
        if any(c < 1 for c in self.concurrency):
            raise UserError(f"--concurrency {self.concurrency}: every value must be >= 1")
        if any(u < 1 for u in self.users):
            raise UserError(f"--users {self.users}: every value must be >= 1")
        if self.think_time is not None and (self.rate or not self.think_time >= 0):
            raise UserError(
                f"--think-time {self.think_time:g}s: expected seconds >= 0 with --concurrency or --users "
                "(a closed loop's listeners; an open loop's arrivals do not wait for replies)"
            )
        if self.ramp_up and (self.rate or not self.ramp_up > 0):
            raise UserError(
                f"--ramp-up {self.ramp_up:g}s: expected seconds >= 0 with --concurrency or --users "
                "(a closed loop's senders starting one after another; an open loop has no senders)"
            )
        if any(not r > 0 for r in self.rate):
            raise UserError(f"--rate {self.rate}: every value must be > 0 requests/s")
        parse_arrival(self.arrival)
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise UserError(f"--max-concurrency {self.max_concurrency}: must be >= 1")
        if self.requests is not None and self.duration is not None:
            raise UserError("--requests and --duration: choose one")
        if self.requests is not None and self.requests < 1:
            raise UserError(f"--requests {self.requests}: must be >= 1")
        if self.duration is not None and not self.duration > 0:
            raise UserError(f"--duration {self.duration}: must be > 0 seconds")
        if self.max_requests < 1:
            raise UserError(f"--max-requests {self.max_requests}: must be >= 1")
        if self.warmup < 0:
            raise UserError(f"--warmup {self.warmup}: must be >= 0")
        if not self.timeout > 0:
            raise UserError(f"--timeout {self.timeout}: must be > 0 seconds")
        if not self.telemetry_interval > 0:
            raise UserError(f"--telemetry-interval {self.telemetry_interval}: must be > 0 seconds")
        self._bounds()
        if not 0.5 <= self.confidence < 1:
            raise UserError(f"--confidence {self.confidence}: expected a level in [0.5, 1), e.g. 0.95")
        chunked = [x.name for x in parse(self.slo) if x.metric in CHUNKED]
        if chunked and not streamed(self.adapter, self.stream):
            raise UserError(
                f"--slo {chunked[0]}: the {self.adapter} adapter's replies are not streamed, so their first "
                "audio is the whole response; judge e2e, or stream (--adapter openai --stream)"
            )
        if self.find_max and not self.slo:
            raise UserError("--find-max needs --slo: the most load that meets which objective?")
        if self.metrics_url:
            check_url(self.metrics_url)
        self.header_dict()

    def _bounds(self) -> None:
        """The upper bounds, each named by its flag (the lower ones are validate()'s)."""
        in_flight = "requests in flight (one client's sockets and ports; use several clients past it)"
        at_most("--concurrency", self.concurrency, MAX_IN_FLIGHT, in_flight)
        at_most("--users", self.users, MAX_IN_FLIGHT, in_flight)
        at_most("--max-concurrency", self.max_concurrency, MAX_IN_FLIGHT, in_flight)
        at_most("--rate", self.rate, MAX_IN_FLIGHT, "requests/s (one client's sockets and ports)")
        for flag, n in (("--requests", self.requests), ("--max-requests", self.max_requests),
                        ("--warmup", self.warmup)):  # fmt: skip
            at_most(flag, n, MAX_REQUESTS, "requests a load point (each one's record is kept)")
        arrivals = max(self.rate, default=0) * (self.duration or 0)
        if arrivals > MAX_REQUESTS:  # the schedule is drawn before the point starts
            raise UserError(
                f"--rate {max(self.rate):g} --duration {self.duration:g}s: {arrivals:,.0f} arrivals; "
                f"expected at most {MAX_REQUESTS:,} a load point"
            )
        at_most("--duration", self.duration, DAY, "(a day a load point)", unit="s")
        for flag, t in (("--timeout", self.timeout), ("--think-time", self.think_time),
                        ("--ramp-up", self.ramp_up)):  # fmt: skip
            at_most(flag, t, HOUR, "(an hour)", unit="s")
        at_most("--telemetry-interval", self.telemetry_interval, 60.0, "(a sample a minute)", unit="s")
        if self.telemetry_interval < 0.01:
            raise UserError(f"--telemetry-interval {self.telemetry_interval:g}: expected at least 10ms")
        if not 8_000 <= self.pcm_rate <= 384_000:
            raise UserError(f"--pcm-rate {self.pcm_rate}: expected a sample rate in Hz from 8,000 to 384,000")

    def header_dict(self) -> dict[str, str]:
        out = {}
        for h in self.header:
            name, sep, value = h.partition(":")
            if not sep or not name.strip() or any(c in name for c in " \t\r\n") or "\n" in value:
                raise UserError(f"--header {h!r}: expected 'Name: value', e.g. 'Authorization: Bearer TOKEN'")
            out[name.strip()] = value.strip()
        return out

    def strategies(self) -> list[Strategy]:
        return [self.strategy(x) for x in self.rate or self.in_flight() or [1]]

    def strategy(self, load: float) -> Strategy:
        """The load point at `load`: requests/s with --rate, else that many closed-loop senders."""
        from ttsperf.bench.results import Strategy

        if self.rate:
            return Strategy(
                kind="rate", rate=load, arrival=self.arrival, max_concurrency=self.max_concurrency
            )
        return Strategy(
            kind="concurrent", concurrency=int(load), think_s=self.think_s(), ramp_s=self.ramp_up or None
        )

    def in_flight(self) -> list[int]:
        """A closed loop's sizes: --users or --concurrency (empty: an open loop, or neither given)."""
        return self.users or self.concurrency

    def think_s(self) -> float | None:
        """A closed loop's think time: --think-time; users are listeners, 0 s unless it is given;
        None: --concurrency's streams, back to back."""
        if self.think_time is None and self.users:
            return 0.0
        return self.think_time
