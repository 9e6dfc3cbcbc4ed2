"""Closed and open loop against a real server of known behaviour: theory says what bench must find."""

from __future__ import annotations

import numpy as np
import pytest

from ttsperf.bench.api import BenchSettings, run_bench


def bench(url: str, **kw) -> object:
    kw.setdefault("gpu", False)
    return run_bench(BenchSettings(urls=[url], **kw))


@pytest.mark.slow
def test_closed_loop_matches_queueing_theory_and_the_guide_formula_is_off_by_the_concurrency(server_factory):
    # K=2 slots, S=0.2 s, C=4 in flight: the server is never idle, so throughput = K/S = 10 req/s and,
    # by Little's law, mean latency = C / throughput = 0.4 s.
    K, S, C, n = 2, 0.2, 4, 40
    srv = server_factory(slots=K, service_time=S)
    p = bench(srv.url, concurrency=[C], requests=n).points[0]
    assert p.successes == n
    assert p.throughput_rps == pytest.approx(min(C, K) / S, rel=0.05)
    assert p.latency_s.mean == pytest.approx(C / K * S, rel=0.05)
    # and what the server itself saw: n requests between its first arrival and last completion
    server = srv.stats()
    assert server["served"] == n
    assert p.throughput_rps == pytest.approx(n / server["busy_s"], rel=0.02)
    # The guide's n / sum(latencies) is 1 / mean latency: it understates throughput by about C.
    assert p.naive_throughput_rps == pytest.approx(1 / p.latency_s.mean, rel=1e-9)
    assert p.throughput_rps / p.naive_throughput_rps == pytest.approx(C, rel=0.1)


@pytest.mark.slow
def test_single_worker_server_proves_the_concurrency_is_applied(server_factory):
    # One slot (like the official ChatTTS examples): C requests in flight queue at the server, so a
    # request waits for the C-1 before it. If bench did not apply C, latency would stay at S.
    S = 0.05
    srv = server_factory(slots=1, service_time=S)
    one = bench(srv.url, concurrency=[1], requests=30).points[0]
    assert srv.stats()["max_in_flight"] == 1 and one.latency_s.p50 >= S
    srv.reset()
    three = bench(srv.url, concurrency=[3], requests=60).points[0]
    stats = srv.stats()
    assert stats["max_in_flight"] == 3
    # The slot never idles at C=3: throughput is the server's own rate, at most 1/S, and by Little's
    # law each request spends C / throughput in the system, about 3 S.
    assert three.throughput_rps == pytest.approx(stats["served"] / stats["busy_s"], rel=0.05)
    assert 0.8 / S <= three.throughput_rps <= 1.01 / S
    assert three.latency_s.mean == pytest.approx(3 / three.throughput_rps, rel=0.1)
    assert three.latency_s.mean > 2.4 * S


def test_in_flight_never_exceeds_the_concurrency(server_factory):
    srv = server_factory(slots=0, service_time=0.02)
    for c in (1, 3, 7):
        srv.reset()
        p = bench(srv.url, concurrency=[c], requests=40).points[0]
        assert p.max_in_flight == c  # from the client's own records
        assert srv.stats()["max_in_flight"] == c  # as the server saw it


def test_sweep_runs_each_point_and_warmup_is_excluded(server_factory):
    srv = server_factory(slots=0, service_time=0.01)
    run = bench(srv.url, concurrency=[1, 2], requests=10, warmup=3)
    assert [p.label for p in run.points] == ["concurrent@1", "concurrent@2"]
    assert all(p.requests == 10 and p.warmup == 3 for p in run.points)
    assert srv.stats()["served"] == 26  # warm-up requests really went out
    warm = [r for r in run.records if r.warmup]
    assert len(warm) == 6
    # the measured window starts after the last warm-up request finished
    for i in (0, 1):
        last_warm_end = max(r.t_end for r in warm if r.point == i)
        first_measured = min(r.t_send for r in run.records if r.point == i and not r.warmup)
        assert first_measured >= last_warm_end


def test_duration_mode_stops_sending_after_the_duration(server_factory):
    srv = server_factory(slots=0, service_time=0.02)
    run = bench(srv.url, concurrency=[2], duration=0.5)
    p = run.points[0]
    sends = [r.t_send for r in run.records]
    assert max(sends) - min(sends) <= 0.5
    assert p.requests >= 10


@pytest.mark.slow
def test_open_loop_achieves_the_rate_over_2000_requests_and_reports_send_lag(server_factory):
    srv = server_factory(slots=0, service_time=0.0, sample_rate=8000)
    rate = 200.0  # modest, so a machine shared with other work still leaves the client its CPU
    run = bench(srv.url, rate=[rate], arrival="constant", requests=2000, texts=None, text_set="zh-short")
    p = run.points[0]
    assert p.successes == 2000, p.errors
    assert p.achieved_send_rate == pytest.approx(rate, rel=0.05)
    lag = np.array([r.t_send - r.t_sched for r in run.records])
    assert (lag >= 0).all()  # never sent before its time
    assert p.queue_s.n == 2000 and p.queue_s.p99 is not None  # send lag reported with n


