"""`plan --predict --like RUN`: the load and the workload of a bench run, as a prediction takes them.

A prediction is held against a measurement only on the same work. A bench run records what it
sent and what came back: its load (closed loop of N streams, listeners with a think time, started
at once or over a ramp-up, or an open loop's rate and arrivals), its measured requests, whether it
streamed, and per request the audio the server made and - from `ttsperf serve` - the prompt's
length in tokens; and, from `ttsperf serve`'s /healthz, the server's own settings (engine mode,
dtype, max batch, first chunk), which a prediction takes for what its user did not set. `like`
reads those and says where each number came from; `bench_flags` writes a load back as bench's flags.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttsperf import facts as F
from ttsperf.errors import UserError
from ttsperf.plan.simulate import Load

# bench's adapters whose requests stream (bench refuses --stream with the others)
STREAMING = ("openai",)
# run.json's schema (bench/results.py SCHEMA): plan reads the file, never bench's code (the layers'
# contract in pyproject.toml), so it checks the family and reads the fields it needs by name
RUN_SCHEMA = "ttsperf.benchrun/"


@dataclass(frozen=True)
class Like:
    """What one load point of a bench run did, for the simulator."""

    load: Load
    requests: int
    audio_seconds: float  # the mean of `lengths`
    prompt_tokens: int | None  # None: the run does not say (a server without X-Prompt-Tokens)
    # each answered measured request's audio seconds and prompt tokens (None: not said), in the
    # order bench sent them: the simulator's k-th request takes the k-th, so a prediction holds
    # the run's spread and its order (a text set's long texts come together), not one length
    lengths: tuple[tuple[float, int | None], ...]
    streamed: bool
    point: str  # its strategy's label, e.g. concurrent@64
    how: str
    server: RunServer | None = None  # None: the run does not say (another server, or an older run)


MODES = ("eager", "compile", "cuda-graphs")  # plan's names, as bench writes them


@dataclass(frozen=True)
class RunServer:
    """What the run's server said it ran (run.json's `server`, bench/results.py ServerSettings):
    the settings a prediction can take, each None where the run does not say it."""

    mode: str | None
    dtype: str | None
    max_batch: int | None
    max_queue: int | None
    first_chunk_steps: int | None
    source: str  # where bench read it, e.g. http://127.0.0.1:8080/healthz
    about: str  # its version, model and device, e.g. "ttsperf 0.1.0, tiny on cpu"
    engines: int | None = None  # serve --engines (None: one, or not said)
    steps_per_turn: int | None = None  # serve --steps-per-turn (None: one, or not said)

    @classmethod
    def read(cls, block: Any) -> RunServer | None:
        """run.json's `server` block; None for an older run's (absent), a null or a block of another
        shape (a field of the wrong type is left unsaid, not guessed)."""
        if not isinstance(block, dict):
            return None

        def count(name: str) -> int | None:
            v = block.get(name)
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else None

        def text(name: str) -> str | None:
            v = block.get(name)
            return v if isinstance(v, str) and v else None

        mode, dtype = text("mode"), text("dtype")
        on = " on ".join(x for x in (text("model"), text("device")) if x)
        about = ", ".join(x for x in (f"ttsperf {text('version')}" if text("version") else "", on) if x)
        return cls(
            mode=mode if mode in MODES else None,
            dtype=dtype if dtype in F.BYTES_PER_DTYPE else None,
            max_batch=count("max_batch"), max_queue=count("max_queue"),
            first_chunk_steps=count("first_chunk_steps"),
            source=text("source") or "run.json", about=about, engines=count("engines"),
            steps_per_turn=count("steps_per_turn"),
        )  # fmt: skip


def read_run(path: str | Path) -> dict[str, Any]:
    """A bench run.json, or the folder `bench -o` wrote it to, as its JSON."""
    p = Path(path)
    if p.is_dir():
        p = p / "run.json"
    if not p.exists():
        raise UserError(
            f"--like {path}: no such bench run (expected run.json or the folder `bench -o` wrote)"
        )
    try:
        run = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"--like {p}: not a readable run.json ({exc})") from None
    if not isinstance(run, dict) or not str(run.get("schema", "")).startswith(RUN_SCHEMA):
        found = run.get("schema") if isinstance(run, dict) else type(run).__name__
        raise UserError(f"--like {p}: schema {found!r}, expected a bench run ({RUN_SCHEMA}N)")
    return run


def _point(run: dict, path: str, streams: int | None, rate: float | None) -> tuple[int, dict]:
    """The run's one load point, or the one --streams / --rate names."""
    points = list(enumerate(run.get("points", [])))

    def load(p: dict) -> tuple[str, float]:
        s = p["strategy"]
        return s["kind"], float(s["concurrency"] if s["kind"] == "concurrent" else s["rate"])

    if streams is not None:
        points = [(i, p) for i, p in points if load(p) == ("concurrent", float(streams))]
    elif rate is not None:
        points = [(i, p) for i, p in points if load(p) == ("rate", float(rate))]
    if len(points) != 1:
        labels = ", ".join(p["label"] for p in run.get("points", [])) or "none"
        raise UserError(
            f"--like {path}: expected one load point{' at that load' if streams or rate else ''}, "
            f"found {len(points)} (its points: {labels}); name one with --streams N or --rate R"
        )
    return points[0]


