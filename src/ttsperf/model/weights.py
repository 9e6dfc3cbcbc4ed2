"""Weights: build the model, fill it with synthetic values, or load/save an official asset dir.

Layout of an asset dir (the official one): gpt/ (config.json + model.safetensors, LlamaModel
names), Embed.safetensors, Decoder.safetensors, DVAE.safetensors, Vocos.safetensors, tokenizer/.
Safetensors only: a pickle can run code, a safetensors file cannot.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from ttsperf.errors import UserError
from ttsperf.model.config import ModelConfig
from ttsperf.model.decoder import DVAE, N_MELS, Decoder
from ttsperf.model.gpt import Embed, build_llama, llama_config
from ttsperf.model.spec import GPT_SHAPE_KEYS, config_of_assets  # noqa: F401 - torch-free, re-exported
from ttsperf.model.vocos import Vocos

COMPONENT_FILES = {
    "gpt": "gpt/model.safetensors",
    "embed": "Embed.safetensors",
    "decoder": "Decoder.safetensors",
    "dvae": "DVAE.safetensors",
    "vocos": "Vocos.safetensors",
}
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class ChatTTSModel(nn.Module):
    """Every component of ChatTTS, named as the asset files are."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.gpt = build_llama(cfg.gpt)
        self.embed = Embed(cfg.gpt)
        self.decoder = Decoder(cfg)
        self.dvae = DVAE(cfg)
        self.vocos = Vocos(cfg.vocos)

    def components(self) -> dict[str, nn.Module]:
        return {name: getattr(self, name) for name in COMPONENT_FILES}

    def parameter_counts(self) -> dict[str, int]:
        counts = {name: sum(p.numel() for p in m.parameters()) for name, m in self.components().items()}
        counts["total"] = sum(counts.values())
        return counts