@pytest.mark.slow
def test_open_loop_poisson_sends_at_the_precomputed_times(server_factory):
    from ttsperf.bench.arrivals import schedule

    srv = server_factory(slots=0, service_time=0.0, sample_rate=8000)
    run = bench(srv.url, rate=[50.0], arrival="poisson", requests=100, seed=7, text_set="zh-short")
    sched = np.array([r.t_sched for r in sorted(run.records, key=lambda r: r.i)])
    offsets = schedule("poisson", 50.0, 7, n=100)
    np.testing.assert_allclose(sched - sched[0], offsets, atol=1e-9)
    sends = np.array([r.t_send for r in sorted(run.records, key=lambda r: r.i)])
    assert (sends >= sched).all() and (np.diff(sends) >= 0).all()  # never early, in schedule order
    assert run.points[0].queue_s.n == 100  # how late each went out is reported, with n


@pytest.mark.slow
def test_stalling_server_shows_in_latency_from_intended_send(server_factory, tmp_path):
    # Open loop capped at 1 in flight: one stalled request holds back those scheduled after it. Their
    # e2e stays short, but latency from the intended send time shows the wait (coordinated omission).
    srv = server_factory(slots=0, service_time=0.01)
    texts = tmp_path / "t.txt"
    lines = ["好的，马上为您查询。"] * 40
    lines[5] = "好的，马上为您查询。[fault:stall=0.6]"
    texts.write_text("\n".join(lines), encoding="utf-8")
    p = bench(
        srv.url, rate=[20.0], arrival="constant", max_concurrency=1, requests=40, texts=str(texts)
    ).points[0]
    assert p.successes == 40
    assert p.latency_s.max >= 0.6
    later = p.latency_from_intended_s
    assert later.max > 0.6 and later.mean > 2 * p.latency_s.mean - 0.6 / 40
    assert p.queue_s.max > 0.4  # the requests behind it waited in the client


@pytest.mark.slow
def test_streaming_ttfa_and_gaps_are_measured_chunk_by_chunk(server_factory):
    S, chunks = 0.16, 8
    srv = server_factory(slots=0, service_time=S, stream_chunks=chunks)
    for fmt in ("wav", "pcm"):
        run = bench(srv.url, adapter="openai", stream=True, format=fmt, concurrency=[2], requests=20)
        p = run.points[0]
        assert p.successes == 20, p.errors
        # The first of 8 pieces arrives after ~S/8, the last after ~S: TTFA is the first audio chunk,
        # not the whole body. (Bounds, not equalities: a busy machine stretches both.)
        assert p.latency_s.p50 >= S and p.ttfa_s.p50 >= 0.9 * S / chunks
        assert p.ttfa_s.p50 < p.latency_s.p50 / 3
        # Each server write is one chunk unless a busy machine lets TCP merge two into one read.
        assert p.gap_s.n >= 20 * (chunks - 1) // 2
        assert p.gap_s.p50 >= 0.9 * S / chunks and p.gap_s.p50 < p.latency_s.p50 / 3
        assert p.underrun["worst_s"] is not None and p.underrun["over_0.1s"] == 0


def test_server_headers_give_decode_steps_per_second(server_factory):
    srv = server_factory(slots=0, service_time=0.01)
    run = bench(srv.url, concurrency=[2], requests=10)
    p = run.points[0]
    assert all(r.decode_steps and r.server_audio_s for r in run.records)
    assert p.decode_steps_per_s == pytest.approx(sum(r.decode_steps for r in run.records) / p.window_s)
    # the client's own audio measurement agrees with what the server says it sent
    assert all(abs(r.audio_s - r.server_audio_s) < 1e-3 for r in run.records)
    # at ChatTTS's rate (ttsperf.facts): one decode step per 512 samples of audio
    assert all(r.decode_steps == pytest.approx(r.audio_s * 46.875, abs=0.06) for r in run.records)


def test_several_urls_share_the_load_round_robin(server_factory):
    a = server_factory(slots=0, service_time=0.01)
    b = server_factory(slots=0, service_time=0.011)
    run = run_bench(BenchSettings(urls=[a.url, b.url], concurrency=[2], requests=20, gpu=False))
    assert run.points[0].successes == 20
    assert a.stats()["served"] == 10 and b.stats()["served"] == 10


def test_forge_adapter_against_a_get_api(server_factory):
    srv = server_factory(slots=0, service_time=0.01)
    p = bench(srv.url, adapter="forge", concurrency=[1], requests=5).points[0]
    assert p.successes == 5


