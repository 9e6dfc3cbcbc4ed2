"""`plan --predict --like RUN`: the load and the workload of a bench run, as a prediction takes them.

A prediction is held against a measurement only on the same work. A bench run records what it
sent and what came back: its load (closed loop of N streams, listeners with a think time, or an
open loop's rate and arrivals), its measured requests, whether it streamed, and per request the
audio the server made and - from `ttsperf serve` - the prompt's length in tokens. `like` reads
those and says where each number came from.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from ttsperf import facts as F
from ttsperf.bench.results import BenchRun, PointResult
from ttsperf.errors import UserError
from ttsperf.plan.simulate import Load

# bench's adapters whose requests stream (bench refuses --stream with the others)
STREAMING = ("openai",)


@dataclass(frozen=True)
class Like:
    """What one load point of a bench run did, for the simulator."""

    load: Load
    requests: int
    audio_seconds: float
    prompt_tokens: int | None  # None: the run does not say (a server without X-Prompt-Tokens)
    streamed: bool
    point: str  # its strategy's label, e.g. concurrent@64
    how: str


def read_run(path: str | Path) -> BenchRun:
    """A bench run.json, or the folder `bench -o` wrote it to."""
    p = Path(path)
    if p.is_dir():
        p = p / "run.json"
    if not p.exists():
        raise UserError(
            f"--like {path}: no such bench run (expected run.json or the folder `bench -o` wrote)"
        )
    return BenchRun.read(p)


def _point(run: BenchRun, path: str, streams: int | None, rate: float | None) -> tuple[int, PointResult]:
    """The run's one load point, or the one --streams / --rate names."""
    points = list(enumerate(run.points))
    if streams is not None:
        points = [
            (i, p) for i, p in points if p.strategy.kind == "concurrent" and p.strategy.concurrency == streams
        ]
    elif rate is not None:
        points = [(i, p) for i, p in points if p.strategy.kind == "rate" and p.strategy.rate == rate]
    if len(points) != 1:
        labels = ", ".join(p.strategy.label for p in run.points) or "none"
        raise UserError(
            f"--like {path}: expected one load point{' at that load' if streams or rate else ''}, "
            f"found {len(points)} (its points: {labels}); name one with --streams N or --rate R"
        )
    return points[0]


def like(path: str, streams: int | None = None, rate: float | None = None) -> Like:
    """The load, requests, audio per request, prompt tokens and streaming of a bench run's point."""
    run = read_run(path)
    index, point = _point(run, path, streams, rate)
    s = point.strategy
    if s.kind == "concurrent":
        load = Load("streams", float(s.concurrency or 1), s.think_s)
    else:
        arrival = (s.arrival or "poisson").split(":")[0]
        if arrival not in ("poisson", "constant"):
            raise UserError(f"--like {path}: arrivals {s.arrival!r}; the simulator draws poisson or constant")
        load = Load("rate" if arrival == "poisson" else "constant", float(s.rate or 0.0))
    mine = [r for r in run.records if r.point == index and not r.warmup and r.ok]
    if not mine:
        raise UserError(
            f"--like {path}: point {s.label} has no successful measured request to learn the work from"
        )
    audio = [r.audio_s or r.server_audio_s or r.expected_audio_s for r in mine]
    tokens = [r.prompt_tokens for r in mine if r.prompt_tokens is not None]
    audio_s = statistics.median(audio)
    streamed = bool(run.config.get("stream")) and run.adapter in STREAMING
    how = (
        f"bench run {path}, point {s.label}: {point.requests} measured requests"
        f"{f' after {point.warmup} warm-up' if point.warmup else ''}, median audio {audio_s:.2f} s "
        f"({F.steps_for_audio(audio_s)} steps) of {len(mine)} answered"
        + (f", median prompt {statistics.median(tokens):.0f} tokens (X-Prompt-Tokens)" if tokens else "")
        + (", streamed" if streamed else f", not streamed ({run.adapter}): TTFA is the whole response")
    )
    return Like(
        load=load,
        requests=point.requests,
        audio_seconds=audio_s,
        prompt_tokens=round(statistics.median(tokens)) if tokens else None,
        streamed=streamed,
        point=s.label,
        how=how,
    )
