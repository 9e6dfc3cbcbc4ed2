"""A request's sampling settings, torch-free: the HTTP front builds them without importing torch
(model/sampling.py turns them into per-row tensors on the engine's side)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.05
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.top_k == 1 or self.temperature == 0.0
