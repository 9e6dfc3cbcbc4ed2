"""Overload: `ttsperf serve` offered twice what it can serve. The excess must be refused at once (503
+ Retry-After), every accepted request answered in full, within a latency the queue bound explains,
and the process must not grow while it happens."""

from __future__ import annotations

import numpy as np
import psutil
import pytest

from server.helpers import SHORT, ServeProcess, expected_samples, scrape

from .load import closed_loop, offer, wav_samples

MAX_BATCH, MAX_QUEUE = 4, 4
# RSS may move by allocator noise (glibc arenas, httptools-free h11 buffers, Python free lists):
# "flat" is within 5% of the RSS after warm-up between two equal halves of the overload.
RSS_TOLERANCE = 0.05


@pytest.mark.slow
def test_twice_the_capacity_is_refused_fast_and_nothing_accepted_is_lost():
    args = ("--synthetic", "--config", "tiny", "--max-batch", str(MAX_BATCH), "--max-queue", str(MAX_QUEUE))
    with ServeProcess(*args) as server, server.client() as c:
        body, check = {"text": SHORT}, wav_samples(expected_samples(SHORT))
        # capacity: every batch slot busy, no queue (closed loop of MAX_BATCH clients)
        cap = closed_loop(server.url, "/invoke", body, workers=MAX_BATCH, requests=6, check=check)
        assert cap.lost == 0 and cap.codes() == {200: MAX_BATCH * 6}
        capacity, service = cap.throughput(), float(np.percentile(cap.latencies(), 90))
        proc = psutil.Process(server.pid)
        rss, marks = [proc.memory_info().rss], [scrape(c)]
        halves = []
        for _ in range(2):  # two equal halves: RSS after the first is the baseline of "flat"
            halves.append(offer(server.url, "/invoke", body, rate=2 * capacity, seconds=4, check=check))
            rss.append(proc.memory_info().rss)
        marks.append(scrape(c))

    tally = type(halves[0])(halves[0].outcomes + halves[1].outcomes)
    codes, refusals = tally.codes(), tally.latencies(503)
    # The service time during the overload: the one measured before it, scaled by how much slower the
    # engine's decode steps ran then (its own /metrics). make test runs two test files at once on 2
    # cores, and the other one may take a core for part of the overload only: CI saw 0.73 s against
    # a bound of 0.65 s from services measured before and after it.
    slowdown = max(1.0, _mean_step(marks[0], marks[1]) / _mean_step({}, marks[0]))
    # A wait in the queue is at most MAX_QUEUE / MAX_BATCH services, 3x for a shared machine, plus the
    # slowest refusal of the same load: time both ends' event loops kept from any request. An
    # unbounded queue would fail by far more: at 2x capacity for 8 s its wait grows to ~4 s, and it
    # would refuse nobody.
    bound = 3 * (1 + MAX_QUEUE / MAX_BATCH) * service * slowdown + max(refusals, default=0.0)
    worst = max(tally.latencies())
    growth = (rss[2] - rss[1]) / rss[1]
    tally.figure(
        "overload 2x",
        capacity_rps=f"{capacity:.1f}",
        offered_rps=f"{2 * capacity:.1f}",
        accepted_p99_s=f"{np.percentile(tally.latencies(), 99):.2f}",
        accepted_max_s=f"{worst:.2f}",
        refused_p50_s=f"{np.percentile(refusals, 50):.3f}" if refusals else "-",
        refused_max_s=f"{max(refusals, default=0.0):.3f}",
        step_slowdown=f"{slowdown:.2f}x",
        bound_s=f"{bound:.2f}",
        rss_mib="/".join(f"{r / 2**20:.0f}" for r in rss),
        rss_growth=f"{100 * growth:+.1f}%",
    )
    assert set(codes) <= {200, 503}, codes
    assert codes[503] > 0, "twice the capacity should overflow a queue of 4"
    assert all(o.retry_after == "1" for o in tally.outcomes if o.status == 503)
    # refused fast: half the refusals take less than one service
    assert np.percentile(refusals, 50) < service, f"refusals took {np.percentile(refusals, 50):.2f} s"
    assert worst <= bound, f"an accepted request took {worst:.2f} s; the queue bound allows {bound:.2f} s"
    assert growth <= RSS_TOLERANCE, f"RSS grew {100 * growth:.1f}% between equal halves"
    # the server counted the same: one answer per request, none a 500 (/metrics was scraped twice)
    served = {
        k: v for k, v in marks[1].items() if k.startswith("ttsperf_http_requests_total{") and "/invoke" in k
    }
    assert served == {
        'ttsperf_http_requests_total{code="200",endpoint="/invoke"}': codes[200] + cap.sent,
        'ttsperf_http_requests_total{code="503",endpoint="/invoke"}': codes[503],
    }


def _mean_step(before: dict[str, float], after: dict[str, float]) -> float:
    """Mean seconds of a decode step between two scrapes of /metrics."""
    seconds, count = ("ttsperf_step_seconds_sum", "ttsperf_step_seconds_count")
    return (after[seconds] - before.get(seconds, 0.0)) / (after[count] - before.get(count, 0.0))
