"""Fault injection costs nothing when off and raises exactly at the counts asked for."""

from __future__ import annotations

import pytest
import torch

from ttsperf.engine.faults import inject_oom


def test_no_fault_is_the_step_itself():
    def step():
        return 1

    assert inject_oom(step, frozenset()) is step


def test_faults_fall_at_the_counts_asked_and_count_themselves():
    ran: list[int] = []
    step = inject_oom(lambda: ran.append(1) or len(ran), frozenset({1, 2}))
    assert step() == 1
    for _ in range(2):  # counts 1 and 2: faults, the step does not run
        with pytest.raises(torch.OutOfMemoryError, match="injected"):
            step()
    assert step() == 2 and step() == 3
    assert len(ran) == 3
