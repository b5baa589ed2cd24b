"""Decomposable attention: attend, compare, aggregate.

Paper:
    Parikh, Täckström, Das, Uszkoreit, "A Decomposable Attention Model for Natural Language
    Inference", EMNLP 2016 (https://aclanthology.org/D16-1244).

Summary: word vectors -> linear projection without bias (a, b; the paper: 300d GloVe -> 200)
-> optional intra-sentence attention (§3.4, a_bar = [a; a']) -> attend (§3.1: e_ij =
F(a_bar_i)^T F(b_bar_j), soft alignments beta_i and alpha_j) -> compare (§3.2: v1_i =
G([a_bar_i; beta_i]), v2_j = G([b_bar_j; alpha_j])) -> aggregate (§3.3: masked sums v1, v2, then
H([v1; v2]) and a linear layer to the outputs). No recurrence, no word order except through the
intra-attention distance bias.

Intra-sentence attention (§3.4): f_ij = F_intra(a_i)^T F_intra(a_j) + d_{i-j},
a'_i = sum_j softmax_j(f_ij) a_j over the real tokens j (i = j included), a_bar_i = [a_i; a'_i].

Deviations from the paper / decisions:
- Distance bias buckets: the paper only says that "all distances greater than 10 words share a
  common bias". We keep the sign of i - j and clip it to [-max_distance, max_distance]
  (max_distance = 10: 21 learned scalars, bucket index i - j + 10 after clipping), so the bias
  can tell a word before from a word after. The biases start at zero.
- F, G, H and F_intra are 2-layer ReLU networks with `hidden_size` units in both layers and
  dropout (config.dropout; the paper's 0.2) on the input of each of their linear layers; H is
  followed by a linear layer to `num_outputs` (the paper's final classifier; no dropout there).
  No dropout on the projected word vectors (the token encoder has its own).
- The projection has no bias, so padded (zero) word vectors stay zero; aggregation sums G's
  outputs over real tokens only (the paper's sum, not a mean).
- One score per pair for ranking is H's single output (num_outputs = 1); the paper only does
  3-way classification (SNLI).
- Initialisation: PyTorch's defaults, not the paper's N(0, 0.01).
- `max_distance` is only used with `intra_attention=True`.

Dims: B batch, L left length, R right length, T either length, E embedding size, h hidden size,
D attend input size (h, or 2h with intra-attention), C outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.coattention import alignment_pool
from attnmatch.nn.masking import masked_softmax


@dataclass(frozen=True, kw_only=True)
class DecomposableAttentionConfig:
    """Args:
    encoder: the token encoder (input layer).
    hidden_size: h, the projection size and the units of every layer of F, G, H and F_intra
        (paper: 200).
    intra_attention: intra-sentence attention before attending (§3.4).
    max_distance: distances |i - j| above it share the bias of max_distance (sign kept, so
        2 * max_distance + 1 buckets; paper: 10). Only used with intra_attention.
    dropout: dropout on the input of each layer of F, G, H and F_intra (paper: 0.2).
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    hidden_size: int = 200
    intra_attention: bool = False
    max_distance: int = 10
    dropout: float = 0.2
    num_outputs: int = 1

    def __post_init__(self) -> None:
        check_positive(self, "hidden_size", "num_outputs")
        if self.max_distance < 0:
            raise ValueError(f"max_distance must be >= 0, got {self.max_distance}")
        check_dropout(self.dropout)


def feed_forward(input_size: int, hidden_size: int, dropout: float) -> nn.Sequential:
    """The paper's F, G, H: two ReLU layers, dropout on the input of each.

    Shape:
        (..., input_size) -> (..., hidden_size)
    """
    return nn.Sequential(
        nn.Dropout(dropout),
        nn.Linear(input_size, hidden_size),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden_size, hidden_size),
        nn.ReLU(),
    )


def distance_buckets(
    length: int, max_distance: int, device: torch.device | None = None
) -> torch.Tensor:
    """Bias bucket of every (i, j): clip(i - j, -max_distance, max_distance) + max_distance.

    Returns:
        (T, T) long, values in [0, 2 * max_distance]; the diagonal is bucket max_distance.
    """
    pos = torch.arange(length, device=device)  # (T,)
    distance = pos.unsqueeze(1) - pos.unsqueeze(0)  # (T, T), i - j
    return distance.clamp(-max_distance, max_distance) + max_distance


