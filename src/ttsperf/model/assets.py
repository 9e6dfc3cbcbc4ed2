"""A whole asset dir (weights + tokenizer) in the official layout, from random weights."""

from __future__ import annotations

from pathlib import Path

from ttsperf.errors import UserError
from ttsperf.model.config import get_config
from ttsperf.model.tokenizer import build_synthetic_tokenizer, save_tokenizer
from ttsperf.model.weights import build_model, save_assets


def make_random_assets(
    directory: str | Path, config: str = "tiny", seed: int = 0, force: bool = True
) -> Path:
    """Random weights of `config`'s shapes in the official layout under `directory`. force=False
    (the CLI's default) refuses a directory that already holds something: an asset of 1.1 GB."""
    cfg = get_config(config)
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise UserError(f"{root}: exists and is not a directory")
    if not force and root.is_dir() and any(root.iterdir()):
        raise UserError(f"{root}: already exists and is not empty; give --force to write over it")
    try:
        save_assets(build_model(cfg, seed=seed), root)
        save_tokenizer(build_synthetic_tokenizer(cfg.gpt.num_text_tokens), root / "tokenizer")
    except OSError as exc:  # no such parent, read-only, not permitted
        raise UserError(f"{root}: cannot write ({exc.strerror or exc})") from None
    return root
