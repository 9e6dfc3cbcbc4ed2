"""Ogg (Vorbis and Opus) and FLAC bodies: real files encoded in the test by libsndfile (soundfile),
checked like WAV, and served end to end by the mock's OpenAI endpoint in every response_format."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile

from ttsperf.bench import audio_checks
from ttsperf.bench.api import BenchSettings, run_bench

FORMATS = {  # kind -> (soundfile format, subtype, sample rate it is written at)
    "flac": ("FLAC", "PCM_16", 24_000),
    "ogg-vorbis": ("OGG", "VORBIS", 24_000),
    "ogg-opus": ("OGG", "OPUS", 48_000),  # Opus's own rate
}


def tone(seconds: float, rate: int, level: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (level * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def encoded(name: str, samples: np.ndarray | None = None, seconds: float = 2.0, channels: int = 1) -> bytes:
    fmt, subtype, rate = FORMATS[name]
    x = tone(seconds, rate) if samples is None else samples
    if channels > 1:
        x = np.stack([x] * channels, axis=1)
    buf = io.BytesIO()
    soundfile.write(buf, x, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def kind_of(name: str) -> str:
    return name.split("-")[0]


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("channels", [1, 2])
def test_good_audio_is_accepted_with_its_true_duration(name, channels):
    body = encoded(name, channels=channels)
    v = audio_checks.check_body(kind_of(name), body, 2.0, 24_000)
    assert v.seconds == pytest.approx(2.0, abs=0.03)
    assert v.rms == pytest.approx(0.3 / np.sqrt(2), rel=0.1)  # lossy codecs keep the level


@pytest.mark.parametrize("name", list(FORMATS))
def test_silent_clipped_and_short_audio_are_bad(name):
    rate = FORMATS[name][2]
    with pytest.raises(audio_checks.BadAudio, match="silent"):
        audio_checks.check_body(kind_of(name), encoded(name, np.zeros(2 * rate, np.float32)), 2.0, 24_000)
    with pytest.raises(audio_checks.BadAudio, match="clipped"):
        loud = np.clip(tone(2.0, rate, level=4.0), -1, 1)
        audio_checks.check_body(kind_of(name), encoded(name, loud), 2.0, 24_000)
    with pytest.raises(audio_checks.BadAudio, match="implausible"):
        audio_checks.check_body(kind_of(name), encoded(name, seconds=0.2), 8.0, 24_000)


@pytest.mark.parametrize("name", list(FORMATS))
def test_garbage_and_cut_files_are_bad_audio_not_crashes(name):
    body = encoded(name)
    magic = b"OggS" if "ogg" in name else b"fLaC"
    with pytest.raises(audio_checks.BadAudio):
        audio_checks.check_body(kind_of(name), magic + bytes(300), 2.0, 24_000)
    # Cut to its first quarter: either undecodable or too short for the text, never accepted as 2 s.
    with pytest.raises(audio_checks.BadAudio):
        audio_checks.check_body(kind_of(name), body[: len(body) // 4], 8.0, 24_000)


def test_opus_is_told_apart_from_vorbis():
    assert audio_checks.is_ogg_opus(encoded("ogg-opus"))
    assert not audio_checks.is_ogg_opus(encoded("ogg-vorbis"))


@pytest.mark.parametrize("fmt", ["flac", "opus", "mp3"])
@pytest.mark.parametrize("stream", [False, True])
def test_openai_adapter_checks_every_compressed_format_end_to_end(server_factory, fmt, stream):
    srv = server_factory(slots=0, service_time=0.02)
    run = run_bench(BenchSettings(urls=[srv.url], adapter="openai", format=fmt, stream=stream,
                                concurrency=[2], requests=6, gpu=False))  # fmt: skip
    p = run.points[0]
    assert p.successes == 6, p.error_examples
    assert all(abs(r.audio_s - r.expected_audio_s) < 0.1 for r in run.records)
    assert p.ttfa_s.n == 6 and p.ttfa_s.max <= p.latency_s.max


@pytest.mark.parametrize("fmt", ["flac", "opus"])
def test_compressed_faults_are_counted(server_factory, tmp_path, fmt):
    srv = server_factory(slots=0, service_time=0.01)
    f = tmp_path / "t.txt"
    f.write_text(
        "您的订单已经发货了。[fault:silent]\n您的订单已经发货了。[fault:truncated]\n", encoding="utf-8"
    )
    run = run_bench(BenchSettings(urls=[srv.url], adapter="openai", format=fmt, texts=str(f),
                                concurrency=[1], requests=2, gpu=False))  # fmt: skip
    assert run.points[0].errors == {"bad_audio": 1, "truncated": 1}
