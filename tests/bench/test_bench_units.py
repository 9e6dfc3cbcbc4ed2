"""Pure parts of bench: arrivals, percentiles, SLO parsing, audio checks, search, workloads."""

from __future__ import annotations

import io
import math
import struct
import zipfile

import numpy as np
import pytest

from ttsperf.audio import encode_wav
from ttsperf.bench import arrivals, audio_checks, metrics, quantiles, slo
from ttsperf.bench.results import RequestRecord
from ttsperf.bench.search import find_max
from ttsperf.bench.texts import TEXT_SETS, expected_seconds, load_workload
from ttsperf.errors import UserError

# -- arrivals ---------------------------------------------------------------------------------


def test_constant_schedule_is_exactly_periodic():
    off = arrivals.schedule("constant", 4.0, seed=0, n=9)
    np.testing.assert_allclose(off, np.arange(9) * 0.25)


@pytest.mark.parametrize(
    ("kind", "shape", "cv"), [("poisson", 1.0, 1.0), ("gamma", 4.0, 0.5), ("gamma", 0.25, 2.0)]
)
def test_random_schedules_have_the_asked_rate_and_burstiness(kind, shape, cv):
    gaps = np.diff(arrivals.schedule(kind, 10.0, seed=1, n=200_001, shape=shape))
    assert gaps.mean() == pytest.approx(0.1, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)


def test_duration_schedule_stays_inside_the_duration():
    off = arrivals.schedule("poisson", 50.0, seed=3, duration=10.0)
    assert off[0] == 0.0 and off[-1] < 10.0
    assert len(off) == pytest.approx(500, rel=0.15)


@pytest.mark.parametrize("spec", ["uniform", "gamma:0", "gamma:x", "poisson:2"])
def test_bad_arrival_specs(spec):
    with pytest.raises(UserError, match="--arrival"):
        arrivals.parse_arrival(spec)


# -- metrics ----------------------------------------------------------------------------------


def test_every_percentile_has_its_interval_and_an_end_n_cannot_give_is_none():
    d = metrics.dist(np.arange(1, 151, dtype=float))
    assert d.n == 150 and d.max == 150
    assert d.p90 == pytest.approx(np.percentile(np.arange(1, 151), 90))
    assert d.p50_ci == [63.0, 88.0]  # ranks 75 -/+ 1.96 sqrt(150 / 4), outwards: x_(63), x_(88)
    # p99's 97.5% upper end needs 0.99^n <= 0.025 (n >= 368); its lower end exists
    assert d.p99 is not None and d.p99_ci[0] is not None and d.p99_ci[1] is None
    assert metrics.dist([]).p99 is None and metrics.dist([]).p99_ci is None


def test_order_statistic_ranks_match_the_binomial_tails():
    from math import comb

    def cdf(n, p, k):  # P(Binomial(n, p) <= k), exactly
        return sum(comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k + 1))

    for n, p in [(20, 0.5), (100, 0.9), (400, 0.99), (1000, 0.95)]:
        lo, up = quantiles.ranks(n, p)
        assert cdf(n, p, lo - 1) <= 0.025 < cdf(n, p, lo)  # the largest rank with tail <= 2.5%
        assert cdf(n, p, up - 2) < 0.975 <= cdf(n, p, up - 1)  # the smallest with coverage >= 97.5%
    assert quantiles.needed_n(0.99) == (1, 368) and quantiles.needed_n(0.5) == (6, 6)
    assert quantiles.ranks(367, 0.99)[1] is None and quantiles.ranks(368, 0.99)[1] == 368


def rec(i, send, end, sched=None, audio=1.0, chunks=(), warmup=False, error=None):
    return RequestRecord(
        i=i,
        point=0,
        warmup=warmup,
        url="u",
        chars=1,
        expected_audio_s=1,
        t_sched=send if sched is None else sched,
        t_send=send,
        t_end=end,
        audio_s=audio,
        error=error,
        chunk_t=[c[0] for c in chunks],
        chunk_audio_s=[c[1] for c in chunks],
        t_first_audio=chunks[0][0] if chunks else None,
    )


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


def test_interval_covers_the_true_percentile_at_its_confidence():
    """Any distribution: exponential samples of 400, p99 = ln(100); 95% intervals cover it >= 95%."""
    rng = np.random.default_rng(0)
    truth = -np.log(0.01)
    hits = [
        lo <= truth <= hi
        for lo, hi in (quantiles.interval(rng.exponential(1.0, 400), 0.99) for _ in range(400))
    ]
    assert 0.95 <= np.mean(hits) <= 0.995
    lo, hi = quantiles.interval(rng.exponential(1.0, 5000), 0.99)
    assert lo < truth < hi and hi - lo < 1.5


