"""ESIM: the enhanced sequential inference model.

Paper:
    Chen, Zhu, Ling, Wei, Jiang, Inkpen, "Enhanced LSTM for Natural Language Inference",
    ACL 2017 (https://arxiv.org/abs/1609.06038). See docs/models.md, ESIM.

Summary: word vectors -> shared BiLSTM (input encoding, §3.1) -> soft alignment of each token to
the other text and the enhancement m = [x; x~; x - x~; x * x~] (local inference, §3.2) -> ReLU
projection F and a second shared BiLSTM (inference composition, §3.3) -> [mean; max] pooling of
each side -> MLP with one tanh hidden layer -> logits.

Local inference (`soft_align`): e_ij = a_i . b_j over the encoder states;
a~_i = sum_j softmax_j(e_ij) b_j over the real tokens of b, b~_j = sum_i softmax_i(e_ij) a_i over
the real tokens of a (`nn.coattention.alignment_pool`).

Deviations from the paper / decisions:
- Only the sequential model (ESIM); the tree-LSTM variant and the hybrid (HIM) are not built.
- The paper does not give the output size of F; we use h, so the composition BiLSTM reads h
  inputs and has h units per direction, like the encoder.
- Dropout (config.dropout, the paper's 0.5 "on all feedforward connections") after F and before
  both layers of the MLP. Dropout on the word vectors is the token encoder's `dropout`.
- The paper fine-tunes its GloVe vectors; here `encoder.trainable` decides (the project keeps
  word vectors fixed by default).
- Masking: the softmaxes run over the other text's real tokens only; a padded token's aligned
  vector is zero; pooling reads real positions only; a text with no real token pools to zeros.
- Ranking (one output): the MLP's single output is the score (the paper only classifies).
- Initialisation: PyTorch's defaults. Adam, learning rate 4e-4 and batch size 32 (§4) are
  training settings, not part of the model.

Dims: B batch, L left length, R right length, E embedding size, h hidden size (BiLSTM units per
direction, F's output size, MLP hidden size), C outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model
from attnmatch.nn.coattention import alignment_pool, enhance
from attnmatch.nn.masking import masked_max, masked_mean
from attnmatch.nn.recurrent import BiRNN, encode_pair


@dataclass(frozen=True, kw_only=True)
class ESIMConfig:
    """Args:
    encoder: the token encoder (input layer).
    hidden_size: h, the BiLSTMs' units per direction, F's output size and the MLP's hidden
        units (paper: 300).
    dropout: dropout rate after F and inside the MLP (paper: 0.5).
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    hidden_size: int = 300
    dropout: float = 0.5
    num_outputs: int = 1

    def __post_init__(self) -> None:
        check_positive(self, "hidden_size", "num_outputs")
        check_dropout(self.dropout)


def soft_align(
    a: torch.Tensor, a_mask: torch.Tensor, b: torch.Tensor, b_mask: torch.Tensor
) -> dict[str, torch.Tensor]:
    """ESIM's local inference (§3.2): e = a b^T and each side softly aligned to the other.

    Args:
        a, b: the two texts' encoder states.
        a_mask, b_mask: True on real tokens.

    Returns:
        "affinity" e; "left_aligned" a~ (a~_i = sum_j softmax_j(e_ij) b_j, over real j);
        "right_aligned" b~ (b~_j = sum_i softmax_i(e_ij) a_i, over real i); "left_weights"
        (softmax over j) and "right_weights" (softmax over i), zero on every padded cell.

    Shape:
        a: (B, L, D), a_mask: (B, L), b: (B, R, D), b_mask: (B, R) -> "affinity",
        "left_weights", "right_weights" (B, L, R); "left_aligned" (B, L, D);
        "right_aligned" (B, R, D)
    """
    e = a @ b.transpose(1, 2)  # (B, L, R)
    return {"affinity": e, **alignment_pool(e, a, a_mask, b, b_mask)}


def mean_max_pool(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[mean; max] over the real positions (§3.3); zeros for a text with no real token.

    Shape:
        x: (B, T, D), mask: (B, T) -> (B, 2D)
    """
    cells = mask.unsqueeze(-1)  # (B, T, 1)
    return torch.cat([masked_mean(x, cells, dim=1), masked_max(x, cells, dim=1)], dim=-1)


@register_model(
    "esim",
    config=ESIMConfig,
    paper="Chen et al. ACL 2017",
    explains=True,
)
class ESIM(nn.Module):
    """Enhanced sequential inference model. Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: ESIMConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        h = config.hidden_size
        self.input_rnn = BiRNN("lstm", config.encoder.output_dim, h)
        self.projection = nn.Sequential(
            nn.Linear(8 * h, h), nn.ReLU(), nn.Dropout(config.dropout)
        )  # F
        self.composition_rnn = BiRNN("lstm", h, h)
        self.mlp = nn.Sequential(
            nn.Dropout(config.dropout),
            nn.Linear(8 * h, h),
            nn.Tanh(),
            nn.Dropout(config.dropout),
            nn.Linear(h, config.num_outputs),
        )

    def _encode(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        lmask, rmask = batch.left_mask, batch.right_mask
        left = self.token_encoder(batch.left_ids, lmask)  # (B, L, E)
        right = self.token_encoder(batch.right_ids, rmask)  # (B, R, E)
        a_bar, b_bar = encode_pair(self.input_rnn, left, lmask, right, rmask)  # (B, L|R, 2h)
        out = soft_align(a_bar, lmask, b_bar, rmask)
        m_a = enhance(a_bar, out["left_aligned"])  # (B, L, 8h)
        m_b = enhance(b_bar, out["right_aligned"])  # (B, R, 8h)
        v_a, v_b = encode_pair(
            self.composition_rnn, self.projection(m_a), lmask, self.projection(m_b), rmask
        )  # (B, L, 2h), (B, R, 2h)
        out["features"] = torch.cat(
            [mean_max_pool(v_a, lmask), mean_max_pool(v_b, rmask)], dim=-1
        )  # (B, 8h)
        return out

    def forward(self, batch: PairBatch) -> torch.Tensor:
        return self.mlp(self._encode(batch)["features"])  # (B, C)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """For plots: "affinity" e (B, L, R), "left_weights" (softmax over right tokens) and
        "right_weights" (softmax over left tokens), each (B, L, R)."""
        out = self._encode(batch)
        return {k: out[k] for k in ("affinity", "left_weights", "right_weights")}
