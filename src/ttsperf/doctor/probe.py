"""Does a server batch? Asked of the server itself when its /healthz cannot say (opt-in: it sends
requests). The guide's `/invoke` API: one request alone, then N at once. A server that serves one
request at a time (the official ChatTTS examples) takes about N times as long for N; one that
batches or overlaps them takes about as long as for one.

This tells serial from concurrent. It does not tell a static batch (which waits for its longest
row) from continuous batching; that needs mixed lengths and is not probed.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from ttsperf.errors import UserError

PROBE_TEXT = "你好，这是一段用于压测的文本，长度八秒左右。"  # the guide's sentence
SERIAL_BELOW = 1.5  # speed-up of N at once over N one after another: under it, served one at a time


def probe_batching(url: str, concurrency: int = 4, timeout: float = 300.0) -> tuple[str, str]:
    """-> ("none" | "concurrent", evidence)."""
    base = url.rstrip("/")
    body = json.dumps({"text": PROBE_TEXT}).encode()

    def post() -> None:
        req = urllib.request.Request(f"{base}/invoke", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                resp.read()
                status = resp.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (OSError, ValueError) as exc:
            raise UserError(
                f"--url {url}: probe POST {base}/invoke failed ({type(exc).__name__}: {exc})"
            ) from None
        if status != 200:
            raise UserError(
                f"--url {url}: probe POST {base}/invoke answered HTTP {status}; "
                'expected 200 (the guide\'s API: {"text": ...} -> WAV)'
            )

    # One connection per request (urllib keeps none alive): a loopback connect costs well under a
    # millisecond, against the seconds of a synthesis being compared.
    post()  # warm-up: lazy initialisation on the server
    t0 = time.perf_counter()
    post()
    alone = time.perf_counter() - t0
    with ThreadPoolExecutor(concurrency) as pool:
        t0 = time.perf_counter()
        list(pool.map(lambda _: post(), range(concurrency)))
        together = time.perf_counter() - t0
    speedup = concurrency * alone / together
    evidence = (
        f"probe: one request {alone:.2f} s, {concurrency} at once {together:.2f} s "
        f"({speedup:.1f}x the throughput of one at a time"
    )
    if speedup < SERIAL_BELOW:
        return "none", evidence + "): served one at a time"
    return "concurrent", evidence + "): overlaps requests (static or continuous batching not told apart)"
