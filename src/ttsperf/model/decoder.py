"""Mel decoders: `Decoder` (GPT hidden states -> mel, the default path) and `DVAE` (codes -> mel).

Both are the official DVAE module shape: a ConvNeXt stack, a 3-tap output conv to 100 mel bins and
a per-bin scale `coef`. Parameter names follow the official checkpoints (`Decoder.safetensors`,
`DVAE.safetensors`) so those files load unchanged. The DVAE's encoder half exists only so a real
checkpoint loads whole and the parameter count is honest; ttsperf never encodes audio.
"""

from __future__ import annotations

import torch
from torch import nn

from ttsperf.model.config import ConvStackConfig, ModelConfig, VQConfig

N_MELS = 100


class ConvNeXtBlock(nn.Module):
    """Depthwise conv -> LayerNorm -> MLP -> layer scale, residual (B, C, T)."""

    def __init__(self, dim: int, intermediate_dim: int, kernel: int, dilation: int):
        super().__init__()
        self.dwconv = nn.Conv1d(
            dim, dim, kernel_size=kernel, padding=dilation * (kernel // 2), dilation=dilation, groups=dim
        )
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(intermediate_dim, dim)
        self.weight = nn.Parameter(torch.full((dim,), 1e-6))  # layer scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).transpose(1, 2)
        y = self.pwconv2(self.act(self.pwconv1(self.norm(y)))) * self.weight
        return x + y.transpose(1, 2)


def _masker(mask: torch.Tensor | None):
    return (lambda t: t) if mask is None else (lambda t: t * mask)


class ConvStack(nn.Module):
    """The official `DVAEDecoder`: in-projection through a bottleneck, ConvNeXt blocks, 1x1 out."""

    def __init__(self, cfg: ConvStackConfig):
        super().__init__()
        self.conv_in = nn.Sequential(
            nn.Conv1d(cfg.idim, cfg.bn_dim, 3, 1, 1), nn.GELU(), nn.Conv1d(cfg.bn_dim, cfg.hidden, 3, 1, 1)
        )
        self.decoder_block = nn.ModuleList(
            ConvNeXtBlock(cfg.hidden, cfg.hidden * 4, cfg.kernel, cfg.dilation) for _ in range(cfg.n_layer)
        )
        self.conv_out = nn.Conv1d(cfg.hidden, cfg.odim, kernel_size=1, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, C, T). `mask` (B, 1, T), 1 on each row's frames and 0 on the padding after them:
        every input to a wide conv is zeroed there, so a padded row computes what it computes
        alone (a conv's own zero padding at its end), and rows of any length share one call."""
        keep = _masker(mask)
        conv1, act, conv2 = self.conv_in
        y = conv2(keep(act(conv1(keep(x)))))
        for block in self.decoder_block:
            y = block(keep(y))
        return self.conv_out(y)

    @property
    def receptive_half_width(self) -> int:
        """Frames of context each side that one output frame depends on (for streaming seams)."""
        width = 1 + 1  # two 3-tap convs in conv_in
        for block in self.decoder_block:
            width += block.dwconv.dilation[0] * (block.dwconv.kernel_size[0] // 2)
        return width


class _ResidualFSQDecode(nn.Module):
    """Decode half of one group of a grouped residual FSQ: indices -> vector.

    Each index packs one digit per level (base = the level count, first level least significant);
    a digit d of a level with L values is the code 2d/(L-1) - 1; residual r is scaled by L**-r and
    the sum is projected back to the group's width. Only `project_out` is used; `project_in` is
    kept so checkpoints load whole.
    """

    def __init__(self, dim: int, levels: tuple[int, ...], residuals: int):
        super().__init__()
        self.project_in = nn.Linear(dim, len(levels))
        self.project_out = nn.Linear(len(levels), dim)
        lv = torch.tensor(levels, dtype=torch.long)
        basis = torch.cumprod(torch.tensor((1, *levels[:-1]), dtype=torch.long), dim=0)
        scales = torch.stack([lv.float() ** -r for r in range(residuals)])  # (R, D)
        self.register_buffer("levels", lv, persistent=False)
        self.register_buffer("basis", basis, persistent=False)
        self.register_buffer("scales", scales, persistent=False)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        # indices: (B, T, R) -> digits (B, T, R, D) -> codes in [-1, 1]
        digits = (indices.long().unsqueeze(-1) // self.basis) % self.levels
        codes = digits.to(self.scales.dtype) * (2.0 / (self.levels - 1)) - 1.0
        summed = (codes * self.scales).sum(dim=2)
        return self.project_out(summed.to(self.project_out.weight.dtype))


class _GroupedFSQ(nn.Module):
    def __init__(self, cfg: VQConfig):
        super().__init__()
        self.rvqs = nn.ModuleList(
            _ResidualFSQDecode(cfg.dim // cfg.groups, cfg.levels, cfg.residuals) for _ in range(cfg.groups)
        )


class _VQLayer(nn.Module):
    def __init__(self, cfg: VQConfig):
        super().__init__()
        self.groups, self.residuals = cfg.groups, cfg.residuals
        self.quantizer = _GroupedFSQ(cfg)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """codes (B, num_vq, T), num_vq = groups x residuals -> features (B, dim, T)."""
        b, _, t = codes.shape
        per_group = codes.transpose(1, 2).reshape(b, t, self.groups, self.residuals)
        feats = [rvq(per_group[:, :, g]) for g, rvq in enumerate(self.quantizer.rvqs)]
        return torch.cat(feats, dim=-1).transpose(1, 2)


class MelDecoder(nn.Module):
    """(B, C, T) step features -> (B, 100, 2T) mel. Subclasses choose what the features are."""

    def __init__(self, stack: ConvStackConfig):
        super().__init__()
        self.register_buffer("coef", torch.ones(1, N_MELS, 1))
        self.decoder = ConvStack(stack)
        self.out_conv = nn.Conv1d(stack.idim, N_MELS, 3, 1, 1, bias=False)

    def features_to_mel(self, feats: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`mask` (B, 1, 2T): per mel frame, as ConvStack.forward takes it."""
        # Each step's C channels are two frames of C/2: frame 2t is the first half, 2t+1 the second.
        b, c, t = feats.shape
        frames = feats.view(b, 2, c // 2, t).permute(0, 2, 3, 1).reshape(b, c // 2, 2 * t)
        return self.out_conv(_masker(mask)(self.decoder(frames, mask))) * self.coef


class Decoder(MelDecoder):
    """GPT last hidden states (B, hidden, T) -> mel (B, 100, 2T): the official default path."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg.decoder)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.features_to_mel(hidden, mask)


class DVAE(MelDecoder):
    """Codes (B, num_vq, T) -> mel (B, 100, 2T) through the grouped residual FSQ codebook."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg.dvae_decoder)
        enc = cfg.dvae_encoder
        self.downsample_conv = nn.Sequential(
            nn.Conv1d(N_MELS, enc.idim, 3, 1, 1), nn.GELU(), nn.Conv1d(enc.idim, enc.idim, 4, 2, 1), nn.GELU()
        )
        self.encoder = ConvStack(enc)
        self.vq_layer = _VQLayer(cfg.vq)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        return self.features_to_mel(self.vq_layer(codes))
