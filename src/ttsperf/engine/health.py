"""What the engine says about itself (/healthz, profiles): its settings, batch limits, memory,
switches and what its decode step compiled or captured."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ttsperf.engine.engine import Engine


def describe(engine: Engine) -> dict:
    config, runner, step = engine.config, engine.runner, engine.decode_step
    graphed = runner.graphed
    return {
        "config": {**asdict(config), "inject_oom_at_steps": sorted(config.inject_oom_at_steps)},
        "max_batch": engine.max_batch,
        "effective_max_batch": engine.effective_max_batch,
        "max_queue": engine.max_queue,
        "kv_bytes": runner.slots.nbytes,
        "switches": engine.switch_report,
        "decode_step": {
            "compiled_graphs": step.compiles,
            "compile_seconds": round(step.compile_seconds, 3),
            "cuda_graphs": sorted(graphed.graphs) if graphed else [],
            "eager_fallback_steps": graphed.eager_steps if graphed else 0,
        },
        "audio_graphs": sorted(k[1:] for k in runner.graphed_audio.graphs) if runner.graphed_audio else [],
        "warmed": engine.warmed,  # what start() built before the first request
        "device": str(engine.pipe.device),
        "model": engine.pipe.cfg.name,
        "sample_rate": engine.pipe.cfg.sample_rate,
        "weights": "synthetic" if engine.pipe.synthetic else "assets",
    }
