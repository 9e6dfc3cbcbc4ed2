"""The bounded queue and who joins at a step boundary (rows and the prefill token budget)."""

from __future__ import annotations

import threading

import pytest

from ttsperf.engine.admission import RequestQueue
from ttsperf.engine.stats import EngineStats
from ttsperf.engine.types import NotAccepting, QueueFull, RequestHandle, SynthRequest


def handle(tokens: int) -> RequestHandle:
    h = RequestHandle(SynthRequest("x"), None)
    h.prompt_tokens = tokens
    return h


def test_joining_stops_at_the_free_rows_or_the_prefill_budget():
    q = RequestQueue(max_queue=8, prefill_tokens=300, retry_after=1.0, stats=EngineStats())
    hs = [handle(t) for t in (100, 50, 140, 10)]
    for h in hs:
        q.put(h)
    # 100, then 2 x 100, then 3 x 140 = 420 > 300: two join, padded to the longest prompt
    assert q.take(rows=8) == hs[:2]
    assert q.admitting == 2 and q.depth() == 2
    q.admitted(2)
    assert q.take(rows=1) == hs[2:3]  # one free row
    q.admitted(1)
    big = handle(1000)
    q.put_back([big])  # the first always joins, whatever its prompt
    assert q.take(rows=8) == [big]


def test_put_back_goes_first_in_order():
    q = RequestQueue(8, 10_000, 1.0, EngineStats())
    a, b, c = handle(1), handle(1), handle(1)
    q.put(c)
    q.put_back([a, b])
    assert q.take(rows=8) == [a, b, c]


def test_a_full_queue_and_a_closed_one_refuse():
    stats = EngineStats()
    q = RequestQueue(max_queue=1, prefill_tokens=100, retry_after=2.5, stats=stats)
    q.put(handle(1))
    with pytest.raises(QueueFull) as full:
        q.put(handle(1))
    assert full.value.retry_after == 2.5 and stats.rejected == 1
    q.close(stop=False)
    with pytest.raises(NotAccepting):
        q.put(handle(1))


def test_the_worker_waits_until_stopped():
    q = RequestQueue(8, 100, 1.0, EngineStats())
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(q.wait_for_work(running=0)))
    waiter.start()
    q.close(stop=True)
    waiter.join(timeout=5)
    assert answers == [False]
    assert q.wait_for_work(running=3) is False  # stopping wins over work


def test_arrivals_join_in_groups_while_rows_run_and_at_once_when_idle():
    q = RequestQueue(8, 10_000, 1.0, EngineStats())
    assert not q.due(free=4, running=0, now=0.0, wait=0.02, gather=3)  # nobody waits
    first = handle(1)
    q.put(first)
    t0 = first.submitted
    assert q.due(free=4, running=0, now=t0, wait=0.02, gather=3)  # idle: at once
    assert not q.due(free=4, running=2, now=t0 + 0.01, wait=0.02, gather=3)  # rows run: gather
    assert q.due(free=4, running=2, now=t0 + 0.03, wait=0.02, gather=3)  # the oldest waited enough
    q.put(handle(1))
    assert q.due(free=2, running=2, now=t0, wait=0.02, gather=3)  # every free row would fill
    assert not q.due(free=4, running=2, now=t0, wait=0.02, gather=3)
    q.put(handle(1))
    assert q.due(free=4, running=2, now=t0, wait=0.02, gather=3)  # a group of 3 waits
    assert not q.due(free=0, running=8, now=t0 + 1, wait=0.02, gather=3)  # no free row
