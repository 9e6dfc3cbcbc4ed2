"""Load for the reliability suite: an open loop of requests at fixed send times, each request's
outcome, and the one figure line every test prints.

An outcome is one of: answered (any complete HTTP answer; a 200 must carry the whole, valid audio),
refused (the connection was refused: never accepted, e.g. after the server exited) or lost (accepted
and never completely answered: a reset, a timeout, a cut-off or invalid body). `lost` must be 0.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from ttsperf.audio import decode_wav


@dataclass
class Outcome:
    sent_at: float  # seconds since the load started
    status: int | None = None
    latency: float | None = None
    retry_after: str | None = None
    refused: bool = False
    abandoned: bool = False  # the client itself hung up: nobody left to answer
    error: str | None = None  # why an accepted request got no complete answer

    @property
    def lost(self) -> bool:
        return not (self.refused or self.abandoned) and (self.status is None or self.error is not None)


@dataclass
class Tally:
    outcomes: list[Outcome] = field(default_factory=list)
    t0: float = 0.0  # time.monotonic() when the load started; Outcome.sent_at counts from here

    @property
    def sent(self) -> int:
        return len(self.outcomes)

    @property
    def answered(self) -> int:
        return sum(o.status is not None and o.error is None and not o.abandoned for o in self.outcomes)

    @property
    def lost(self) -> int:
        return sum(o.lost for o in self.outcomes)

    def codes(self) -> Counter:
        return Counter(o.status for o in self.outcomes if o.status is not None and not o.abandoned)

    def latencies(self, status: int = 200) -> list[float]:
        return [o.latency for o in self.outcomes if o.status == status and o.error is None and o.latency]

    def throughput(self) -> float:
        """Complete 200s per second over the window from the first send to the last answer."""
        ok = [o for o in self.outcomes if o.status == 200 and o.error is None]
        end = max(o.sent_at + (o.latency or 0.0) for o in ok)
        return len(ok) / (end - min(o.sent_at for o in self.outcomes))

    def figure(self, name: str, **extra: object) -> str:
        codes = self.codes()
        refused = sum(o.refused for o in self.outcomes)
        abandoned = sum(o.abandoned for o in self.outcomes)
        parts = [f"sent={self.sent}", f"answered={self.answered}", f"200={codes[200]}", f"503={codes[503]}"]
        others = {c: n for c, n in sorted(codes.items()) if c not in (200, 503)}
        parts += [f"{c}={n}" for c, n in others.items()]
        if refused:
            parts.append(f"refused={refused}")
        if abandoned:
            parts.append(f"hung_up={abandoned}")
        parts += [f"{k}={v}" for k, v in extra.items()]
        line = f"FIGURE {name}: " + " ".join(parts) + f" lost={self.lost}"
        print(line, flush=True)
        errors = [o.error for o in self.outcomes if o.lost][:3]
        assert self.lost == 0, f"{line}; first errors: {errors}"
        return line


def wav_samples(expected: int):
    """A check for a 200 /invoke body: a WAV of exactly `expected` samples."""

    def check(body: bytes) -> str | None:
        try:
            n = len(decode_wav(body)[0])
        except Exception as exc:  # a cut-off or garbled body: the answer is incomplete
            return f"invalid WAV ({type(exc).__name__}: {exc})"
        return None if n == expected else f"WAV of {n} samples, expected {expected}"

    return check


async def _one(client: httpx.AsyncClient, path: str, body: dict, check, t0: float, at: float) -> Outcome:
    await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
    out = Outcome(sent_at=time.monotonic() - t0)
    start = time.monotonic()
    try:
        r = await client.post(path, json=body)
    except httpx.ConnectError:
        out.refused = True
        return out
    except httpx.HTTPError as exc:
        out.error = f"{type(exc).__name__}: {exc}"
        return out
    out.status, out.latency = r.status_code, time.monotonic() - start
    out.retry_after = r.headers.get("retry-after")
    if r.status_code == 200 and check is not None:
        out.error = check(r.content)
    return out


def offer(
    url: str,
    path: str,
    body: dict,
    *,
    rate: float,
    seconds: float,
    check=None,
    timeout: float = 300.0,
    keepalive: bool = True,
) -> Tally:
    """Open loop: a request every 1/rate seconds for `seconds`, each on its own connection slot,
    whatever the answers (a closed loop would slow down with the server and hide overload).
    `keepalive=False`: a new connection per request. A server that shuts down closes its idle
    keep-alive connections, and a request written on one at that moment is never read: the client
    sees the connection close with no answer, which a test of shutdown would count as lost."""

    tally = Tally()

    async def run() -> None:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64 if keepalive else 0)
        async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:
            tally.t0 = time.monotonic()
            n = max(1, round(rate * seconds))
            tasks = [_one(client, path, body, check, tally.t0, i / rate) for i in range(n)]
            tally.outcomes = list(await asyncio.gather(*tasks))

    asyncio.run(run())
    return tally


def closed_loop(url: str, path: str, body: dict, *, workers: int, requests: int, check=None) -> Tally:
    """`workers` clients each sending `requests` requests back to back (no queue forms beyond them)."""

    async def worker(client: httpx.AsyncClient, t0: float) -> list[Outcome]:
        return [await _one(client, path, body, check, t0, 0.0) for _ in range(requests)]

    async def run() -> list[Outcome]:
        async with httpx.AsyncClient(base_url=url, timeout=300.0) as client:
            t0 = time.monotonic()
            done = await asyncio.gather(*(worker(client, t0) for _ in range(workers)))
        return [o for outcomes in done for o in outcomes]

    return Tally(asyncio.run(run()))
