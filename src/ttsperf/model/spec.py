"""Which model the flags name, torch-free: an official asset directory, or synthetic weights of a
config's shapes. `ModelSpec` is small and picklable, so that the process that owns the device (the
engine's core, a Ray replica) loads the model itself and no weights ever cross a pipe.

    spec = ModelSpec(synthetic=True, config="tiny")
    spec.check()                        # bad flags fail here, before anything is loaded
    pipe = Pipeline.from_spec(spec)     # model/pipeline.py, where torch is
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ttsperf.errors import UserError

GPT_SHAPE_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers")


def config_of_assets(directory: str | Path) -> str | None:
    """The name of the config whose GPT shapes an asset dir's gpt/config.json gives (None when it
    is missing or unreadable: loading then says which file and why)."""
    from ttsperf.model.config import CONFIGS

    path = Path(directory) / "gpt" / "config.json"
    try:
        found = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    shapes = {k: found.get(k) for k in GPT_SHAPE_KEYS}
    for name, cfg in CONFIGS.items():
        if all(shapes[k] == getattr(cfg.gpt, k) for k in GPT_SHAPE_KEYS):
            return name
    given = ", ".join(f"{k} = {v}" for k, v in shapes.items())
    raise UserError(f"{path}: {given} match no config ({', '.join(CONFIGS)}); is this a ChatTTS asset dir?")


def model_config(assets: Path | None, synthetic: bool, config: str | None):
    """The config the model flags name, checked without loading anything. Without --config, an
    asset dir's own gpt/config.json says which (synthetic weights: chattts)."""
    from ttsperf.model.config import get_config

    if (assets is None) == (not synthetic):
        raise UserError("give exactly one of --assets DIR or --synthetic")
    if config is None:
        config = (config_of_assets(assets) if assets is not None else None) or "chattts"
    return get_config(config)


@dataclass(frozen=True)
class ModelSpec:
    assets: Path | None = None
    synthetic: bool = False
    config: str | None = None
    device: str = "cpu"
    dtype: str = "fp32"
    seed: int = 0  # of the synthetic weights

    def check(self) -> str:
        """The config's name; raises UserError for flags that cannot name a model."""
        return self.model_config().name

    def model_config(self):
        return model_config(self.assets, self.synthetic, self.config)