# -- SLO --------------------------------------------------------------------------------------


def test_slo_parsing_units_and_directions():
    b = {
        x.name: x
        for x in slo.parse_slo("ttfa_p99=300ms,latency_p99=5s,rtf_p95=1,error_rate=1%,gpu_util_mean=85%")
    }
    assert b["ttfa_p99"].value == pytest.approx(0.3) and b["ttfa_p99"].op == "<="
    assert b["e2e_p99"].value == 5.0 and b["rtf_p95"].value == 1.0
    assert b["error_rate"].value == pytest.approx(0.01)
    assert b["gpu_util_mean"].value == pytest.approx(0.85) and b["gpu_util_mean"].op == ">="
    assert slo.parse_slo("throughput_rps>=3")[0].op == ">="


@pytest.mark.parametrize("spec", ["ttfa_p99", "ttfa_p99=300", "e2e_p99=5 parsecs", "error_rate=5", "foo=1"])
def test_slo_bad_specs(spec):
    with pytest.raises(UserError, match="--slo"):
        slo.parse_slo(spec)


def test_slo_verdict_margin_and_goodput_check():
    from ttsperf.bench.results import Strategy

    recs = [rec(i, 0.0, 0.1 + 0.01 * (i % 10)) for i in range(40)]
    bounds = slo.parse_slo("e2e_p50=120ms,e2e_mean=100ms")
    p = metrics.summarize(Strategy(kind="concurrent", concurrency=1), recs, slo.meets_request_bounds(bounds))
    v = slo.evaluate(bounds, p, recs)
    p50, mean = v.constraints
    assert (
        p50.status == "fail"
        and p50.value == pytest.approx(0.145)
        and p50.margin == pytest.approx(0.12 - 0.145)
    )
    assert p50.ci[0] > 0.12 and p50.ci[0] <= 0.145 <= p50.ci[1] and p50.n == 40  # even the low end is over
    assert mean.status == "fail" and mean.margin == pytest.approx(0.1 - 0.145)
    assert "e2e_mean = 145.0 ms, limit <= 100.0 ms, over by 45.0 ms (45%), n=40" in v.failures
    assert "CI [" in slo.describe(p50) and v.status == "fail"
    # goodput: requests whose own e2e is within both bounds (<= 100 ms): only the 0.10 s ones
    assert p.goodput_rps == pytest.approx(4 / p.window_s)


def test_a_percentile_verdict_is_inconclusive_until_its_interval_clears_the_limit():
    from ttsperf.bench.results import Strategy

    def judge(spec, recs):
        p = metrics.summarize(Strategy(kind="concurrent", concurrency=1), recs)
        return slo.evaluate(slo.parse_slo(spec), p, recs)

    few = [rec(i, 0.0, 0.1 + 0.001 * i) for i in range(100)]  # e2e 100..199 ms, all far under 1 s
    v = judge("e2e_p99=1s", few)
    (c,) = v.constraints
    assert v.status == "inconclusive" and c.ci[0] is not None and c.ci[1] is None
    assert "its high end needs n >= 368" in c.note and 368 <= c.settle_n <= 400
    assert "requests would settle it (pass" in v.undecided[0]
    assert judge("e2e_p99=1s", [rec(i, 0.0, 0.1 + 0.0002 * i) for i in range(400)]).status == "pass"
    # the median's interval (~140..160 ms) straddles 150 ms: more requests, not a coin toss, decide
    (mid,) = judge("e2e_p50=150ms", few).constraints
    assert mid.status == "inconclusive" and mid.ci[0] < 0.15 < mid.ci[1]
    assert "straddles the limit" in mid.note
    assert judge("e2e_p50=130ms", few).status == "fail" and judge("e2e_p50=170ms", few).status == "pass"


def test_requests_to_decide_asks_for_what_settles_an_undecided_percentile_and_no_more():
    from ttsperf.bench.results import Strategy

    def verdict(spec, recs):
        p = metrics.summarize(Strategy(kind="concurrent", concurrency=1), recs)
        return slo.evaluate(slo.parse_slo(spec), p, recs)

    few = [rec(i, 0.0, 0.1 + 0.001 * i) for i in range(100)]
    v = verdict("e2e_p99=1s", few)
    (c,) = v.constraints
    more = slo.requests_to_decide(v, 100, cap=2000)
    assert more == math.ceil(c.settle_n * slo.SETTLE_MARGIN) - 100 and 268 <= more <= 340
    assert slo.requests_to_decide(v, 100, cap=250) == 150  # never past the cap
    decided = verdict("e2e_p99=2s", [rec(i, 0.0, 0.1) for i in range(400)])
    assert slo.requests_to_decide(decided, 400, 2000) == 0
    # a limit no number of requests decides (nothing measures GPU use here): send nothing more
    assert slo.requests_to_decide(verdict("e2e_p99=1s,gpu_util_mean=50%", few), 100, 2000) == 0


