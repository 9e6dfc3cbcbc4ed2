"""A whole asset dir (weights + tokenizer) in the official layout, from random weights."""

from __future__ import annotations

from pathlib import Path

from ttsperf.errors import UserError
from ttsperf.model.config import get_config
from ttsperf.model.tokenizer import build_synthetic_tokenizer, save_tokenizer
from ttsperf.model.weights import build_model, save_assets


def make_random_assets(directory: str | Path, config: str = "tiny", seed: int = 0) -> Path:
    cfg = get_config(config)
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise UserError(f"{root}: exists and is not a directory")
    try:
        save_assets(build_model(cfg, seed=seed), root)
        save_tokenizer(build_synthetic_tokenizer(cfg.gpt.num_text_tokens), root / "tokenizer")
    except PermissionError as exc:
        raise UserError(f"{root}: cannot write ({exc.strerror})") from None
    return root
