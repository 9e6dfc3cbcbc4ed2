"""Open-loop arrival schedules, precomputed as absolute offsets before the first request is sent.

Precomputing (as wrk2 does) is what makes latency-from-intended-send honest: a slow server cannot
delay when the next request *should* have gone out, only when it actually did.
"""

from __future__ import annotations

import numpy as np

from ttsperf.errors import UserError


def parse_arrival(spec: str) -> tuple[str, float]:
    """`poisson`, `constant`, `gamma` or `gamma:SHAPE` -> (kind, gamma shape)."""
    kind, _, arg = spec.partition(":")
    if kind not in ("poisson", "constant", "gamma"):
        raise UserError(f"--arrival {spec!r}: expected poisson, constant or gamma[:SHAPE]")
    shape = 1.0
    if arg:
        if kind != "gamma":
            raise UserError(f"--arrival {spec!r}: only gamma takes a parameter (gamma:SHAPE)")
        try:
            shape = float(arg)
        except ValueError:
            shape = -1.0
        if not shape > 0:
            raise UserError(f"--arrival {spec!r}: gamma shape must be a number > 0")
    return kind, shape


def gaps(kind: str, rate: float, n: int, rng: np.random.Generator, shape: float = 1.0) -> np.ndarray:
    """n inter-arrival gaps with mean 1/rate. Gamma with shape k has CV 1/sqrt(k) (k<1: burstier)."""
    if kind == "constant":
        return np.full(n, 1.0 / rate)
    if kind == "poisson":
        return rng.exponential(1.0 / rate, n)
    return rng.gamma(shape, 1.0 / (rate * shape), n)


def schedule(
    kind: str, rate: float, seed: int, n: int | None = None, duration: float | None = None, shape: float = 1.0
) -> np.ndarray:
    """Offsets (s) from the start of the point: the first n arrivals, or all within `duration`.

    The first request goes at offset 0 so a point's window does not start with an idle gap.
    """
    rng = np.random.default_rng(seed)
    if n is not None:
        return np.concatenate([[0.0], np.cumsum(gaps(kind, rate, max(n - 1, 0), rng, shape))])[:n]
    assert duration is not None
    out = [np.zeros(1)]
    last = 0.0
    while last < duration:
        chunk = last + np.cumsum(gaps(kind, rate, max(16, int(rate * duration)), rng, shape))
        out.append(chunk)
        last = float(chunk[-1])
    offsets = np.concatenate(out)
    return offsets[offsets < duration]
