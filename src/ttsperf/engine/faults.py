"""Fault injection: an out-of-memory raised at chosen step counts, so tests can drive the engine's
OOM policy (oom.py) through a real server. Chosen once, at construction: with no fault asked for,
the step the scheduler calls is the runner's own, and nothing is added to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def inject_oom(step: Callable[[], T], at_steps: frozenset[int]) -> Callable[[], T]:
    """`step` itself, or `step` raising an out-of-memory instead at each count in `at_steps`
    (counting, from 0, the steps that ran and the faults injected)."""
    if not at_steps:
        return step
    count = 0

    def faulty() -> T:
        nonlocal count
        if count in at_steps:
            count += 1
            raise torch.OutOfMemoryError("injected out of memory (fault injection)")
        out = step()
        count += 1
        return out

    return faulty
