"""Vocos vocoder: mel (B, 100, F) -> waveform (B, (F-1) x hop) at 24 kHz.

ConvNeXt backbone + ISTFT head, the architecture of the `vocos` package (MIT) that ChatTTS uses,
written here on plain PyTorch with the same parameter names so `Vocos.safetensors` loads
unchanged. The mel front end (`feature_extractor.*`) only analyses audio; ttsperf never does, so
its two buffers are checked and skipped by the loader.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
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

    def forward(self, mel: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`mask` (B, 1, F): zero the padding after each row before every conv (see
        decoder.ConvStack.forward), so rows of different lengths share one call."""
        keep = (lambda t: t) if mask is None else (lambda t: t * mask)
        x = self.norm(self.embed(keep(mel)).transpose(1, 2)).transpose(1, 2)
        for block in self.convnext:
            x = block(keep(x))
        return self.final_layer_norm(x.transpose(1, 2))  # (B, F, dim)


class ISTFT(nn.Module):
    def __init__(self, n_fft: int, hop_length: int):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft))

    def forward(self, spec: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        window = self.window.to(spec.real.dtype)
        if mask is None:
            return torch.istft(spec, self.n_fft, self.hop_length, self.n_fft, window, center=True)
        n, f = self.n_fft, spec.shape[-1]
        return self.overlap_add(spec, mask[:, 0])[:, n // 2 : n // 2 + self.hop_length * (f - 1)]

    def overlap_add(self, spec: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """torch.istft without the centre trim, per row: `frames` (B, F) is 1 on the frames a row
        has. The others add nothing, neither signal nor window envelope, so where a row's own
        frames cover a sample it is the sample of that row's own istft. -> (B, n_fft + hop (F-1)),
        zero where no frame reaches."""
        n, hop = self.n_fft, self.hop_length
        b, _, f = spec.shape
        window = self.window.to(torch.float32)
        frames = frames.to(torch.float32)
        pieces = (
            torch.fft.irfft(spec, n=n, dim=1).transpose(1, 2) * window * frames.unsqueeze(-1)
        )  # (B, F, n)
        if n % hop:  # the general case: torch's fold
            envelope = (window**2) * frames.unsqueeze(-1)

            def fold(x: torch.Tensor) -> torch.Tensor:
                out = F.fold(x.transpose(1, 2), (1, n + hop * (f - 1)), (1, n), stride=(1, hop))
                return out.view(b, -1)

            signal, env = fold(pieces), fold(envelope)
        else:  # n = r x hop: r shifted adds, far cheaper than fold on a CPU
            r = n // hop
            signal = pieces.new_zeros(b, f + r - 1, hop)
            env = pieces.new_zeros(b, f + r - 1, hop)
            w2 = (window**2).view(r, hop)
            for j, part in enumerate(pieces.view(b, f, r, hop).unbind(2)):
                signal[:, j : j + f] += part
                env[:, j : j + f] += frames.unsqueeze(-1) * w2[j]
            signal, env = signal.view(b, -1), env.view(b, -1)
        return torch.where(env > 1e-11, signal / env.clamp(min=1e-11), 0.0)


class ISTFTHead(nn.Module):
    def __init__(self, cfg: VocosConfig):
        super().__init__()
        self.out = nn.Linear(cfg.dim, cfg.n_fft + 2)
        self.istft = ISTFT(cfg.n_fft, cfg.hop_length)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.istft(self.spectrum(x), mask)

    def spectrum(self, x: torch.Tensor) -> torch.Tensor:
        """(B, F, dim) -> complex (B, n_fft/2 + 1, F)."""
        mag, phase = self.out(x).transpose(1, 2).float().chunk(2, dim=1)
        # exp then clip: the vocoder's guard against huge magnitudes (random weights hit it often)
        mag = torch.clip(torch.exp(mag), max=1e2)
        return torch.polar(mag, phase)


class Vocos(nn.Module):
    def __init__(self, cfg: VocosConfig):
        super().__init__()
        self.backbone = VocosBackbone(cfg)
        self.head = ISTFTHead(cfg)

    def forward(self, mel: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """mel (B, 100, F) -> (B, (F - 1) x hop); with `mask` (B, 1, F) each row is cut at its
        own length, as if decoded alone (samples past a row's end are zero)."""
        return self.head(self.backbone(mel, mask), mask)
