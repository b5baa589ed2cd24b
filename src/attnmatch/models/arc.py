"""ARC-I and ARC-II: convolutional architectures for matching sentences.

Paper:
    Hu, Lu, Li, Chen, "Convolutional Neural Network Architectures for Matching Natural Language
    Sentences", NIPS 2014 (https://arxiv.org/abs/1503.03244). Baselines of the aMV-LSTM paper
    (§2.1, §4.2, Table 3: WikiQA MAP ARC-I .588, ARC-II .561); docs/models.md, ARC-I and ARC-II.

Summary:
- `arc_i` (representation-based): each text alone -> `num_layers` 1-D convolutions over word
  windows of `kernel_size` words (ReLU), with 2-max pooling between layers -> max over time -> one
  vector per text (the two towers share their weights) -> MLP on [v_a; v_b] -> outputs.
- `arc_ii` (interaction-based): layer 1 scores every pair of windows,
  z_ij = ReLU(W [a_{i:i+k}; b_{j:j+k}] + bias), a (B, F, L', R') grid -> 2x2 max pooling ->
  `num_conv2d` x (3x3 convolution, ReLU, 2x2 max pooling) -> adaptive max pooling to a
  `pool_size` x `pool_size` grid -> flatten -> MLP -> outputs.

ARC-II layer 1, efficiently: W [a_win; b_win] = W_a a_win + W_b b_win, with W = [W_a, W_b] split
by the concatenation. So z_ij = ReLU(conv_a(a)_i + conv_b(b)_j + bias): two 1-D convolutions,
broadcast-added into the grid (O(L + R) window products instead of O(L R)). The two halves are
the paper's one linear map, so W_a and W_b are distinct parameters (conv_a holds the bias).
tests/models/test_arc.py checks this against the literal concatenated windows.

Masking (padding never changes a real output; texts are right-padded, so a mask is a prefix and
each example's valid region is tracked as counts: valid windows/rows/columns):
- word vectors beyond a text's length are zeroed; a text shorter than the kernel is zero-padded to
  `kernel_size` words, so it gives one window; a text of n words gives max(n - k + 1, 1) windows;
- before every max pooling, invalid cells are set to -inf, so padding never wins a max; a pooled
  cell is valid if any of its inputs is (counts become ceil(n / 2)); invalid pooled cells are then
  set to zero, which is what the zero border of the unpadded input would be for the next
  convolution (ARC-II's 3x3 "same" convolutions included);
- ARC-II's adaptive max pooling is computed over each example's valid region only
  (`nn.pooling.dynamic_max_pool2d`, shared with MatchPyramid: exactly `F.adaptive_max_pool2d`
  applied to the cropped valid region, vectorised; cells repeat when n < P).

Deviations from the paper / decisions:
- The aMV-LSTM paper only says its baselines use "the configuration of the best result
  published in the corresponding paper". Defaults: 3-word
  windows, ReLU everywhere and 2-max pooling (the ARC paper); 2 convolution layers for ARC-I;
  64 feature maps; MatchZoo-style rest (dropout 0.0, MLP with 128 hidden units).
- Convolutions over words are "narrow" (valid windows only, as in the paper's layer-1 equation);
  the paper's fixed-length zero padding with a gate g(.) that zeroes all-padding windows is
  replaced by the masking above, so any length works.
- ARC-I ends with a max over time (the paper and MatchZoo flatten a fixed-length map).
- ARC-II's 2-D convolutions are 3x3 with zero "same" padding (MatchZoo-py's choice; the paper's
  are narrow), so short texts keep a non-empty grid; every convolution has `filters` maps.
- ARC-II ends with an adaptive max pooling to `pool_size` x `pool_size` (ours), so the MLP's
  input size does not depend on the lengths.
- MLP (both): dropout -> Linear(D, h) -> ReLU -> dropout -> Linear(h, C); the single output is the
  ranking score for num_outputs = 1.
- Initialisation: PyTorch's defaults.

Dims: B batch, L left length, R right length, T either length, E embedding size, k kernel size,
F filters, L' and R' window counts, P pool size, h MLP hidden size, C outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model
from attnmatch.nn.masking import masked_max
from attnmatch.nn.pooling import dynamic_max_pool2d

POOL = 2  # the paper's max pooling between layers: size 2 (1-D) and 2x2 (2-D), stride = size
CONV2D_SIZE = 3  # ARC-II's 2-D convolutions: 3x3 (the paper's 3-word windows)


@dataclass(frozen=True, kw_only=True)
class ARCIConfig:
    """Args:
    encoder: the token encoder (input layer).
    filters: F, feature maps of every convolution layer.
    kernel_size: k, words per window (paper: 3).
    num_layers: convolution layers, with 2-max pooling between them (paper: 2).
    mlp_hidden: h, hidden units of the MLP.
    dropout: dropout on the MLP's input and hidden layer.
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    filters: int = 64
    kernel_size: int = 3
    num_layers: int = 2
    mlp_hidden: int = 128
    dropout: float = 0.0
    num_outputs: int = 1

    def __post_init__(self) -> None:
        check_positive(self, "filters", "kernel_size", "num_layers", "mlp_hidden", "num_outputs")
        check_dropout(self.dropout)