def test_a_point_where_nothing_succeeded_fails_every_limit():
    from ttsperf.bench.results import Strategy

    dead = [rec(i, 0.0, 0.001, error="connect") for i in range(5)]
    p = metrics.summarize(Strategy(kind="concurrent", concurrency=1), dead)
    v = slo.evaluate(slo.parse_slo("e2e_p99=5s,ttfa_p50=1s"), p, dead)
    assert v.status == "fail" and [c.status for c in v.constraints] == ["fail", "fail"]
    assert v.failures[0] == "e2e_p99: no request succeeded (5 sent)"


# -- audio checks -----------------------------------------------------------------------------


def tone(seconds, level=0.3, rate=24_000):
    t = np.arange(int(seconds * rate)) / rate
    return level * np.sin(2 * np.pi * 220 * t)


def test_good_wav_passes_and_reports_duration():
    v = audio_checks.check_body("wav", encode_wav(tone(2.0)), expected_s=2.0, pcm_rate=24_000)
    assert v.seconds == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (encode_wav(np.zeros(48_000)), "silent"),
        (encode_wav(tone(2.0, level=3.0)), "clipped"),
        (encode_wav(tone(0.2)), "implausible"),
        (encode_wav(tone(20.0)), "implausible"),
        (encode_wav(np.zeros(0)), "empty"),
        (encode_wav(tone(2.0))[:30_000], "truncated"),
        (b"<html>oops</html>", "not a WAV"),
        (b"", "empty body"),
    ],
)
def test_bad_wav_bodies(body, why):
    with pytest.raises(audio_checks.BadAudio, match=why):
        audio_checks.check_body("wav", body, expected_s=2.0, pcm_rate=24_000)


def test_streamed_wav_with_unknown_length_is_accepted():
    good = encode_wav(tone(2.0))
    streamed = good[:4] + b"\xff\xff\xff\xff" + good[8:40] + b"\xff\xff\xff\xff" + good[44:]
    assert audio_checks.check_body("wav", streamed, 2.0, 24_000).seconds == pytest.approx(2.0)


def mp3_frames(n: int) -> bytes:
    # MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, no padding: 417-byte frames of 1152 samples.
    header = bytes([0xFF, 0xFB, 0x90, 0x00])
    return (header + bytes(413)) * n


def real_mp3(samples: np.ndarray, rate: int = 24_000) -> bytes:
    from ttsperf.audio import to_pcm16
    from ttsperf.bench.mock_server import mp3_of

    return mp3_of(to_pcm16(samples), rate)


def zipped(*parts: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i, p in enumerate(parts):
            zf.writestr(f"{i}.mp3", p)
    return buf.getvalue()


def test_mp3_and_zip_of_mp3_are_decoded_and_checked_like_wav():
    good = real_mp3(tone(2.0))
    assert audio_checks.check_body("mp3", good, 2.0, 24_000).seconds == pytest.approx(2.0, abs=0.1)
    assert audio_checks.check_body("zip-mp3", zipped(good, good), 4.0, 24_000).seconds == pytest.approx(
        4.0, abs=0.2
    )
    with pytest.raises(audio_checks.BadAudio, match="silent"):
        audio_checks.check_body("zip-mp3", zipped(real_mp3(np.zeros(48_000))), 2.0, 24_000)
    with pytest.raises(audio_checks.BadAudio, match="silent"):
        audio_checks.check_body("mp3", mp3_frames(100), 2.6, 24_000)  # valid frames, no sound in them
    with pytest.raises(audio_checks.BadAudio):
        audio_checks.check_body("mp3", b"ID3 but not really an mp3 at all" * 10, 2.0, 24_000)
    with pytest.raises(audio_checks.BadAudio, match="zip"):
        audio_checks.check_body("zip-mp3", b"PK-not-really", 2.6, 24_000)


def wav_of(x: np.ndarray, tag: int, width: int, rate: int = 24_000, channels: int = 1) -> bytes:
    if tag == 3:
        data = x.astype("<f4" if width == 4 else "<f8").tobytes()
    elif width == 1:
        data = np.round(x * 127 + 128).astype(np.uint8).tobytes()
    elif width == 3:
        v = np.round(x * (2**23 - 1)).astype("<i4").view(np.uint8).reshape(-1, 4)[:, :3]
        data = v.tobytes()
    else:
        data = np.round(x * (2 ** (8 * width - 1) - 1)).astype(f"<i{width}").tobytes()
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * width * channels, width * channels, 8 * width)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + (b"data" + struct.pack("<I", len(data)) + data)
    )