def _index(r: dict) -> int:
    return int(r["i"])


def _answered(r: dict) -> bool:
    """A measured request that was answered (bench's RequestRecord.ok, warm-up left out)."""
    return not r["warmup"] and r.get("error") is None and r.get("t_end") is not None


def like(path: str, streams: int | None = None, rate: float | None = None) -> Like:
    """The load, requests, audio per request, prompt tokens and streaming of a bench run's point."""
    run = read_run(path)
    try:
        index, point = _point(run, path, streams, rate)
        s = point["strategy"]
        if s["kind"] == "concurrent":
            load = Load("streams", float(s["concurrency"] or 1), s.get("think_s"), s.get("ramp_s") or 0.0)
        else:
            arrival = (s.get("arrival") or "poisson").split(":")[0]
            if arrival not in ("poisson", "constant"):
                raise UserError(
                    f"--like {path}: arrivals {s['arrival']!r}; the simulator draws poisson or constant"
                )
            load = Load("rate" if arrival == "poisson" else "constant", float(s["rate"]))
        # in the order bench sent them (its texts go round in order)
        mine = sorted((r for r in run.get("records", []) if r["point"] == index and _answered(r)), key=_index)
    except (KeyError, TypeError) as exc:
        raise UserError(
            f"--like {path}: not a bench run as ttsperf bench writes it (missing {exc})"
        ) from None
    if not mine:
        raise UserError(
            f"--like {path}: point {point['label']} has no answered measured request to learn from"
        )
    audio = [r.get("audio_s") or r.get("server_audio_s") or r["expected_audio_s"] for r in mine]
    prompts = [r.get("prompt_tokens") for r in mine]
    tokens = [t for t in prompts if t is not None]
    audio_s = statistics.fmean(audio)
    spread = statistics.quantiles(audio, n=100, method="inclusive") if len(audio) > 1 else [audio[0]] * 99
    streamed = bool(run.get("config", {}).get("stream")) and run.get("adapter") in STREAMING
    warm = f" after {point['warmup']} warm-up" if point.get("warmup") else ""
    how = (
        f"bench run {path}, point {point['label']}: {point['requests']} measured requests{warm}, "
        f"audio per request mean {audio_s:.2f} s ({F.steps_for_audio(audio_s)} steps), P50 "
        f"{spread[49]:.2f} s, P99 {spread[98]:.2f} s of {len(mine)} answered"
        + (f", median prompt {statistics.median(tokens):.0f} tokens (X-Prompt-Tokens)" if tokens else "")
        + (", streamed" if streamed else f", not streamed ({run.get('adapter')}): TTFA is the whole response")
    )
    return Like(load=load, requests=int(point["requests"]), audio_seconds=audio_s,
                prompt_tokens=round(statistics.median(tokens)) if tokens else None,
                lengths=tuple(zip(audio, prompts, strict=True)), streamed=streamed, point=point["label"],
                how=how, server=RunServer.read(run.get("server")))  # fmt: skip


def bench_flags(load: Load) -> str:
    """The `ttsperf bench` flags that run `load`, the inverse of `like`: --rate R (Poisson, or
    --arrival constant), --concurrency N (streams back to back) or --users N (listeners, who think
    0 s unless --think-time says), and a closed loop's --ramp-up."""
    if load.kind != "streams":
        return f"--rate {load.value:.3g}" + (" --arrival constant" if load.kind == "constant" else "")
    n = f"{load.value:g}"
    if load.think_s is None:
        flags = f"--concurrency {n}"
    else:
        flags = f"--users {n}" + (f" --think-time {load.think_s:g}s" if load.think_s else "")
    return flags + (f" --ramp-up {load.ramp_s:g}s" if load.ramp_s else "")
