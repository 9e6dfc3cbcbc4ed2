"""Concurrent HTTP requests share decode steps (continuous batching), and a request's audio does not
depend on who else is in the batch (same greedy codes; samples equal up to float rounding)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from ttsperf.audio import decode_wav

from .helpers import RunningPeak, expected_samples, scrape

# 19 to 47 words: 290 to 720 steps, long enough that all eight overlap in the batch
TEXTS = [f"Request number {i} {'asks for more speech ' * (4 + i)}" for i in range(8)]


def post_all(url: str, bodies: list[dict]) -> list[httpx.Response]:
    def post(body: dict) -> httpx.Response:
        with httpx.Client(base_url=url, timeout=120) as c:
            return c.post("/invoke", json=body)

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, bodies))


def steps_above_one(metrics: dict[str, float]) -> float:
    return metrics["ttsperf_batch_size_count"] - metrics['ttsperf_batch_size_bucket{le="1"}']


@pytest.mark.slow
def test_eight_concurrent_requests_are_decoded_in_shared_steps(live):
    with live.client() as c:
        before = scrape(c)
    responses = post_all(live.url, [{"text": t, "seed": i} for i, t in enumerate(TEXTS)])
    for text, r in zip(TEXTS, responses, strict=True):
        assert r.status_code == 200
        assert len(decode_wav(r.content)[0]) == expected_samples(text)
    with live.client() as c:
        after = scrape(c)
    assert steps_above_one(after) - steps_above_one(before) > 0  # some steps ran with batch > 1
    assert after["ttsperf_batch_size_sum"] - before["ttsperf_batch_size_sum"] > (
        after["ttsperf_batch_size_count"] - before["ttsperf_batch_size_count"]
    )  # mean batch size over these requests > 1


@pytest.mark.slow
def test_a_greedy_request_sounds_the_same_alone_and_among_seven_others(live):
    target = {"text": "The same greedy request, alone or in company. " * 3, "top_k": 1, "seed": 7}
    with live.client() as c:
        alone = c.post("/invoke", json=target)
    others = [{"text": t, "seed": 100 + i, "temperature": 0.9} for i, t in enumerate(TEXTS[1:])]
    with RunningPeak(live.engine) as batch:
        crowd = post_all(live.url, [*others[:3], target, *others[3:]])
    assert alone.status_code == 200 and all(r.status_code == 200 for r in crowd)
    assert batch.peak == 8  # at some step all eight were in the batch, the target among them
    # Same codes, same audio up to float rounding: batched matmuls sum in another order, so the
    # hidden states the decoder reads differ in the last bits and a few samples round to the
    # neighbouring 16-bit level. A different code anywhere would change whole stretches.
    a, b = (np.frombuffer(r.content[44:], dtype="<i2").astype(int) for r in (crowd[3], alone))
    assert len(a) == len(b) == expected_samples(target["text"])
    assert np.abs(a - b).max() <= 1 and np.mean(a != b) < 1e-3
