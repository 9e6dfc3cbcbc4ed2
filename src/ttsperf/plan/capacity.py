"""The capacity search: the most load per GPU meeting an SLO, by bracketing and bisecting simulated
loads (latency grows with load, so meeting the SLO is monotone in it).

Two brackets, one search: streams (a closed loop) move in whole streams from 1 up to 4 x the
batch (past it requests only queue for a slot); a rate moves in req/s up to the saturated
throughput (the closed loop at max batch bounds any stable rate). The simulator is any function
of a Load, so the search is tested on a fake one (tests/plan/test_capacity.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttsperf.plan.scenarios import meets
from ttsperf.plan.simulate import Load, SimResult

Simulator = Callable[[Load], SimResult]


@dataclass
class Capacity:
    value: float  # most streams (int) or req/s per GPU meeting the SLO; 0 = not even the least
    result: SimResult | None  # simulation at that load
    closest: SimResult | None  # at the least load, when even that misses
    above: SimResult | None = None  # the least simulated load that missed the SLO (what binds)
    above_load: Load | None = None


@dataclass(frozen=True)
class StreamBracket:
    """Whole streams in [1, top]. Without a guess the search doubles from 8 (down by 1.5x when 8
    misses: a card carrying fewer costs as many runs as doubling from 1 would); from a guess (a
    neighbouring setting's capacity) it steps up by `step` and down by `down_step`."""

    top: int
    guessed: bool
    resolution: float  # stop when the bracket is within this fraction of the load (0: one stream)
    step: float = 1.25
    down_step: float = 1.5
    least: int = 1
    kind: str = "streams"
    to_top: bool = False  # meeting the SLO at the start: bisect up to `top` at once

    def start(self, guess: float | None) -> int:
        return (
            min(self.top, max(self.least, 8)) if guess is None else max(self.least, min(self.top, int(guess)))
        )

    def up(self, n: int) -> int:
        return min(self.top, max(n + 1, round(n * self.step))) if self.guessed else min(self.top, 2 * n)

    def down(self, n: int) -> int:
        return max(self.least, min(n - 1, round(n / self.down_step)))

    def mid(self, lo: int, hi: int) -> int | None:
        return (lo + hi) // 2 if hi - lo > max(1, self.resolution * lo) else None

    def value(self, lo: float) -> float:
        return int(lo)


@dataclass(frozen=True)
class RateBracket:
    """Requests/s in [top / 256, top], top the saturated throughput; steps of `step` up (1.25x),
    `down_step` down."""

    top: float
    guessed: bool
    resolution: float  # stop when the bracket is within this fraction of the load (0: top / 256)
    step: float = 1.25
    down_step: float = 1.5
    kind: str = "rate"

    @property
    def least(self) -> float:
        return self.top / 256

    @property
    def to_top(self) -> bool:  # without a guess, bisect straight to 1/256 of capacity
        return not self.guessed

    def start(self, guess: float | None) -> float:
        return self.least if guess is None else max(self.least, min(self.top, guess))

    def up(self, x: float) -> float:
        return min(self.top, x * self.step)

    def down(self, x: float) -> float:
        return max(self.least, x / self.down_step)

    def mid(self, lo: float, hi: float) -> float | None:
        return (lo + hi) / 2 if hi - lo > max(self.top / 256, self.resolution * lo) else None

    def value(self, lo: float) -> float:
        return lo


Bracket = StreamBracket | RateBracket


def find_capacity(
    max_batch: int,
    kind: str,
    slo: dict[str, float],
    sim: Simulator,
    guess: float | None = None,
    resolution: float = 0.0,
    step: float = 1.25,
    down: float = 1.5,
) -> Capacity:
    """Most load per GPU meeting the SLO: bracket, then bisect on simulated runs. `kind`: streams
    or rate; `guess`: where to start (a neighbouring setting's capacity); `resolution`: stop
    bisecting when the bracket is within this fraction of the load; `step`, `down`: how far the
    bracket moves up and down from the guess (a guess known to be close moves less). Without an
    SLO the capacity is the saturated card: its batch of streams, or its closed-loop throughput at
    max batch."""
    if kind == "streams":
        if not slo:  # no bound: more streams than slots only wait, so capacity is the batch
            return Capacity(max_batch, sim(Load("streams", max_batch)), None)
        bracket: Bracket = StreamBracket(4 * max_batch, guess is not None, resolution, step, down)
    else:
        saturated = sim(Load("streams", max_batch))  # the closed-loop throughput bounds any stable rate
        if not slo:
            return Capacity(saturated.throughput_rps, saturated, None)
        bracket = RateBracket(saturated.throughput_rps, guess is not None, resolution, step, down)
    return search(bracket, slo, sim, bracket.start(guess))


def search(b: Bracket, slo: dict[str, float], sim: Simulator, start: float) -> Capacity:
    """Bracket the capacity from `start` (up while the SLO is met, down while it is not), then bisect."""
    r = sim(Load(b.kind, start))
    above: tuple[float, SimResult] | None = None  # the least load seen to miss, and its run
    if meets(r, slo):
        lo, best = start, r
        hi: float | None = b.top if b.to_top else None
        while hi is None and lo < b.top:
            n = b.up(lo)
            r = sim(Load(b.kind, n))
            if meets(r, slo):
                lo, best = n, r
            else:
                hi, above = n, (n, r)
        if hi is None:  # met at the top of the bracket
            return Capacity(b.value(lo), best, None)
    else:
        hi, above = start, (start, r)
        while True:
            if hi <= b.least:  # not even the least load meets it
                return Capacity(0, None, r, r, Load(b.kind, hi))
            n = b.down(hi)
            r = sim(Load(b.kind, n))
            if meets(r, slo):
                lo, best = n, r
                break
            hi, above = n, (n, r)
    while (m := b.mid(lo, hi)) is not None:  # the SLO is monotone in load
        r = sim(Load(b.kind, m))
        if meets(r, slo):
            lo, best = m, r
        else:
            hi, above = m, (m, r)
    if above is None:
        return Capacity(b.value(lo), best, None)
    return Capacity(b.value(lo), best, None, above[1], Load(b.kind, above[0]))
