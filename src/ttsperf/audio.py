"""WAV and raw PCM in and out, with the standard library only (shared by model, server and bench).

Samples are float32 in [-1, 1] in memory and 16-bit little-endian PCM on the wire, mono.
"""

from __future__ import annotations

import io
import struct
import wave
from pathlib import Path

import numpy as np

SAMPLE_RATE = 24_000
UNKNOWN_LENGTH = 0xFFFFFFFF  # a streamed WAV's sizes: the usual convention for "until the end"


def wav_header(sample_rate: int, data_bytes: int | None = None) -> bytes:
    """A 44-byte header of mono 16-bit PCM; `data_bytes` None: unknown (streamed) length."""
    data = UNKNOWN_LENGTH if data_bytes is None else data_bytes
    riff = UNKNOWN_LENGTH if data_bytes is None else 36 + data_bytes
    return (
        b"RIFF" + struct.pack("<I", riff) + b"WAVE"
        + b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, 2 * sample_rate, 2, 16)
        + b"data" + struct.pack("<I", data)
    )  # fmt: skip


def to_pcm16(samples: np.ndarray) -> bytes:
    """float samples -> 16-bit little-endian PCM bytes (values outside [-1, 1] are clipped)."""
    clipped = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


def from_pcm16(data: bytes) -> np.ndarray:
    """16-bit little-endian PCM bytes -> float32 samples in [-1, 1]."""
    usable = len(data) - len(data) % 2  # a trailing odd byte is half a sample: drop it
    # A view, not a copy, and one conversion: bench checks every response with this.
    pcm = np.frombuffer(memoryview(data)[:usable], dtype="<i2")
    return np.multiply(pcm, np.float32(1 / 32767.0), dtype=np.float32)


def encode_wav(samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> bytes:
    """A complete mono 16-bit WAV file in memory."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(to_pcm16(samples))
    return buf.getvalue()


def decode_wav(data: bytes) -> tuple[np.ndarray, int]:
    """WAV bytes -> (float32 mono samples, sample rate). Raises wave.Error / EOFError if malformed."""
    with wave.open(io.BytesIO(data), "rb") as w:
        if w.getsampwidth() != 2:
            raise wave.Error(f"expected 16-bit PCM, found {8 * w.getsampwidth()}-bit")
        frames = w.readframes(w.getnframes())
        channels, rate = w.getnchannels(), w.getframerate()
    samples = from_pcm16(frames)
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return samples, rate


def write_wav(path: str | Path, samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_wav(samples, sample_rate))
    return path
