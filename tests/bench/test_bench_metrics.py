"""bench/metrics.py: the summary of one load point from its request records."""

from __future__ import annotations

import numpy as np
import pytest

from ttsperf.bench import metrics

from .records import rec


def test_every_percentile_has_its_interval_and_an_end_n_cannot_give_is_none():
    d = metrics.dist(np.arange(1, 151, dtype=float))
    assert d.n == 150 and d.max == 150
    assert d.p90 == pytest.approx(np.percentile(np.arange(1, 151), 90))
    assert d.p50_ci == [63.0, 88.0]  # ranks 75 -/+ 1.96 sqrt(150 / 4), outwards: x_(63), x_(88)
    # p99's 97.5% upper end needs 0.99^n <= 0.025 (n >= 368); its lower end exists
    assert d.p99 is not None and d.p99_ci[0] is not None and d.p99_ci[1] is None
    assert metrics.dist([]).p99 is None and metrics.dist([]).p99_ci is None


def test_throughput_uses_the_window_not_the_sum_of_latencies():
    from ttsperf.bench.results import Strategy

    # 4 requests fully overlapped, each 1 s long, inside a 1 s window: 4 req/s, not 1 req/s.
    recs = [rec(i, 0.0, 1.0) for i in range(4)] + [rec(9, 0.0, 0.1, warmup=True)]
    p = metrics.summarize(Strategy(kind="concurrent", concurrency=4), recs)
    assert p.window_s == 1.0 and p.throughput_rps == 4.0 and p.naive_throughput_rps == 1.0
    assert p.audio_seconds_per_s == 4.0 and p.system_rtf == 0.25
    assert p.max_in_flight == 4 and p.requests == 4 and p.warmup == 1


def test_errors_count_in_window_and_rate_but_not_latency():
    from ttsperf.bench.results import Strategy

    recs = [rec(0, 0.0, 1.0), rec(1, 0.5, 3.0, error="bad_audio")]
    p = metrics.summarize(Strategy(kind="concurrent", concurrency=2), recs)
    assert p.latency_s.n == 1 and p.errors == {"bad_audio": 1} and p.error_rate == 0.5
    assert p.window_s == 3.0


def test_underrun_of_a_player_starting_at_first_audio():
    # 1 s of audio at t=1, next 1 s at t=1.5 (in time), last 1 s at t=3.3: needed at 1+2=3 -> 0.3 s late.
    r = rec(0, 0.0, 3.3, audio=3.0, chunks=[(1.0, 1.0), (1.5, 2.0), (3.3, 3.0)])
    assert metrics.underrun_s(r) == pytest.approx(0.3)
    smooth = rec(0, 0.0, 2.0, audio=3.0, chunks=[(1.0, 1.0), (1.9, 2.0), (2.0, 3.0)])
    assert metrics.underrun_s(smooth) == 0.0


def test_playback_ends_after_the_audio_and_every_stall():
    # 1 s at t=1, the 2nd s at t=1.5 (in time), the 3rd at t=3.3 (0.3 s late): plays to 4.3
    r = rec(0, 0.0, 3.3, audio=3.0, chunks=[(1.0, 1.0), (1.5, 2.0), (3.3, 3.0)])
    assert metrics.playback_end(r) == pytest.approx(4.3)
    smooth = rec(0, 0.0, 2.0, audio=3.0, chunks=[(1.0, 1.0), (1.9, 2.0), (2.0, 3.0)])
    assert metrics.playback_end(smooth) == pytest.approx(4.0)
    whole = rec(0, 0.0, 2.0, audio=1.5)  # not streamed: plays from its end
    assert metrics.playback_end(whole) == pytest.approx(3.5)