@pytest.mark.parametrize(("tag", "width"), [(1, 1), (1, 2), (1, 3), (1, 4), (3, 4), (3, 8)])
def test_wav_of_every_common_sample_format_decodes_to_the_same_signal(tag, width):
    x = tone(1.0)
    samples, rate = audio_checks.wav_samples(wav_of(x, tag, width))
    assert rate == 24_000 and len(samples) == len(x)
    assert np.max(np.abs(samples - x)) < (0.01 if width == 1 else 1e-4)


def test_stereo_wav_is_mixed_to_mono_and_odd_formats_are_rejected():
    x = tone(1.0)
    stereo = np.stack([x, x], axis=1).ravel()
    samples, _ = audio_checks.wav_samples(wav_of(stereo, 1, 2, channels=2))
    assert len(samples) == len(x)
    with pytest.raises(audio_checks.BadAudio, match="format tag 85"):  # MP3-in-WAV
        audio_checks.parse_wav_header(wav_of(x, 85, 2))


# -- find-max ---------------------------------------------------------------------------------


@pytest.mark.parametrize("true_max", [1, 5, 13, 64])
def test_find_max_concurrency_finds_the_edge(true_max):
    r = find_max(lambda c: c <= true_max, start=1, integer=True, limit=1024)
    assert r.best == true_max
    assert true_max < r.first_fail <= true_max + max(1, int(0.05 * r.first_fail))


def test_find_max_rate_within_tolerance_and_when_nothing_passes():
    r = find_max(lambda x: x <= 7.3, start=1.0, integer=False, limit=1000)
    assert r.best <= 7.3 and (r.first_fail - r.best) / r.first_fail <= 0.05
    none = find_max(lambda c: False, start=4, integer=True, limit=64)
    assert none.best is None and none.first_fail == 1


# -- workloads --------------------------------------------------------------------------------


def test_workloads_default_builtin_and_files(tmp_path):
    assert load_workload().items[0].text.startswith("你好，这是一段用于压测的文本")
    assert all(len(TEXT_SETS[k]) >= 3 for k in ("zh-short", "zh-long", "en-short", "en-long"))
    j = tmp_path / "t.jsonl"
    j.write_text('{"text": "Hello there.", "voice": "b"}\n\n{"text": "你好"}\n', encoding="utf-8")
    w = load_workload(str(j))
    assert [i.text for i in w.items] == ["Hello there.", "你好"] and w.items[0].extra == {"voice": "b"}
    assert w.describe()["texts"] == 2
    with pytest.raises(UserError, match="unknown set"):
        load_workload(text_set="klingon")
    empty = tmp_path / "e.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(UserError, match="no texts"):
        load_workload(str(empty))


def test_expected_seconds_grows_with_text_at_the_sourced_speech_rates():
    assert expected_seconds("你好，世界。") == pytest.approx(4 / 5.18)  # 4 characters, 5.18 per s
    assert expected_seconds("one two three four five") == pytest.approx(5 / (183 / 60))  # 183 wpm


def test_reading_a_run_json_of_another_schema_is_a_user_error(tmp_path):
    from ttsperf.bench.results import BenchRun

    f = tmp_path / "run.json"
    f.write_text('{"schema": "ttsperf.benchrun/0"}', encoding="utf-8")
    with pytest.raises(UserError, match="expected 'ttsperf.benchrun/1'"):
        BenchRun.read(f)
    with pytest.raises(UserError, match="not a readable run.json"):
        BenchRun.read(tmp_path / "missing.json")


def test_an_interval_always_holds_the_samples_own_percentile():
    # n = 2: the p99's valid low end is the larger sample, above the interpolated p99 itself
    lo, hi = quantiles.interval([2.0, 4.0], 0.99)
    assert hi is None and lo is not None and lo <= quantiles.percentile([2.0, 4.0], 0.99) < 4.0
    rng = np.random.default_rng(3)
    for n in (2, 3, 5, 20, 400):
        v = rng.exponential(1.0, n)
        for p in (0.5, 0.9, 0.99):
            lo, hi = quantiles.interval(v, p)
            est = quantiles.percentile(v, p)
            assert (lo is None or lo <= est) and (hi is None or est <= hi)