def test_chattts_api_adapter_reads_a_zip_of_mp3s(server_factory):
    srv = server_factory(slots=0, service_time=0.01)
    run = bench(srv.url, adapter="chattts-api", concurrency=[2], requests=6)
    p = run.points[0]
    assert p.successes == 6, p.error_examples
    # MP3 decodes to whole frames of 1,152 samples (48 ms at 24 kHz) and the encoder pads: within two
    assert all(0 <= r.audio_s - r.expected_audio_s < 2 * 1152 / 24000 for r in run.records)


def test_open_loop_max_concurrency_caps_in_flight_and_the_wait_is_queue_time(server_factory):
    srv = server_factory(slots=0, service_time=0.05)
    # 100 req/s offered, 2 in flight x 50 ms serves at most 40 req/s: the rest waits in the client.
    p = bench(srv.url, rate=[100.0], arrival="constant", max_concurrency=2, requests=40).points[0]
    assert srv.stats()["max_in_flight"] == 2 and p.max_in_flight == 2
    assert p.successes == 40
    assert p.queue_s.max > 0.3  # the last requests waited for a free slot in the client
    assert p.latency_from_intended_s.mean > p.latency_s.mean + 0.1


def test_open_loop_duration_mode(server_factory):
    srv = server_factory(slots=0, service_time=0.0, sample_rate=8000)
    run = bench(srv.url, rate=[40.0], arrival="poisson", duration=1.0, warmup=4, text_set="zh-short")
    p = run.points[0]
    assert p.warmup == 4 and 20 <= p.requests <= 65  # ~40 arrivals in 1 s of a Poisson process
    measured = [r.t_sched for r in run.records if not r.warmup]
    assert max(measured) - min(measured) < 1.0 + 4 / 40.0


def test_template_adapter_posts_any_json_and_reads_pcm(server_factory):
    srv = server_factory(slots=0, service_time=0.01)
    run = bench(
        srv.url + "/v1/audio/speech",
        adapter="template",
        concurrency=[1],
        requests=4,
        text_set="en-short",
        template_body='{"input": "{text}", "response_format": "pcm"}',
        template_kind="pcm",
    )
    p = run.points[0]
    assert p.successes == 4, p.error_examples
    assert all(abs(r.audio_s - r.server_audio_s) < 1e-3 for r in run.records)


def test_a_listener_sends_its_next_request_when_the_reply_has_played_and_it_has_thought(server_factory):
    """One listener against a real server: every request leaves after the previous reply's
    playback end plus the think time, never before."""
    from ttsperf.bench.metrics import playback_end

    srv = server_factory(slots=1, service_time=0.02)
    think = 0.15
    p = bench(srv.url, concurrency=[1], think_time=think, requests=4)
    assert p.points[0].successes == 4
    records = sorted((r for r in p.records if not r.warmup), key=lambda r: r.t_send)
    for before, after in zip(records, records[1:], strict=False):
        assert after.t_send >= playback_end(before) + think - 1e-3
        assert after.t_send - (playback_end(before) + think) < 0.1  # and not much later


def test_a_user_is_a_listener_who_asks_again_when_the_reply_has_played(server_factory):
    """--users 1 against a real server: each request leaves once the previous reply has played
    (think 0 s), not the moment it arrived as --concurrency 1 sends."""
    from ttsperf.bench.metrics import playback_end

    srv = server_factory(slots=1, service_time=0.02)
    p = bench(srv.url, users=[1], requests=4)
    assert p.points[0].successes == 4 and p.points[0].strategy.think_s == 0.0
    records = sorted((r for r in p.records if not r.warmup), key=lambda r: r.t_send)
    for before, after in zip(records, records[1:], strict=False):
        assert after.t_send >= playback_end(before) - 1e-3
        assert after.t_send - playback_end(before) < 0.1


def test_a_ramp_up_starts_the_senders_one_after_another_in_each_phase(server_factory):
    """--ramp-up 0.6 with 4 senders: the first request of sender k leaves at k x 0.15 s into each
    phase (the warm-up, then the measured one once the warm-up has drained); without it, all four
    leave together."""
    srv = server_factory(slots=0, service_time=0.5)  # every sender's first reply outlasts the ramp
    c, ramp = 4, 0.6
    run = bench(srv.url, concurrency=[c], ramp_up=ramp, warmup=c, requests=c)
    assert run.points[0].strategy.label == "concurrent@4,ramp0.6s"
    for warm in (True, False):
        sends = sorted(r.t_send for r in run.records if r.warmup is warm)
        offsets = np.array(sends) - sends[0]
        assert offsets == pytest.approx([k * ramp / c for k in range(c)], abs=0.04)
    at_once = bench(srv.url, concurrency=[c], requests=c)
    sends = sorted(r.t_send for r in at_once.records)
    assert sends[-1] - sends[0] < 0.04
