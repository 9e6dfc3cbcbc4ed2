"""Stage inputs and ttsperf's stage outputs for the conformance check against the official package.

Shared by `conformance/run.py` (beside the official package) and the fixture test of `make test`
(without it), so both compare exactly the same things.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ttsperf.model.config import ModelConfig
from ttsperf.model.gpt import llama_forward
from ttsperf.model.pipeline import Pipeline
from ttsperf.model.sampling import SamplingParams

STAGES = ("gpt_hidden", "gpt_logits", "decoder_mel", "dvae_mel", "vocos_wav", "synth_codes", "synth_wav")
SYNTH_TEXT = "你好，这是一段用于压测的文本。"
SYNTH_STEPS = 40


def rel_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    """Max absolute difference over the reference's largest magnitude."""
    scale = float(np.max(np.abs(theirs))) if theirs.size else 0.0
    return (
        float(np.max(np.abs(ours - theirs))) / scale
        if scale
        else float(np.max(np.abs(ours)) if ours.size else 0.0)
    )


def make_stage_inputs(cfg: ModelConfig, seed: int) -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(seed)
    n_text, n_code = 12, 8
    text = torch.randint(0, cfg.gpt.num_text_tokens, (1, n_text, 1), generator=g).expand(
        -1, -1, cfg.gpt.num_vq
    )
    codes = torch.randint(0, cfg.gpt.num_audio_tokens - 1, (1, n_code, cfg.gpt.num_vq), generator=g)
    mask = torch.cat(
        [torch.ones(1, n_text, dtype=torch.bool), torch.zeros(1, n_code, dtype=torch.bool)], dim=1
    )
    return {
        "gpt_ids": torch.cat([text, codes], dim=1).numpy(),
        "gpt_text_mask": mask.numpy(),
        "decoder_hidden": torch.randn(1, cfg.gpt.hidden_size, 30, generator=g).numpy(),
        "dvae_codes": torch.randint(
            0, cfg.gpt.num_audio_tokens - 1, (1, cfg.gpt.num_vq, 30), generator=g
        ).numpy(),
        "vocos_mel": torch.randn(1, cfg.vocos.n_mels, 60, generator=g).numpy(),
        "synth_text": np.array(SYNTH_TEXT),
        "synth_steps": np.array(SYNTH_STEPS),
    }


@torch.inference_mode()
def ours_stage_outputs(cfg: ModelConfig, assets: str | Path, inputs: dict) -> dict[str, np.ndarray]:
    pipe = Pipeline.from_assets(cfg, assets)
    m = pipe.model
    out: dict[str, np.ndarray] = {}
    ids = torch.from_numpy(np.asarray(inputs["gpt_ids"]))
    mask = torch.from_numpy(np.asarray(inputs["gpt_text_mask"]))
    t = ids.shape[1]
    hidden, _ = llama_forward(
        m.gpt, m.embed.embed_prompt(ids, mask), position_ids=torch.arange(t)[None], use_cache=False
    )
    out["gpt_hidden"] = hidden.numpy()
    out["gpt_logits"] = m.embed.code_logits(hidden[:, -1]).numpy()
    out["decoder_mel"] = m.decoder(torch.from_numpy(np.asarray(inputs["decoder_hidden"]))).numpy()
    out["dvae_mel"] = m.dvae(torch.from_numpy(np.asarray(inputs["dvae_codes"]))).numpy()
    out["vocos_wav"] = m.vocos(torch.from_numpy(np.asarray(inputs["vocos_mel"]))).numpy()
    gen = pipe.generate(
        [str(inputs["synth_text"])],
        SamplingParams(top_k=1, repetition_penalty=1.05),
        fixed_steps=[int(inputs["synth_steps"])],
    )[0]
    out["synth_codes"] = gen.codes.numpy()
    out["synth_wav"] = m.vocos(pipe.mel(gen)).numpy()
    return out
