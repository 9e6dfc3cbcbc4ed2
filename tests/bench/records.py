"""Request records for the metrics and SLO tests (one finished request, times in seconds)."""

from __future__ import annotations

from ttsperf.bench.results import RequestRecord


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