@dataclass(frozen=True, kw_only=True)
class ARCIIConfig:
    """Args:
    encoder: the token encoder (input layer).
    filters: F, feature maps of layer 1 and of every 2-D convolution.
    kernel_size: k, words per window of each text in layer 1 (paper: k1 = k2 = 3).
    num_conv2d: 3x3 convolutions (each with 2x2 max pooling) after layer 1; 0 is allowed.
    pool_size: P, the final adaptive max pooling gives a P x P grid per feature map.
    mlp_hidden: h, hidden units of the MLP.
    dropout: dropout on the MLP's input and hidden layer.
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    filters: int = 64
    kernel_size: int = 3
    num_conv2d: int = 1
    pool_size: int = 4
    mlp_hidden: int = 128
    dropout: float = 0.0
    num_outputs: int = 1

    def __post_init__(self) -> None:
        check_positive(self, "filters", "kernel_size", "pool_size", "mlp_hidden", "num_outputs")
        check_dropout(self.dropout)
        if self.num_conv2d < 0:
            raise ValueError(f"num_conv2d must be >= 0, got {self.num_conv2d}")


def prefix_mask(counts: torch.Tensor, size: int) -> torch.Tensor:
    """True on the first counts[b] of `size` positions.

    Shape:
        counts: (B,) long -> (B, size) bool
    """
    return torch.arange(size, device=counts.device) < counts.unsqueeze(-1)


def window_counts(counts: torch.Tensor, k: int) -> torch.Tensor:
    """Valid windows of k words in texts of `counts` words: max(n - k + 1, 1) (a text shorter
    than k is zero-padded to k words).

    Shape:
        counts: (B,) -> (B,)
    """
    return (counts - k + 1).clamp(min=1)


def narrow_conv1d(
    conv: nn.Module, k: int, x: torch.Tensor, counts: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """ReLU(conv) over the windows of k positions (`conv`: a Conv1d of kernel size k, no
    padding); a sequence shorter than k is zero-padded to k (one window). `x` must be zero beyond
    each example's `counts`.

    Shape:
        x: (B, D, T), counts: (B,) -> (B, F, max(T, k) - k + 1) and the valid windows (B,)
    """
    if x.shape[-1] < k:
        x = F.pad(x, (0, k - x.shape[-1]))  # (B, D, k)
    return torch.relu(conv(x)), window_counts(counts, k)


def masked_max_pool1d(x: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-overlapping max pooling of size POOL over the first `counts` positions only.

    A pooled position is valid if any of its inputs is (counts -> ceil(counts / POOL)); invalid
    pooled positions are zero.

    Shape:
        x: (B, F, T), counts: (B,) -> (B, F, ceil(T / POOL)), (B,)
    """
    x = x.masked_fill(~prefix_mask(counts, x.shape[-1]).unsqueeze(1), float("-inf"))
    x = F.pad(x, (0, -x.shape[-1] % POOL), value=float("-inf"))  # (B, F, POOL * ceil(T / POOL))
    x = F.max_pool1d(x, POOL)  # (B, F, ceil(T / POOL))
    counts = (counts + POOL - 1) // POOL
    return x.masked_fill(~prefix_mask(counts, x.shape[-1]).unsqueeze(1), 0.0), counts