def attend(
    left_features: torch.Tensor,
    right_features: torch.Tensor,
    left: torch.Tensor,
    left_mask: torch.Tensor,
    right: torch.Tensor,
    right_mask: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """§3.1: e_ij = F(a_i)^T F(b_j); beta_i = sum_j softmax_j(e_ij) b_j over real j,
    alpha_j = sum_i softmax_i(e_ij) a_i over real i.

    Args:
        left_features, right_features: F(a), F(b).
        left, right: the vectors that are averaged, a_bar and b_bar.
        left_mask, right_mask: True on real tokens.

    Returns:
        "scores" e, "beta" (the right text aligned to each left token), "alpha" (the left text
        aligned to each right token), "left_weights" (softmax over j), "right_weights" (softmax
        over i). Weights are exactly zero on padded cells; rows of padded tokens are zero.

    Shape:
        left_features: (B, L, h), right_features: (B, R, h), left: (B, L, D), right: (B, R, D),
        masks (B, L), (B, R) -> scores and weights (B, L, R), beta (B, L, D), alpha (B, R, D)
    """
    scores = left_features @ right_features.transpose(1, 2)  # (B, L, R)
    pooled = alignment_pool(scores, left, left_mask, right, right_mask)
    return {
        "scores": scores,
        "beta": pooled["left_aligned"],  # (B, L, D)
        "alpha": pooled["right_aligned"],  # (B, R, D)
        "left_weights": pooled["left_weights"],  # (B, L, R)
        "right_weights": pooled["right_weights"],  # (B, L, R)
    }


class IntraSentenceAttention(nn.Module):
    """§3.4: a'_i = sum_j softmax_j(F_intra(a_i)^T F_intra(a_j) + d_{i-j}) a_j; output [a; a'].

    Shape:
        x: (B, T, h), mask: (B, T) -> (B, T, 2h) and the weights (B, T, T)
    """

    def __init__(self, size: int, hidden_size: int, max_distance: int, dropout: float) -> None:
        super().__init__()
        self.max_distance = max_distance
        self.ffn = feed_forward(size, hidden_size, dropout)
        self.distance_bias = nn.Parameter(torch.zeros(2 * max_distance + 1))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.ffn(x)  # (B, T, h)
        buckets = distance_buckets(x.shape[1], self.max_distance, x.device)  # (T, T)
        scores = f @ f.transpose(1, 2) + self.distance_bias[buckets]  # (B, T, T)
        cells = mask.unsqueeze(-1) & mask.unsqueeze(-2)  # (B, T, T)
        weights = masked_softmax(scores, cells, dim=-1)  # (B, T, T), zero rows on padding
        return torch.cat([x, weights @ x], dim=-1), weights  # (B, T, 2h)


@register_model(
    "decomposable_attention",
    config=DecomposableAttentionConfig,
    paper="Parikh et al. EMNLP 2016",
    explains=True,
)
class DecomposableAttention(nn.Module):
    """Decomposable attention (Parikh et al. 2016). Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: DecomposableAttentionConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        h = config.hidden_size
        self.projection = nn.Linear(config.encoder.output_dim, h, bias=False)
        self.intra: IntraSentenceAttention | None = None
        max_distance = config.max_distance  # read even without intra-attention: config contract
        if config.intra_attention:
            self.intra = IntraSentenceAttention(h, h, max_distance, config.dropout)
        dim = 2 * h if config.intra_attention else h  # D
        self.attend_ffn = feed_forward(dim, h, config.dropout)  # F
        self.compare_ffn = feed_forward(2 * dim, h, config.dropout)  # G
        self.aggregate_ffn = feed_forward(2 * h, h, config.dropout)  # H
        self.output = nn.Linear(h, config.num_outputs)

    def _forward(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        lmask, rmask = batch.left_mask, batch.right_mask
        a = self.projection(self.token_encoder(batch.left_ids, lmask))  # (B, L, h), 0 on padding
        b = self.projection(self.token_encoder(batch.right_ids, rmask))  # (B, R, h)
        out: dict[str, torch.Tensor] = {}
        if self.intra is not None:
            a, out["left_intra"] = self.intra(a, lmask)  # (B, L, 2h)
            b, out["right_intra"] = self.intra(b, rmask)  # (B, R, 2h)
        att = attend(self.attend_ffn(a), self.attend_ffn(b), a, lmask, b, rmask)
        v1 = self.compare_ffn(torch.cat([a, att["beta"]], dim=-1))  # (B, L, h)
        v2 = self.compare_ffn(torch.cat([b, att["alpha"]], dim=-1))  # (B, R, h)
        v1 = (v1 * lmask.unsqueeze(-1)).sum(dim=1)  # (B, h), real tokens only
        v2 = (v2 * rmask.unsqueeze(-1)).sum(dim=1)  # (B, h)
        out["logits"] = self.output(self.aggregate_ffn(torch.cat([v1, v2], dim=-1)))  # (B, C)
        out["scores"] = att["scores"]
        out["left_weights"], out["right_weights"] = att["left_weights"], att["right_weights"]
        return out

    def forward(self, batch: PairBatch) -> torch.Tensor:
        return self._forward(batch)["logits"]  # (B, C)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """For plots: "scores" e (B, L, R); "left_weights" (softmax over right tokens) and
        "right_weights" (softmax over left tokens), (B, L, R) each; with intra-attention
        "left_intra" (B, L, L) and "right_intra" (B, R, R).
        """
        out = self._forward(batch)
        del out["logits"]
        return out


def _preset(name: str, description: str, **overrides: object) -> None:
    register_preset(
        name, model="decomposable_attention", overrides=dict(overrides), description=description
    )


_preset(
    "decomposable_attention",
    "Decomposable attention (Parikh et al. 2016), vanilla: attend, compare, aggregate",
    intra_attention=False,
)
_preset(
    "decomposable_attention_intra",
    "Decomposable attention (Parikh et al. 2016) with intra-sentence attention (§3.4)",
    intra_attention=True,
)
