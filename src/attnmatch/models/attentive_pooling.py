"""Attentive pooling networks (AP-CNN, AP-LSTM), baselines of HCRN.

Papers:
    dos Santos, Tan, Xiang, Zhou, "Attentive Pooling Networks", arXiv:1602.03609 (2016)
    (https://arxiv.org/abs/1602.03609).
    Tay, Luu, Hui, "Hermitian Co-Attention Networks for Text Matching in Asymmetrical Domains",
    IJCAI 2018, §4.3, where AP-CNN and AP-LSTM are baselines ("All attention models utilize
    extractive max-pooling"; LSTM dimensions d = 100, 100 CNN filters of width 3).

Summary: each side -> projection u_i = ReLU(W_p w_i + b) (HCRN eq. 1) -> a shared encoder giving
per-position vectors Q (B, L, c) and A (B, R, c) (CNN: tanh convolution; LSTM: BiLSTM states)
-> soft alignment G = tanh(Q U A^T) with a learned U (c x c) -> attentive pooling: each left
position weighted by softmax_i(max_j G_ij), each right position by softmax_j(max_i G_ij), over
real positions (`extractive_pool`) -> r_q, r_a -> PairHead (cosine for ranking, as dos Santos et
al.; [r_q; r_a] -> 2-layer ReLU MLP for logits).

Deviations from the paper / decisions:
- The projection layer (HCRN eq. 1) comes before the encoder, as in all of HCRN's baselines;
  dos Santos et al. feed the word vectors (a window of them for the CNN) to the encoder directly.
- The CNN is the `cnn` baseline's (attnmatch.models.siamese.ConvEncoder): width 3, tanh, zero
  "same" padding; dos Santos et al. use a hyperbolic tangent too, over word windows.
- The LSTM is one BiLSTM shared by both sides with n units per direction (c = 2n = 100).
- U is initialised Xavier-uniform (the paper does not say). Padded positions are zero in Q and A,
  so G is zero there, and `extractive_pool` gives them exactly zero weight.
- Dropout (config.dropout) after the projection and, with the MLP head, on the head's input and
  hidden layers. Losses are chosen outside the model (HCRN trains its
  baselines with binary cross-entropy; dos Santos et al. with a pairwise hinge).

Dims: B batch, L left length, R right length, E embedding size, n projection size (= LSTM units
per direction), c encoder output size (F filters or 2n), C outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import nn

from attnmatch.data.schema import PairBatch
from attnmatch.models._registry import register_model
from attnmatch.models.siamese import BaselineConfig, ConvEncoder, ProjectedBaseline
from attnmatch.nn.coattention import extractive_pool
from attnmatch.nn.heads import PairHead
from attnmatch.nn.recurrent import BiRNN, encode_pair


@dataclass(frozen=True, kw_only=True)
class APCNNConfig(BaselineConfig):
    """The `cnn` baseline's fields (attnmatch.models.siamese.SiameseCNNConfig) but
    `share_encodings` (attention joins the two texts); c = filters."""

    filters: int = 100
    kernel_size: int = 3


@dataclass(frozen=True, kw_only=True)
class APLSTMConfig(BaselineConfig):
    """The baseline fields (attnmatch.models.siamese.BaselineConfig); c = 2 * hidden_size."""


_APConfig = TypeVar("_APConfig", APCNNConfig, APLSTMConfig)


class AttentivePooling(nn.Module):
    """G = tanh(Q U A^T), then extractive (max) pooling of Q and A by G (dos Santos et al. §3).

    Shape:
        q: (B, L, c), q_mask: (B, L), a: (B, R, c), a_mask: (B, R)
        -> "affinity" G (B, L, R), "left_pooled" r_q (B, c), "right_pooled" r_a (B, c),
        "left_weights" (B, L), "right_weights" (B, R); weights are zero on padding and sum to 1
        over real positions.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim, dim))  # U
        nn.init.xavier_uniform_(self.weight)

    def forward(
        self, q: torch.Tensor, q_mask: torch.Tensor, a: torch.Tensor, a_mask: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        affinity = torch.tanh(q @ self.weight @ a.transpose(1, 2))  # (B, L, R)
        return {"affinity": affinity, **extractive_pool(affinity, q, q_mask, a, a_mask)}


class _AttentivePoolingMatcher(ProjectedBaseline[_APConfig]):
    """The part AP-CNN and AP-LSTM share: attentive pooling of the encoded sides, then the head.

    Subclasses define `_pool(batch)` (an `AttentivePooling` output) and `head`.
    """

    head: PairHead

    def _pool(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def forward(self, batch: PairBatch) -> torch.Tensor:
        out = self._pool(batch)
        left, right = out["left_pooled"], out["right_pooled"]  # (B, c), (B, c)
        return self.head(left, right)  # (B, C)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """G ("affinity", (B, L, R)) and the pooling weights ((B, L) and (B, R))."""
        out = self._pool(batch)
        return {k: out[k] for k in ("affinity", "left_weights", "right_weights")}


@register_model("ap_cnn", config=APCNNConfig, paper="dos Santos et al. 2016", explains=True)
class APCNN(_AttentivePoolingMatcher[APCNNConfig]):
    """AP-CNN: shared tanh CNN features per position, attentive pooling, then the head."""

    def __init__(self, config: APCNNConfig) -> None:
        super().__init__(config)
        self.cnn = ConvEncoder(config.hidden_size, config.filters, config.kernel_size)
        self.pooling = AttentivePooling(config.filters)
        self.head = self._pair_head(config.filters)

    def _pool(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        sides = []
        for ids, mask in ((batch.left_ids, batch.left_mask), (batch.right_ids, batch.right_mask)):
            sides.append(self.cnn(self._project(ids, mask), mask))  # (B, T, c)
        return self.pooling(sides[0], batch.left_mask, sides[1], batch.right_mask)


@register_model("ap_lstm", config=APLSTMConfig, paper="dos Santos et al. 2016", explains=True)
class APLSTM(_AttentivePoolingMatcher[APLSTMConfig]):
    """AP-LSTM: shared BiLSTM states per position, attentive pooling, then the head."""

    def __init__(self, config: APLSTMConfig) -> None:
        super().__init__(config)
        n = config.hidden_size
        self.rnn = BiRNN("lstm", n, n)
        self.pooling = AttentivePooling(2 * n)
        self.head = self._pair_head(2 * n)

    def _pool(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        left = self._project(batch.left_ids, batch.left_mask)  # (B, L, n)
        right = self._project(batch.right_ids, batch.right_mask)  # (B, R, n)
        q, a = encode_pair(self.rnn, left, batch.left_mask, right, batch.right_mask)
        return self.pooling(q, batch.left_mask, a, batch.right_mask)  # q (B, L, c), a (B, R, c)