def grid_mask(rows: torch.Tensor, cols: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """True on each example's valid region, its first rows[b] x cols[b] cells.

    Shape:
        rows, cols: (B,) -> (B, 1, height, width) bool
    """
    return (prefix_mask(rows, height).unsqueeze(-1) & prefix_mask(cols, width).unsqueeze(-2))[
        :, None
    ]


def masked_max_pool2d(
    x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Non-overlapping POOL x POOL max pooling over each example's valid region only.

    Shape:
        x: (B, F, H, W), rows, cols: (B,) -> (B, F, ceil(H / POOL), ceil(W / POOL)), (B,), (B,)
    """
    height, width = x.shape[-2:]
    x = x.masked_fill(~grid_mask(rows, cols, height, width), float("-inf"))
    x = F.pad(x, (0, -width % POOL, 0, -height % POOL), value=float("-inf"))
    x = F.max_pool2d(x, POOL)  # (B, F, ceil(H / POOL), ceil(W / POOL))
    rows, cols = (rows + POOL - 1) // POOL, (cols + POOL - 1) // POOL
    return x.masked_fill(~grid_mask(rows, cols, *x.shape[-2:]), 0.0), rows, cols


def _mlp(input_size: int, hidden: int, num_outputs: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(
        nn.Dropout(dropout),
        nn.Linear(input_size, hidden),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, num_outputs),
    )


class ConvTower(nn.Module):
    """ARC-I's sentence model: narrow ReLU convolutions with 2-max pooling between them, then a
    max over the valid positions.

    Shape:
        x: (B, T, E), mask: (B, T) -> (B, F)
    """

    def __init__(self, input_size: int, filters: int, kernel_size: int, num_layers: int) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.convs = nn.ModuleList(
            nn.Conv1d(input_size if i == 0 else filters, filters, kernel_size)
            for i in range(num_layers)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        counts = mask.sum(dim=-1)  # (B,) words per text (masks are prefixes)
        h = (x * mask.unsqueeze(-1)).transpose(1, 2)  # (B, E, T), zero beyond the text
        for i, conv in enumerate(self.convs):
            if i > 0:
                h, counts = masked_max_pool1d(h, counts)  # (B, F, ceil(T' / 2))
            h, counts = narrow_conv1d(conv, self.kernel_size, h, counts)  # (B, F, T')
        return masked_max(h, prefix_mask(counts, h.shape[-1]).unsqueeze(1), dim=-1)  # (B, F)


class PairwiseWindowConv(nn.Module):
    """ARC-II layer 1: z_ij = ReLU(W [a_{i:i+k}; b_{j:j+k}] + bias) for every pair of windows,
    computed as ReLU(conv_a(a)_i + conv_b(b)_j) (W = [W_a, W_b]; conv_a carries the bias).
    Texts shorter than k are zero-padded to k words (one window).

    Shape:
        a: (B, E, L), b: (B, E, R) (zero beyond their counts) -> (B, F, L', R')
    """

    def __init__(self, input_size: int, filters: int, kernel_size: int) -> None:
        super().__init__()
        self.left = nn.Conv1d(input_size, filters, kernel_size)
        self.right = nn.Conv1d(input_size, filters, kernel_size, bias=False)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        k = self.left.kernel_size[0]
        a = F.pad(a, (0, max(k - a.shape[-1], 0)))  # (B, E, max(L, k))
        b = F.pad(b, (0, max(k - b.shape[-1], 0)))  # (B, E, max(R, k))
        za, zb = self.left(a), self.right(b)  # (B, F, L'), (B, F, R')
        return torch.relu(za.unsqueeze(-1) + zb.unsqueeze(-2))  # (B, F, L', R')


@register_model("arc_i", config=ARCIConfig, paper="Hu et al. NIPS 2014")
class ARCI(nn.Module):
    """ARC-I: one convolutional tower (shared by both texts) makes a vector per text; an MLP on
    [v_a; v_b] scores the pair. Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: ARCIConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        self.tower = ConvTower(
            config.encoder.output_dim, config.filters, config.kernel_size, config.num_layers
        )
        self.mlp = _mlp(2 * config.filters, config.mlp_hidden, config.num_outputs, config.dropout)

    def encode(self, batch: PairBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """One vector per text, (B, F) each, from the same tower."""
        left = self.token_encoder(batch.left_ids, batch.left_mask)  # (B, L, E)
        right = self.token_encoder(batch.right_ids, batch.right_mask)  # (B, R, E)
        return self.tower(left, batch.left_mask), self.tower(right, batch.right_mask)

    def forward(self, batch: PairBatch) -> torch.Tensor:
        left, right = self.encode(batch)  # (B, F), (B, F)
        return self.mlp(torch.cat([left, right], dim=-1))  # (B, C)


@register_model("arc_ii", config=ARCIIConfig, paper="Hu et al. NIPS 2014")
class ARCII(nn.Module):
    """ARC-II: a 2-D grid of pairwise window features, 2-D convolutions and max pooling over it,
    then an MLP. Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: ARCIIConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        f = config.filters
        self.layer1 = PairwiseWindowConv(config.encoder.output_dim, f, config.kernel_size)
        self.convs = nn.ModuleList(
            nn.Conv2d(f, f, CONV2D_SIZE, padding=CONV2D_SIZE // 2) for _ in range(config.num_conv2d)
        )
        self.pool_size = config.pool_size
        self.mlp = _mlp(
            f * config.pool_size**2, config.mlp_hidden, config.num_outputs, config.dropout
        )

    def features(self, batch: PairBatch) -> torch.Tensor:
        """The pooled grid of the last layer, (B, F, P, P)."""
        lmask, rmask = batch.left_mask, batch.right_mask
        left = self.token_encoder(batch.left_ids, lmask) * lmask.unsqueeze(-1)  # (B, L, E)
        right = self.token_encoder(batch.right_ids, rmask) * rmask.unsqueeze(-1)  # (B, R, E)
        rows = window_counts(lmask.sum(dim=-1), self.config.kernel_size)  # (B,) left windows
        cols = window_counts(rmask.sum(dim=-1), self.config.kernel_size)  # (B,) right windows
        z = self.layer1(left.transpose(1, 2), right.transpose(1, 2))  # (B, F, L', R')
        z, rows, cols = masked_max_pool2d(z, rows, cols)  # (B, F, ceil(L'/2), ceil(R'/2))
        for conv in self.convs:
            z = torch.relu(conv(z))  # (B, F, H, W); zero cells outside = the zero border
            z, rows, cols = masked_max_pool2d(z, rows, cols)  # (B, F, ceil(H/2), ceil(W/2))
        size = (self.pool_size, self.pool_size)
        return dynamic_max_pool2d(z, rows, cols, size)  # (B, F, P, P)

    def forward(self, batch: PairBatch) -> torch.Tensor:
        z = self.features(batch)  # (B, F, P, P)
        return self.mlp(z.flatten(start_dim=1))  # (B, C)
