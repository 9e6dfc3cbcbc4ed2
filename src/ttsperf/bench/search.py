"""`--find-max`: the most load (concurrency or rate) that still meets the SLO, by doubling then bisection.

Assumes the SLO gets harder with load (monotone); noise near the edge can break that, so every
probe is kept in the result and the answer is the highest load that actually passed.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field


@dataclass
class SearchResult:
    best: float | None  # highest passing load; None if even the smallest probed load failed
    first_fail: float | None
    probes: list[tuple[float, bool]] = field(default_factory=list)


def search_steps(
    start: float, integer: bool, limit: float, rel_tol: float = 0.05, max_probes: int = 16
) -> Generator[float, bool, SearchResult]:
    """Yields each load to probe and is sent back whether it passed; returns the SearchResult.

    A generator, so the async runner can drive it without this module knowing about event loops.
    """
    res = SearchResult(None, None)
    seen: dict[float, bool] = {}

    def probe(x: float):
        if x not in seen:
            seen[x] = yield x
            res.probes.append((x, seen[x]))
        return seen[x]

    lo: float | None = None  # highest known pass
    hi: float | None = None  # lowest known fail
    x = start
    while len(res.probes) < max_probes:  # grow until something fails (or the limit)
        if (yield from probe(x)):
            lo = x
            if x >= limit:
                break
            x = min(limit, x * 2)
        else:
            hi = x
            break
    if lo is None and hi is not None:  # the start already fails: look below it
        bottom = 1.0 if integer else start / 64
        while len(res.probes) < max_probes and hi > bottom:
            mid = float((int(bottom) + int(hi)) // 2) if integer else (bottom + hi) / 2
            if integer and mid < 1:
                break
            if (yield from probe(mid)):
                lo = mid
                break
            hi = mid
            if integer and mid <= 1:
                break
    while lo is not None and hi is not None and len(res.probes) < max_probes:
        # Each probe is a whole load point: stop at rel_tol (but integers resolve down to 1 apart).
        if hi - lo <= (max(1.0, int(rel_tol * hi)) if integer else rel_tol * hi):
            break
        mid = float((int(lo) + int(hi)) // 2) if integer else (lo + hi) / 2
        if (yield from probe(mid)):
            lo = mid
        else:
            hi = mid
    res.best, res.first_fail = lo, hi
    return res


def find_max(
    passes: Callable[[float], bool], start: float, integer: bool, limit: float, **kw
) -> SearchResult:
    """The same search with a plain function as the probe."""
    gen = search_steps(start, integer, limit, **kw)
    try:
        x = next(gen)
        while True:
            x = gen.send(passes(x))
    except StopIteration as stop:
        return stop.value
