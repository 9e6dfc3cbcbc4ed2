"""Is the response audio that a person could listen to? Checked on every response.

A server that answers fast with silence, a truncated file or an error page is not fast, it is
broken: such a response becomes a `bad_audio` error and never enters the latency statistics.
"""

from __future__ import annotations

import io
import struct
import zipfile
from dataclasses import dataclass

import numpy as np

from ttsperf.audio import from_pcm16

# Below -60 dBFS RMS nobody hears speech; real TTS output sits around -30..-15 dBFS.
SILENT_RMS = 1e-3
# More than 1% of samples at full scale is audible distortion, not the odd peak.
CLIP_LEVEL = 0.999
CLIP_FRACTION = 0.01
# Duration must lie within [expected / F, expected * F + slack] (see texts.expected_seconds).
DURATION_FACTOR = 3.0
DURATION_SLACK_S = 1.0
MIN_AUDIO_S = 0.05

# 0 and 0xFFFFFFFF in a WAV size field mean "unknown length": what streaming servers send.
_UNKNOWN_SIZES = (0, 0xFFFFFFFF)


class BadAudio(Exception):
    """The body is not acceptable audio; the message says why (goes into the request record)."""


@dataclass
class WavHeader:
    sample_rate: int
    channels: int
    sample_width: int
    data_offset: int
    data_size: int | None  # None: unknown (streamed)
    is_float: bool = False


# Sample encodings a WAV may carry: (float?, bytes per sample). torchaudio.save writes float32 WAV,
# soundfile 16-bit PCM by default; a tester that knew only 16-bit would fail correct servers.
_WAV_KINDS = {(False, 1), (False, 2), (False, 3), (False, 4), (True, 4), (True, 8)}