def _mel_filterbank(sample_rate: int, n_fft: int, n_mels: int) -> torch.Tensor:
    """HTK-scale triangular filters, (n_fft/2+1, n_mels): the mel front end's buffer. Only written so
    the official loader finds every key; ttsperf never analyses audio."""
    freqs = torch.linspace(0, sample_rate // 2, n_fft // 2 + 1)
    mel = lambda f: 2595.0 * math.log10(1.0 + f / 700.0)  # noqa: E731
    m_pts = torch.linspace(mel(0.0), mel(sample_rate / 2), n_mels + 2)
    f_pts = 700.0 * (10 ** (m_pts / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - freqs.unsqueeze(1)
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.clamp(torch.minimum(down, up), min=0.0)


def _extra_buffers(cfg: ModelConfig) -> dict[str, dict[str, torch.Tensor]]:
    """Tensors the official files carry that ttsperf does not use (audio analysis front ends)."""
    v = cfg.vocos
    front_end = {
        "mel_spec.spectrogram.window": torch.hann_window(v.n_fft),
        "mel_spec.mel_scale.fb": _mel_filterbank(cfg.sample_rate, v.n_fft, N_MELS),
    }
    return {
        "vocos": {f"feature_extractor.{k}": t for k, t in front_end.items()},
        "dvae": {f"preprocessor_mel.{k}": t for k, t in front_end.items()},
        "gpt": {},
        "embed": {},
        "decoder": {},
    }


@torch.no_grad()
def init_synthetic(model: ChatTTSModel, seed: int) -> ChatTTSModel:
    """Random values of the real shapes, from one seed: the same compute and memory as real weights.

    Matrices ~ N(0, 0.02) (LLaMA's initializer range), biases 0, norms 1, layer scales as the
    architectures initialise them. The vocoder's output bias sets the spectral magnitude exp(bias)
    to 3, which gives speech-like levels (RMS ~0.05, peak ~0.2 at the chattts size, measured): at 0
    the level is arbitrary, and a check for silent or clipped audio should judge real levels.
    """
    gen = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if "norm" in name and leaf in ("weight", "bias"):
            param.fill_(1.0 if leaf == "weight" else 0.0)
        elif leaf in ("gamma",) or (leaf == "weight" and ".decoder_block." in name and param.dim() == 1):
            continue  # layer scales keep their architectural initial value
        elif leaf == "bias":
            param.zero_()
        elif leaf == "original0":  # weight-norm magnitude g
            param.fill_(1.0)
        else:
            param.copy_(torch.randn(param.shape, generator=gen) * 0.02)
    model.vocos.head.out.bias.fill_(math.log(3.0))
    return model


# The random fills the layers' constructors run (Linear, Conv1d and Embedding's reset_parameters).
# Every tensor they fill is overwritten next, by init_synthetic or by an asset's tensors, and at the
# chattts size they took 4.7 of the 7.1 s a build took on a 2-core CPU. Building on `meta` and
# `to_empty` would skip them too, but would lose what constructors set that is kept (layer scales,
# buffers). The patch is process-wide for the build's length: no other thread initialises modules
# then (a server's model is built before its worker starts).
_RANDOM_INITS = ("kaiming_uniform_", "kaiming_normal_", "uniform_", "normal_", "trunc_normal_")


@contextmanager
def _no_random_init() -> Iterator[None]:
    saved = {name: getattr(nn.init, name) for name in _RANDOM_INITS}
    try:
        for name in _RANDOM_INITS:
            setattr(nn.init, name, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for name, fn in saved.items():
            setattr(nn.init, name, fn)


def build_model(
    cfg: ModelConfig, *, device: str | torch.device = "cpu", seed: int | None = 0
) -> ChatTTSModel:
    """The whole model; synthetic weights from `seed`, or uninitialised (seed None, e.g. on meta,
    or for an asset's tensors to fill)."""
    with torch.device(device), _no_random_init():
        model = ChatTTSModel(cfg)
    if seed is not None:
        init_synthetic(model, seed)
    return model.eval()


# ---------------------------------------------------------------- saving


def save_assets(model: ChatTTSModel, directory: str | Path) -> Path:
    """Write an official-layout asset dir (the tokenizer is written by the tokenizer module)."""
    root = Path(directory)
    (root / "gpt").mkdir(parents=True, exist_ok=True)
    extras = _extra_buffers(model.cfg)
    for name, module in model.components().items():
        tensors = {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}
        tensors.update(extras[name])
        save_file(tensors, str(root / COMPONENT_FILES[name]), metadata={"format": "pt"})
    llama_config(model.cfg.gpt).to_json_file(str(root / "gpt" / "config.json"))
    return root


# ---------------------------------------------------------------- loading


PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.exists():
        pickles = [path.with_suffix(s) for s in PICKLE_SUFFIXES if path.with_suffix(s).exists()]
        if pickles:
            raise UserError(
                f"{path}: missing; found {pickles[0].name}, and pickles are never loaded (one can run "
                "code): convert it to safetensors (safetensors.torch.save_file of its state dict)"
            )
        raise UserError(f"{path}: missing (an asset dir needs {', '.join(COMPONENT_FILES.values())})")
    if not path.is_file():
        raise UserError(f"{path}: expected a safetensors file, found a directory")
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    except PermissionError:
        raise UserError(f"{path}: not readable (permission denied)") from None
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise UserError(f"{path}: not a valid safetensors file ({exc}); truncated or corrupt?") from None


def _check_gpt_config(path: Path, model: ChatTTSModel) -> None:
    if not path.exists():
        raise UserError(f"{path}: missing (the gpt/ folder needs config.json and model.safetensors)")
    try:
        found = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not readable JSON ({exc})") from None
    expected = llama_config(model.cfg.gpt).to_dict()
    for key in GPT_SHAPE_KEYS:
        if key in found and found[key] != expected[key]:
            raise UserError(
                f"{path}: {key} = {found[key]}, expected {expected[key]} for --config {model.cfg.name}"
            )


@torch.no_grad()
def _load_component(name: str, module: nn.Module, path: Path, extras: dict[str, torch.Tensor]) -> None:
    tensors = _read_tensors(path)
    expected = module.state_dict()
    ignorable = set(extras) | ({"embed_tokens.weight"} if name == "gpt" else set())
    missing = [k for k in expected if k not in tensors]
    if missing:
        raise UserError(f"{path}: missing tensor {missing[0]!r} ({len(missing)} missing in all)")
    unexpected = [k for k in tensors if k not in expected and k not in ignorable]
    if unexpected:
        raise UserError(f"{path}: unexpected tensor {unexpected[0]!r} ({len(unexpected)} unexpected in all)")
    for key, target in expected.items():
        src = tensors[key]
        if tuple(src.shape) != tuple(target.shape):
            raise UserError(
                f"{path}: tensor {key!r} has shape {tuple(src.shape)}, expected {tuple(target.shape)}"
            )
        if src.dtype not in FLOAT_DTYPES:
            raise UserError(
                f"{path}: tensor {key!r} has dtype {src.dtype}, expected float32/float16/bfloat16"
            )
        target.copy_(src.to(target.dtype))


def load_assets(
    cfg: ModelConfig, directory: str | Path, *, device: str | torch.device = "cpu"
) -> ChatTTSModel:
    """Load an official asset dir into a model of `cfg`; every problem names the file and tensor."""
    root = Path(directory)
    try:
        if not root.exists():
            raise UserError(f"{root}: asset directory does not exist")
        if not root.is_dir():
            raise UserError(f"{root}: expected an asset directory, found a file")
        next(root.iterdir(), None)
    except PermissionError:
        raise UserError(f"{root}: asset directory is not readable (permission denied)") from None
    model = build_model(cfg, device="cpu", seed=None)
    _check_gpt_config(root / "gpt" / "config.json", model)
    extras = _extra_buffers(cfg)
    for name, module in model.components().items():
        _load_component(name, module, root / COMPONENT_FILES[name], extras[name])
    return model.to(device).eval()
