"""aNMM: attention-based neural matching model.

Paper:
    Yang, Ai, Guo, Croft, "aNMM: Ranking Short Answer Texts with Attention-Based Neural Matching
    Model", CIKM 2016 (https://arxiv.org/abs/1801.01641). A baseline in Table 3 of the
    aMV-LSTM paper (WikiQA MAP .646 there); docs/models.md, aNMM.

Summary: word vectors -> cosine matrix between every question (left) word and every answer
(right) word -> value-shared weighting: each question word's row of cosines is binned by value
and each bin holds the SUM of the signals that fall in it (aNMM-1: x_jk = sum of the matching
signals of question word j in bin k) -> the same small network for every question word,
h_j = tanh(w . x_j + b) -> question attention gate g_j = softmax_j(v . q_j) over the real question
words -> score = sum_j g_j h_j.

Bins (`value_shared_bins`): with K = `bins`, K - 1 equal-width bins cover [-1, 1) and the last bin
holds the exact matches (cosine >= 1 - EXACT_MATCH_TOLERANCE), as in the paper's separate [1, 1]
bin and MatchZoo's binning: bin k < K - 1 covers [-1 + k w, -1 + (k + 1) w) with w = 2 / (K - 1).

Deviations from the paper / decisions:
- Bin inputs are sums of the signals (aNMM-1, and the aMV-LSTM paper's "bin-sum" description), not counts
  as in DRMM's histograms; a padded answer word never counts.
- `bins` defaults to 200 (MatchZoo-py's default); the paper tunes the bin size per dataset.
- Exact matches are found with a tolerance (1e-5) because the float32 cosine of a vector with
  itself is not always exactly 1.0 (MatchZoo's floor-based rule misses them).
- Bin indices are not differentiable; gradients reach the word vectors (when trainable) through
  the summed cosine values only.
- The activation (the paper's delta) is tanh on every value-shared layer, the last included.
  `hidden_sizes=()` is aNMM-1 (one value-shared node per question word); a non-empty tuple adds
  tanh layers of that many nodes first, in the spirit of aNMM-2 (same weights for every question
  word in every layer).
- The gate has no bias (it would cancel in the softmax). A fully padded question scores 0.
- With num_outputs > 1 (classification, score levels) a linear layer maps the score to the
  outputs; with one output the score itself is returned.
- Dropout (config.dropout) on the bin inputs, as MatchZoo; the paper uses none (default 0).
- Initialisation: PyTorch's defaults.

Dims: B batch, L left (question) length, R right (answer) length, E embedding size, K bins,
C outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.masking import masked_softmax

EXACT_MATCH_TOLERANCE = 1e-5


@dataclass(frozen=True, kw_only=True)
class ANMMConfig:
    """Args:
    encoder: the token encoder (input layer; the paper keeps word vectors fixed).
    bins: K, the number of value bins: K - 1 equal-width bins over [-1, 1) plus one exact-match
        bin (>= 2; MatchZoo's default 200).
    hidden_sizes: sizes of extra value-shared tanh layers before the one node per question word
        (() is aNMM-1).
    dropout: dropout on the bin inputs.
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    bins: int = 200
    hidden_sizes: tuple[int, ...] = ()
    dropout: float = 0.0
    num_outputs: int = 1

    def __post_init__(self) -> None:
        if self.bins < 2:
            raise ValueError(
                f"bins must be >= 2 (value bins + the exact-match bin), got {self.bins}"
            )
        if any(size < 1 for size in self.hidden_sizes):
            raise ValueError(f"hidden_sizes must all be >= 1, got {self.hidden_sizes}")
        check_positive(self, "num_outputs")
        check_dropout(self.dropout)


def cosine_matrix(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """Cosine of every left vector with every right vector; 0 for a zero (padded) vector.

    Shape:
        left: (B, L, E), right: (B, R, E) -> (B, L, R)
    """
    left = F.normalize(left, dim=-1, eps=1e-8)  # (B, L, E)
    right = F.normalize(right, dim=-1, eps=1e-8)  # (B, R, E)
    return left @ right.transpose(1, 2)  # (B, L, R)


def value_shared_bins(cos: torch.Tensor, right_mask: torch.Tensor, bins: int) -> torch.Tensor:
    """Bin-sums of each question word's matching signals over the real answer words.

    Bin k < bins - 1 covers [-1 + k w, -1 + (k + 1) w), w = 2 / (bins - 1); the last bin holds
    exact matches (cos >= 1 - EXACT_MATCH_TOLERANCE). Each bin holds the sum of the cosines that
    fall in it; padded answer words add nothing. Differentiable in `cos` (not in the bin choice).

    Args:
        cos: cosines between question and answer words (clamped to [-1, 1] for the bin choice
            only; the sums use the values as given).
        right_mask: True on real answer words.
        bins: K >= 2.

    Returns:
        The bin-sums x_jk.

    Shape:
        cos: (B, L, R), right_mask: (B, R) -> (B, L, K)
    """
    if bins < 2:
        raise ValueError(f"bins must be >= 2, got {bins}")
    with torch.no_grad():
        value = cos.clamp(-1.0, 1.0)  # (B, L, R)
        index = torch.floor((value + 1.0) / 2.0 * (bins - 1)).long().clamp(0, bins - 2)
        index = index.masked_fill(value >= 1.0 - EXACT_MATCH_TOLERANCE, bins - 1)  # (B, L, R)
    signals = cos * right_mask.unsqueeze(1).to(cos.dtype)  # (B, L, R), 0 on padded answer words
    out = cos.new_zeros(*cos.shape[:2], bins)  # (B, L, K)
    return out.scatter_add(-1, index, signals)  # (B, L, K)


@register_model(
    "anmm",
    config=ANMMConfig,
    paper="Yang et al. CIKM 2016",
    explains=True,
)
class ANMM(nn.Module):
    """aNMM (Yang et al. 2016). Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: ANMMConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        self.bins = config.bins
        self.dropout = nn.Dropout(config.dropout)
        layers: list[nn.Module] = []
        sizes = [config.bins, *config.hidden_sizes, 1]
        for size_in, size_out in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(size_in, size_out), nn.Tanh()]
        self.value_shared = nn.Sequential(*layers)  # the same weights for every question word
        self.gate = nn.Linear(config.encoder.output_dim, 1, bias=False)  # v
        self.output = nn.Linear(1, config.num_outputs) if config.num_outputs > 1 else None

    def _forward(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        lmask, rmask = batch.left_mask, batch.right_mask
        q = self.token_encoder(batch.left_ids, lmask)  # (B, L, E), 0 on padding
        a = self.token_encoder(batch.right_ids, rmask)  # (B, R, E)
        cos = cosine_matrix(q, a)  # (B, L, R)
        x = self.dropout(value_shared_bins(cos, rmask, self.bins))  # (B, L, K)
        h = self.value_shared(x).squeeze(-1)  # (B, L)
        g = masked_softmax(self.gate(q).squeeze(-1), lmask, dim=-1)  # (B, L), 0 on padding
        score = (g * h).sum(dim=-1, keepdim=True)  # (B, 1)
        return {"score": score, "cosine": cos, "question_gates": g, "question_values": h}

    def forward(self, batch: PairBatch) -> torch.Tensor:
        score = self._forward(batch)["score"]  # (B, 1)
        return score if self.output is None else self.output(score)  # (B, C)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """For plots: "cosine" (B, L, R); "question_gates" g (B, L), zero on padding;
        "question_values" h (B, L), each question word's value-shared output.
        """
        out = self._forward(batch)
        del out["score"]
        return out


register_preset(
    "anmm",
    model="anmm",
    overrides={"hidden_sizes": []},
    description="aNMM-1 (Yang et al. 2016): cosine bin-sums, value-shared tanh node, question gates",
)