def parse_wav_header(data: bytes) -> WavHeader | None:
    """Header of a (possibly partial, possibly streamed) WAV; None while not all of it has arrived."""
    if len(data) < 12:
        return None
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise BadAudio("not a WAV file (no RIFF/WAVE header)")
    pos, fmt = 12, None
    while pos + 8 <= len(data):
        cid, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = pos + 8
        if cid == b"fmt ":
            if body + 16 > len(data):
                return None
            tag, ch, rate, _, _, bits = struct.unpack("<HHIIHH", data[body : body + 16])
            if tag == 0xFFFE:  # WAVE_FORMAT_EXTENSIBLE: the real tag opens the sub-format GUID
                if body + 26 > len(data):
                    return None
                tag = struct.unpack("<H", data[body + 24 : body + 26])[0]
            if tag not in (1, 3) or (tag == 3, bits // 8) not in _WAV_KINDS or bits % 8 or ch < 1:
                raise BadAudio(f"WAV format tag {tag} with {bits}-bit samples; expected PCM or float")
            fmt = (rate, ch, bits // 8, tag == 3)
        elif cid == b"data":
            if fmt is None:
                raise BadAudio("WAV data chunk before fmt chunk")
            return WavHeader(fmt[0], fmt[1], fmt[2], body, None if size in _UNKNOWN_SIZES else size, fmt[3])
        pos = body + size + (size & 1)
    return None


def wav_samples(data: bytes) -> tuple[np.ndarray, int]:
    """Whole WAV body -> mono float samples; a body shorter than its header declares is truncated."""
    header = parse_wav_header(data)
    if header is None:
        raise BadAudio(f"WAV header incomplete ({len(data)} bytes)")
    payload = memoryview(data)[header.data_offset :]  # views, not copies: this runs on every response
    if header.data_size is not None:
        if len(payload) < header.data_size:
            raise BadAudio(
                f"truncated WAV: header declares {header.data_size} data bytes, got {len(payload)}"
            )
        payload = payload[: header.data_size]
    samples = _decode_frames(payload, header)
    if header.channels > 1:
        samples = samples[: len(samples) - len(samples) % header.channels]
        samples = samples.reshape(-1, header.channels).mean(axis=1)
    return samples, header.sample_rate


def _decode_frames(payload: bytes, h: WavHeader) -> np.ndarray:
    w = h.sample_width
    payload = payload[: len(payload) - len(payload) % w]
    if h.is_float:
        return np.frombuffer(payload, dtype="<f4" if w == 4 else "<f8").astype(np.float32)
    if w == 1:  # 8-bit WAV is unsigned, centred on 128
        return (np.frombuffer(payload, dtype=np.uint8).astype(np.float32) - 128.0) / 127.0
    if w == 2:
        return from_pcm16(payload)
    if w == 3:  # 24-bit: widen each little-endian triple to int32 by putting it in the top bytes
        b = np.frombuffer(payload, dtype=np.uint8).reshape(-1, 3)
        wide = np.zeros((len(b), 4), dtype=np.uint8)
        wide[:, 1:] = b
        return (wide.view("<i4").ravel() / 2147483648.0).astype(np.float32)
    return (np.frombuffer(payload, dtype="<i4") / 2147483648.0).astype(np.float32)


@dataclass
class AudioVerdict:
    seconds: float
    rms: float | None = None
    clipped_fraction: float | None = None


def check_samples(samples: np.ndarray, sample_rate: int, expected_s: float | None) -> AudioVerdict:
    """Raise BadAudio when the samples are empty, silent, clipped or of implausible duration."""
    if sample_rate <= 0:
        raise BadAudio(f"sample rate {sample_rate}")
    seconds = len(samples) / sample_rate
    if len(samples) == 0 or seconds < MIN_AUDIO_S:
        raise BadAudio(f"empty audio ({len(samples)} samples)")
    # A dot product and a min/max, no temporary arrays: this runs on every response, beside the load.
    samples = np.asarray(samples, dtype=np.float32)
    rms = float(np.sqrt(max(float(np.dot(samples, samples)), 0.0) / len(samples)))
    if rms < SILENT_RMS:
        raise BadAudio(f"silent (RMS {rms:.2e} < {SILENT_RMS:.0e})")
    peak = max(float(samples.max()), -float(samples.min()))
    clipped = 0.0
    if peak >= CLIP_LEVEL:
        clipped = float(np.count_nonzero(np.abs(samples) >= CLIP_LEVEL)) / len(samples)
    if clipped > CLIP_FRACTION:
        raise BadAudio(f"clipped ({clipped:.1%} of samples at full scale)")
    check_duration(seconds, expected_s)
    return AudioVerdict(seconds, rms, clipped)


def check_duration(seconds: float, expected_s: float | None) -> None:
    if not expected_s:
        return
    lo, hi = expected_s / DURATION_FACTOR, expected_s * DURATION_FACTOR + DURATION_SLACK_S
    if not lo <= seconds <= hi:
        raise BadAudio(f"duration {seconds:.2f} s implausible for the text (expected {lo:.2f}..{hi:.2f} s)")


def decode_compressed(data: bytes, kind: str) -> tuple[np.ndarray, int]:
    """MP3 / Ogg (Vorbis or Opus) / FLAC -> mono float samples at their own rate.

    miniaudio decodes MP3, Vorbis and FLAC; it has no Opus decoder (the format OpenAI's
    `response_format=opus` returns), so Ogg Opus goes through libsndfile (soundfile)."""
    if kind == "ogg" and is_ogg_opus(data):
        return _decode_opus(data)
    import miniaudio

    read = {"mp3": miniaudio.mp3_read_s16, "ogg": miniaudio.vorbis_read, "flac": miniaudio.flac_read_s16}[
        kind
    ]
    try:
        d = read(data)
    except miniaudio.MiniaudioError as exc:
        raise BadAudio(f"undecodable {kind} ({exc})") from None
    samples = np.frombuffer(d.samples, dtype=np.int16).astype(np.float32) / 32767.0
    if d.nchannels > 1:
        samples = samples[: len(samples) - len(samples) % d.nchannels].reshape(-1, d.nchannels).mean(axis=1)
    return samples, d.sample_rate


def is_ogg_opus(data: bytes) -> bool:
    """An Ogg stream whose first packet is an Opus identification header (RFC 7845)."""
    return data[:4] == b"OggS" and b"OpusHead" in data[:512]


def _decode_opus(data: bytes) -> tuple[np.ndarray, int]:
    import soundfile

    try:
        samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (RuntimeError, TypeError, ValueError) as exc:  # soundfile's errors derive from RuntimeError
        raise BadAudio(f"undecodable Ogg Opus ({exc})") from None
    return samples.mean(axis=1), rate


def check_body(kind: str, body: bytes, expected_s: float | None, pcm_rate: int) -> AudioVerdict:
    """Check a complete response body of the adapter's `kind` (wav, pcm, mp3, ogg, flac, zip-mp3)."""
    if not body:
        raise BadAudio("empty body")
    if kind == "wav":
        samples, rate = wav_samples(body)
        return check_samples(samples, rate, expected_s)
    if kind == "pcm":
        return check_samples(from_pcm16(body), pcm_rate, expected_s)
    if kind in ("mp3", "ogg", "flac"):
        return check_samples(*decode_compressed(body, kind), expected_s)
    if kind == "zip-mp3":
        try:
            with zipfile.ZipFile(io.BytesIO(body)) as zf:
                parts = [zf.read(n) for n in sorted(zf.namelist()) if n.lower().endswith(".mp3")]
        except (zipfile.BadZipFile, OSError) as exc:
            raise BadAudio(f"not a zip archive ({exc})") from None
        if not parts:
            raise BadAudio("zip holds no .mp3")
        decoded = [decode_compressed(p, "mp3") for p in parts]
        rates = {rate for _, rate in decoded}
        if len(rates) != 1:
            raise BadAudio(f"zip parts at different sample rates {sorted(rates)}")
        return check_samples(np.concatenate([x for x, _ in decoded]), rates.pop(), expected_s)
    raise BadAudio(f"unknown response kind {kind!r}")
