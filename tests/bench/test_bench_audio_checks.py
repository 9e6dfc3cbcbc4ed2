"""bench/audio_checks.py: every response's audio is parsed and checked."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np
import pytest

from ttsperf.audio import encode_wav
from ttsperf.bench import audio_checks


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
