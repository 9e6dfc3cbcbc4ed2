"""The guide's memory analysis done right: counts from the real module shapes, no memory spent."""

from __future__ import annotations

from ttsperf.model.config import ModelConfig
from ttsperf.model.weights import build_model

BYTES_PER_ELEMENT = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}


def model_info(cfg: ModelConfig) -> dict:
    """Parameter counts per component (built on the meta device), bytes per dtype, KV-cache bytes
    per token per sequence and the audio rates."""
    counts = build_model(cfg, device="meta", seed=None).parameter_counts()
    kv = {d: cfg.gpt.kv_bytes_per_token(BYTES_PER_ELEMENT[d]) for d in ("fp32", "fp16")}
    return {
        "config": cfg.name,
        "parameters": counts,
        "weights_bytes": {d: counts["total"] * n for d, n in BYTES_PER_ELEMENT.items()},
        "kv_bytes_per_token": kv,
        "kv_bytes_per_audio_second": {d: b * cfg.steps_per_second for d, b in kv.items()},
        "steps_per_audio_second": cfg.steps_per_second,
        "samples_per_step": cfg.samples_per_step,
        "sample_rate": cfg.sample_rate,
        "max_new_tokens_default": 2048,
        "audio_seconds_at_max_new_tokens": 2048 / cfg.steps_per_second,
        "method": "numel() of every parameter of each component built on torch's meta device",
    }
