"""MatchPyramid: text matching as image recognition.

Paper:
    Pang, Lan, Guo, Xu, Wan, Cheng, "Text Matching as Image Recognition", AAAI 2016
    (https://arxiv.org/abs/1602.06359). A baseline in Table 3 of the aMV-LSTM paper (WikiQA
    MAP .644 there); docs/models.md, MatchPyramid.

Summary: word vectors -> matching matrix M_ij = a_i . b_j ("dot") or cos(a_i, b_j) ("cosine")
between every left and every right word -> 2-D convolutions over M seen as a one-channel image
(ReLU) -> dynamic max pooling to a fixed (P1, P2) grid whose cells adapt to each pair's real
lengths -> MLP -> num_outputs.

Dynamic pooling (`nn.pooling.dynamic_max_pool2d`): for a pair with n real left and m real right words, row bin
p of P1 covers rows [floor(p n / P1), ceil((p + 1) n / P1)) and column bin q of P2 covers columns
[floor(q m / P2), ceil((q + 1) m / P2)); the output cell (p, q) is the max of the feature map over
those real cells. This is adaptive max pooling of the real n x m map, per pair, vectorised over
the batch with bin-membership masks (B, P1, L) and (B, P2, R). When a text is shorter than the
grid (n < P1), neighbouring bins repeat the same real rows (every bin covers at least one real
row); a text with no real word pools to zeros.

Deviations from the paper / decisions:
- The paper also has an indicator (exact-match) interaction; we offer "dot" (default, as
  MatchZoo) and "cosine" on the word vectors.
- Convolutions use zero "same" padding (top/left (k - 1) // 2, bottom/right k // 2), and the
  feature map is set to zero on padded cells after every layer, so each layer sees exactly what it
  would see on the unpadded n x m map: padding never changes a real output.
- All convolution layers come first and one dynamic pooling follows (MatchZoo's layout); the
  paper interleaves a max pooling after each convolution, dynamic for the first.
- Defaults (ours, following MatchZoo-py): one 3 x 3 layer of 8 filters, pool grid (3, 10), MLP
  with one ReLU hidden layer of 128 units; dropout (config.dropout, default 0) on the pooled
  features and the MLP hidden layer.
- Initialisation: PyTorch's defaults.

Dims: B batch, L left length, R right length, E embedding size, F filters, P1 x P2 pool grid,
h MLP hidden size, C outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.pooling import dynamic_max_pool2d


@dataclass(frozen=True, kw_only=True)
class MatchPyramidConfig:
    """Args:
    encoder: the token encoder (input layer).
    interaction: "dot" (M_ij = a_i . b_j) or "cosine".
    kernel_sizes: (height, width) of each convolution layer's kernels.
    filters: the number of kernels of each convolution layer (one entry per layer).
    pool_size: (P1, P2), the dynamic pooling grid over (left, right) positions.
    mlp_hidden: h, units of the MLP's ReLU hidden layer.
    dropout: dropout on the pooled features and the MLP hidden layer.
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    interaction: Literal["dot", "cosine"] = "dot"
    kernel_sizes: tuple[tuple[int, int], ...] = ((3, 3),)
    filters: tuple[int, ...] = (8,)
    pool_size: tuple[int, int] = (3, 10)
    mlp_hidden: int = 128
    dropout: float = 0.0
    num_outputs: int = 1

    def __post_init__(self) -> None:
        if not self.filters:
            raise ValueError("filters must list at least one convolution layer")
        if len(self.kernel_sizes) != len(self.filters):
            raise ValueError(
                f"kernel_sizes and filters need one entry per layer, got "
                f"{len(self.kernel_sizes)} kernel sizes and {len(self.filters)} filter counts"
            )
        if any(k < 1 for size in self.kernel_sizes for k in size):
            raise ValueError(f"kernel_sizes must all be >= 1, got {self.kernel_sizes}")
        if any(f < 1 for f in self.filters):
            raise ValueError(f"filters must all be >= 1, got {self.filters}")
        if any(p < 1 for p in self.pool_size):
            raise ValueError(f"pool_size must be >= 1 on both axes, got {self.pool_size}")
        check_positive(self, "mlp_hidden", "num_outputs")
        check_dropout(self.dropout)


