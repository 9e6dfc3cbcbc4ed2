"""What crosses between an HTTP front and the engine's core process, torch-free (the front imports
it; the core imports it too). One duplex pipe, pickled tuples, batched where it counts:

front -> core
    ("submit", id, SynthRequest)      a request; the front's id names it from then on
    ("cancel", id)                    its client went away
    ("call", token, name)             "status" (/readyz), "describe" (/healthz) or "metrics":
                                      answered at once, not after a turn
    ("stop", drain, timeout)          stop admitting; drain (answer what was accepted) or not
core -> front
    ("built", {"max_batch": n})       its KV slots allocated; the warm-up begins
    ("ready", describe)               loaded and warm: every bucket the max batch reaches is built
    ("fatal", message)                it could not start (the message says why)
    ("refused", message)              a setting cannot run there (a UserError: names its flag)
    ("events", [(id, event), ...])    everything one engine turn produced, in order: Accepted,
                                      PcmChunk (int16 PCM the engine made), SynthResult, SynthError
    ("rejected", id, exception)       refused at submission (queue full, draining, too long, ...)
    ("reply", token, value)           a call's answer
    ("stopped",)                      drained or stopped; the process exits next

The core sends one "events" message per turn whatever the number of rows that emitted audio, so
the front wakes once per turn, not once per chunk (vLLM V1's EngineCore sends its outputs the same
way, batched per step).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

from ttsperf.engine.config import EngineConfig, Switches
from ttsperf.model.spec import ModelSpec


@dataclass(frozen=True)
class CoreSpec:
    """Everything the core process needs to build its engine: small and picklable (the weights are
    loaded there, never sent)."""

    model: ModelSpec
    engine: EngineConfig = field(default_factory=EngineConfig)
    switches: Switches = field(default_factory=Switches)
    log_level: str = "warning"
    threads: int | None = None  # torch's intra-op threads there; None: torch's default (the cores)


def dumps(message: tuple) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> tuple:
    return pickle.loads(data)
