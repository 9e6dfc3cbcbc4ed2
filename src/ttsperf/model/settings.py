"""The model a command loads, as settings (serve and profile share them; ttsperf.settings):
real weights from an asset directory, or synthetic ones of a config's shapes, on a device in a dtype."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ttsperf.settings import Layered


class ModelSettings(Layered):
    """The fields every model-loading command takes; each command's own model sets its prefix."""

    assets: Path | None = Field(None, description="Official ChatTTS asset directory.")
    synthetic: bool = Field(False, description="Random weights of the real shapes.")
    # where --assets can say it: the asset dir's gpt/config.json decides when --config is not given
    config: str | None = Field(
        None, description="chattts (real sizes) or tiny; default: the --assets dir's own, else chattts."
    )
    device: str = Field("cpu", description="cpu, cuda or cuda:N.")
    dtype: str = Field("fp32", description="fp32, fp16 or bf16.")