def interaction_matrix(
    left: torch.Tensor, right: torch.Tensor, kind: Literal["dot", "cosine"]
) -> torch.Tensor:
    """M_ij = a_i . b_j or cos(a_i, b_j) (0 for a zero, padded vector).

    Shape:
        left: (B, L, E), right: (B, R, E) -> (B, L, R)
    """
    if kind == "cosine":
        left = F.normalize(left, dim=-1, eps=1e-8)  # (B, L, E)
        right = F.normalize(right, dim=-1, eps=1e-8)  # (B, R, E)
    return left @ right.transpose(1, 2)  # (B, L, R)


class MaskedConv2d(nn.Module):
    """Conv2d with zero "same" padding + ReLU, zeroed on padded cells afterwards.

    Shape:
        x: (B, F_in, L, R), cells: (B, 1, L, R) bool -> (B, F_out, L, R)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel: tuple[int, int]) -> None:
        super().__init__()
        kh, kw = kernel
        self.padding = ((kw - 1) // 2, kw // 2, (kh - 1) // 2, kh // 2)  # left, right, top, bottom
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=kernel)

    def forward(self, x: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(F.pad(x, self.padding)))  # (B, F_out, L, R)
        return y * cells.to(y.dtype)  # zero on padding: the next layer sees zero padding there


@register_model(
    "matchpyramid",
    config=MatchPyramidConfig,
    paper="Pang et al. AAAI 2016",
    explains=True,
)
class MatchPyramid(nn.Module):
    """MatchPyramid (Pang et al. 2016). Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: MatchPyramidConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        self.interaction = config.interaction
        self.pool_size = config.pool_size
        channels = [1, *config.filters]
        self.convs = nn.ModuleList(
            MaskedConv2d(c_in, c_out, kernel)
            for c_in, c_out, kernel in zip(
                channels[:-1], channels[1:], config.kernel_sizes, strict=True
            )
        )
        p1, p2 = config.pool_size
        self.mlp = nn.Sequential(
            nn.Dropout(config.dropout),
            nn.Linear(config.filters[-1] * p1 * p2, config.mlp_hidden),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.mlp_hidden, config.num_outputs),
        )

    def _forward(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        lmask, rmask = batch.left_mask, batch.right_mask
        a = self.token_encoder(batch.left_ids, lmask)  # (B, L, E), 0 on padding
        b = self.token_encoder(batch.right_ids, rmask)  # (B, R, E)
        cells = (lmask.unsqueeze(-1) & rmask.unsqueeze(-2)).unsqueeze(1)  # (B, 1, L, R)
        matrix = interaction_matrix(a, b, self.interaction)  # (B, L, R)
        x = matrix.unsqueeze(1) * cells.to(matrix.dtype)  # (B, 1, L, R)
        for conv in self.convs:
            x = conv(x, cells)  # (B, F, L, R)
        pooled = dynamic_max_pool2d(
            x, lmask.sum(-1), rmask.sum(-1), self.pool_size
        )  # (B, F, P1, P2)
        logits = self.mlp(pooled.flatten(start_dim=1))  # (B, C)
        return {"logits": logits, "matrix": matrix, "pooled": pooled}

    def forward(self, batch: PairBatch) -> torch.Tensor:
        return self._forward(batch)["logits"]  # (B, C)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """For plots: "matrix", the matching matrix M (B, L, R); "pooled", the dynamically
        pooled feature maps (B, F, P1, P2).
        """
        out = self._forward(batch)
        del out["logits"]
        return out


def _preset(name: str, description: str, **overrides: object) -> None:
    register_preset(name, model="matchpyramid", overrides=dict(overrides), description=description)


_preset(
    "matchpyramid",
    "MatchPyramid (Pang et al. 2016): dot-product matching matrix, one 3x3 convolution "
    "(8 filters), dynamic pooling to 3x10, MLP",
    interaction="dot",
)
_preset(
    "matchpyramid_cosine",
    "MatchPyramid with the cosine matching matrix",
    interaction="cosine",
)
