"""Does a server batch? Asked of the server itself when its /healthz cannot say (opt-in: it sends
requests). The guide's `/invoke` API: one request alone, then N at once. A server that serves one
request at a time (the official ChatTTS examples) takes about N times as long for N; one that
batches or overlaps them takes about as long as for one.

This tells serial from concurrent. It does not tell a static batch (which waits for its longest
row) from continuous batching; that needs mixed lengths and is not probed.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from ttsperf.errors import UserError

PROBE_TEXT = "你好，这是一段用于压测的文本，长度八秒左右。"  # the guide's sentence
SERIAL_BELOW = 1.5  # speed-up of N at once over N one after another: under it, served one at a time


def probe_batching(url: str, concurrency: int = 4, timeout: float = 300.0) -> tuple[str, str]:
    """-> ("none" | "concurrent", evidence)."""
    import httpx

    base = url.rstrip("/")

    def post(client: httpx.Client) -> None:
        try:
            resp = client.post(f"{base}/invoke", json={"text": PROBE_TEXT})
        except httpx.HTTPError as exc:
            raise UserError(
                f"--url {url}: probe POST {base}/invoke failed ({type(exc).__name__}: {exc})"
            ) from None
        if resp.status_code != 200:
            raise UserError(
                f"--url {url}: probe POST {base}/invoke answered HTTP {resp.status_code}; "
                'expected 200 (the guide\'s API: {"text": ...} -> WAV)'
            )

    limits = httpx.Limits(max_connections=concurrency)
    with httpx.Client(timeout=timeout, limits=limits) as client:
        post(client)  # warm-up: connection, lazy initialisation
        t0 = time.perf_counter()
        post(client)
        alone = time.perf_counter() - t0
        with ThreadPoolExecutor(concurrency) as pool:
            t0 = time.perf_counter()
            list(pool.map(lambda _: post(client), range(concurrency)))
            together = time.perf_counter() - t0
    speedup = concurrency * alone / together
    evidence = (
        f"probe: one request {alone:.2f} s, {concurrency} at once {together:.2f} s "
        f"({speedup:.1f}x the throughput of one at a time"
    )
    if speedup < SERIAL_BELOW:
        return "none", evidence + "): served one at a time"
    return "concurrent", evidence + "): overlaps requests (static or continuous batching not told apart)"
