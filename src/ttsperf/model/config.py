"""Shapes of the ChatTTS architecture: `chattts` (the real sizes), `tiny` (same code path, for tests)
and `skeleton` (chattts's op graph at negligible widths, to measure host work).

Every number of `chattts` is the official package's configuration (docs/reference/chattts.md gives each
shape and the parameter counts they produce). `tiny` keeps the audio rates (24 kHz, hop 256, 100
mel bins, 626 codes per codebook, 4 codebooks) so every rate-derived test holds for both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ttsperf.errors import UserError


@dataclass(frozen=True)
class GPTConfig:
    hidden_size: int = 768
    intermediate_size: int = 3072
    num_attention_heads: int = 12
    num_key_value_heads: int = 12
    num_hidden_layers: int = 20
    max_position_embeddings: int = 4096
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    num_text_tokens: int = 21178
    num_audio_tokens: int = 626
    num_vq: int = 4

    @property
    def eos_token(self) -> int:
        # The last code of each codebook ends a sequence (official: num_audio_tokens - 1).
        return self.num_audio_tokens - 1

    def kv_bytes_per_token(self, bytes_per_element: int) -> int:
        """K and V, every layer, one token of one sequence."""
        head_dim = self.hidden_size // self.num_attention_heads
        return 2 * self.num_hidden_layers * self.num_key_value_heads * head_dim * bytes_per_element


@dataclass(frozen=True)
class ConvStackConfig:
    """The DVAE-style ConvNeXt stack (official `DVAEDecoder`), used by Decoder and DVAE."""

    idim: int
    odim: int
    hidden: int
    n_layer: int
    bn_dim: int
    kernel: int = 7
    dilation: int = 2


@dataclass(frozen=True)
class VQConfig:
    dim: int = 1024
    levels: tuple[int, ...] = (5, 5, 5, 5)
    groups: int = 2
    residuals: int = 2


@dataclass(frozen=True)
class VocosConfig:
    n_mels: int = 100
    dim: int = 512
    intermediate_dim: int = 1536
    num_layers: int = 8
    n_fft: int = 1024
    hop_length: int = 256


@dataclass(frozen=True)
class ModelConfig:
    name: str
    gpt: GPTConfig
    # Decoder: GPT hidden states -> mel. Its input is hidden/2 channels at 2 frames per step.
    decoder: ConvStackConfig
    # DVAE: codes -> mel (decode path), plus the encoder half so a real DVAE checkpoint loads whole.
    dvae_decoder: ConvStackConfig
    dvae_encoder: ConvStackConfig
    vq: VQConfig
    vocos: VocosConfig
    sample_rate: int = 24_000
    mel_frames_per_step: int = 2

    @property
    def steps_per_second(self) -> float:
        """GPT decode steps per second of audio: 24000 / 256 / 2 for ChatTTS (ttsperf.facts)."""
        return self.sample_rate / self.vocos.hop_length / self.mel_frames_per_step

    @property
    def samples_per_step(self) -> int:
        return self.vocos.hop_length * self.mel_frames_per_step

    def to_dict(self) -> dict:
        return asdict(self)


CHATTTS = ModelConfig(
    name="chattts",
    gpt=GPTConfig(),
    decoder=ConvStackConfig(idim=384, odim=384, hidden=512, n_layer=12, bn_dim=128),
    dvae_decoder=ConvStackConfig(idim=512, odim=512, hidden=256, n_layer=12, bn_dim=128),
    dvae_encoder=ConvStackConfig(idim=512, odim=1024, hidden=256, n_layer=12, bn_dim=128),
    vq=VQConfig(),
    vocos=VocosConfig(),
)

TINY = ModelConfig(
    name="tiny",
    gpt=GPTConfig(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=2,
        max_position_embeddings=1024,
        num_text_tokens=512,
    ),
    decoder=ConvStackConfig(idim=32, odim=32, hidden=48, n_layer=2, bn_dim=16),
    dvae_decoder=ConvStackConfig(idim=32, odim=32, hidden=32, n_layer=2, bn_dim=16),
    dvae_encoder=ConvStackConfig(idim=32, odim=64, hidden=32, n_layer=2, bn_dim=16),
    vq=VQConfig(dim=64),
    vocos=VocosConfig(dim=64, intermediate_dim=128, num_layers=2),
)

# Every count of `chattts` — layers, heads, vocabularies, codebooks, FSQ levels, audio rates — with
# each width cut until compute vanishes: a step runs the same aten ops (tests/model/test_skeleton.py)
# and its time is the host's (Python, dispatcher, launches), which `profile --host` measures. Widths
# keep chattts's ties: decoder idim = GPT hidden / 2, DVAE decoder idim = VQ dim / 2, head_dim even.
SKELETON = ModelConfig(
    name="skeleton",
    gpt=GPTConfig(hidden_size=48, intermediate_size=96),
    decoder=ConvStackConfig(idim=24, odim=24, hidden=16, n_layer=12, bn_dim=8),
    dvae_decoder=ConvStackConfig(idim=16, odim=16, hidden=16, n_layer=12, bn_dim=8),
    dvae_encoder=ConvStackConfig(idim=16, odim=32, hidden=16, n_layer=12, bn_dim=8),
    vq=VQConfig(dim=32),
    vocos=VocosConfig(dim=16, intermediate_dim=48),
)

CONFIGS: dict[str, ModelConfig] = {c.name: c for c in (CHATTTS, TINY, SKELETON)}


def get_config(name: str) -> ModelConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise UserError(f"--config {name!r}: expected one of {', '.join(CONFIGS)}") from None


__all__ = [
    "CHATTTS",
    "CONFIGS",
    "SKELETON",
    "TINY",
    "ConvStackConfig",
    "GPTConfig",
    "ModelConfig",
    "get_config",
]
