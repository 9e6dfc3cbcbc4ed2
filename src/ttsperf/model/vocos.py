"""Vocos vocoder: mel (B, 100, F) -> waveform (B, (F-1) x hop) at 24 kHz.

ConvNeXt backbone + ISTFT head, the architecture of the `vocos` package (MIT) that ChatTTS uses,
written here on plain PyTorch with the same parameter names so `Vocos.safetensors` loads
unchanged. The mel front end (`feature_extractor.*`) only analyses audio; ttsperf never does, so
its two buffers are checked and skipped by the loader.
"""

from __future__ import annotations

import torch
from torch import nn

from ttsperf.model.config import VocosConfig


class VocosBlock(nn.Module):
    def __init__(self, dim: int, intermediate_dim: int, layer_scale: float):
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(intermediate_dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), layer_scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dwconv(x).transpose(1, 2))
        y = self.gamma * self.pwconv2(self.act(self.pwconv1(y)))
        return x + y.transpose(1, 2)


class VocosBackbone(nn.Module):
    def __init__(self, cfg: VocosConfig):
        super().__init__()
        self.embed = nn.Conv1d(cfg.n_mels, cfg.dim, kernel_size=7, padding=3)
        self.norm = nn.LayerNorm(cfg.dim, eps=1e-6)
        self.convnext = nn.ModuleList(
            VocosBlock(cfg.dim, cfg.intermediate_dim, 1.0 / cfg.num_layers) for _ in range(cfg.num_layers)
        )
        self.final_layer_norm = nn.LayerNorm(cfg.dim, eps=1e-6)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.embed(mel).transpose(1, 2)).transpose(1, 2)
        for block in self.convnext:
            x = block(x)
        return self.final_layer_norm(x.transpose(1, 2))  # (B, F, dim)


class ISTFT(nn.Module):
    def __init__(self, n_fft: int, hop_length: int):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft))

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        return torch.istft(
            spec, self.n_fft, self.hop_length, self.n_fft, self.window.to(spec.real.dtype), center=True
        )


class ISTFTHead(nn.Module):
    def __init__(self, cfg: VocosConfig):
        super().__init__()
        self.out = nn.Linear(cfg.dim, cfg.n_fft + 2)
        self.istft = ISTFT(cfg.n_fft, cfg.hop_length)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mag, phase = self.out(x).transpose(1, 2).float().chunk(2, dim=1)
        # exp then clip: the vocoder's guard against huge magnitudes (random weights hit it often)
        mag = torch.clip(torch.exp(mag), max=1e2)
        return self.istft(torch.polar(mag, phase))


class Vocos(nn.Module):
    def __init__(self, cfg: VocosConfig):
        super().__init__()
        self.backbone = VocosBackbone(cfg)
        self.head = ISTFTHead(cfg)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(mel))
