"""Siamese baselines of HCRN: CBOW + MLP, LSTM and CNN.

Paper:
    Tay, Luu, Hui, "Hermitian Co-Attention Networks for Text Matching in Asymmetrical Domains",
    IJCAI 2018, §4.3: "We implement standard baselines such as (1) CBOW (sum embeddings) into a
    2 layer MLP with ReLU activations, (2) standard LSTM and CNN models [...]. We set all LSTM
    dimensions to d = 100 and the number of CNN filters is 100. The CNN filter width is set to 3."

Summary: each side alone -> projection u_i = ReLU(W_p w_i + b) (HCRN eq. 1, shared by both
sides) -> an encoder that makes one vector per side (`cbow_mlp`: sum; `lstm`: shared BiLSTM, then
max or mean pooling over time; `cnn`: width-3 convolution with tanh, then max pooling over time)
-> PairHead (cosine for a ranking score, [a; b] -> 2-layer ReLU MLP for logits).

Deviations from the paper / decisions:
- Every encoder starts with HCRN's projection layer (eq. 1), so the baselines share HCRN's input
  layer, and CBOW has trainable parameters when the word vectors are fixed.
- `cbow_mlp` always scores with the MLP (`head="mlp"` by default, even for a 1-output ranking
  score), as the paper describes it; `lstm` and `cnn` use `head="auto"` (cosine for one output,
  the MLP otherwise), like HCRN.
- `lstm` pools its states with max pooling over real time steps (`pooling="max"`; "mean" is an
  option); the paper does not say how.
- `cnn` uses tanh (the paper names no activation), zero "same" padding ((width - 1) // 2 each
  side, so widths are odd) and zeroes padded positions before convolving, so a sequence's output
  does not depend on the padding after it.
- Dropout (config.dropout, the paper's keep-probability 0.9) after the projection and, with the
  MLP head, on the head's input and hidden layers (the cosine head has no dropout).
- In eval mode each distinct text of a batch is encoded once (a question's candidates share its
  vector; `attnmatch.nn.distinct`): the same outputs up to float rounding. A config's
  `share_encodings=False` encodes every pair's texts.

Dims: B batch, L left length, R right length, T either length, E embedding size, n projection
size (= LSTM units per direction), F CNN filters, D pooled vector size, C outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import torch
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model
from attnmatch.nn.distinct import encode_distinct_pairs
from attnmatch.nn.heads import HeadKind, PairHead, resolve_head
from attnmatch.nn.masking import masked_max, masked_mean
from attnmatch.nn.recurrent import BiRNN, encode_pair

_PAPER = "a baseline of HCRN (Tay et al. IJCAI 2018)"


@dataclass(frozen=True, kw_only=True)
class BaselineConfig:
    """The fields every siamese and attentive-pooling baseline has.

    Args:
    encoder: the token encoder (input layer).
    hidden_size: n, the projection size (and the BiLSTM units per direction; paper d = 2n = 100).
    head: "auto" (cosine for one output, MLP otherwise), "cosine" or "mlp".
    mlp_hidden: h, units of each of the head's two hidden layers.
    dropout: dropout after the projection and on the head's MLP input and hidden layers.
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    hidden_size: int = 50
    head: HeadKind = "auto"
    mlp_hidden: int = 100
    dropout: float = 0.1
    num_outputs: int = 1

    def __post_init__(self) -> None:
        names = ("hidden_size", "mlp_hidden", "num_outputs", "filters", "kernel_size")
        check_positive(self, *(name for name in names if hasattr(self, name)))
        kernel_size = getattr(self, "kernel_size", 1)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd ('same' padding), got {kernel_size}")
        check_dropout(self.dropout)
        resolve_head(self.head, self.num_outputs)  # head='cosine' needs num_outputs=1


_Config = TypeVar("_Config", bound=BaselineConfig)


@dataclass(frozen=True, kw_only=True)
class SiameseConfig(BaselineConfig):
    """BaselineConfig and:
    share_encodings: in eval mode, each distinct text of a batch encoded once; False: every
        pair's own (the same outputs up to float rounding).
    """

    share_encodings: bool = True


@dataclass(frozen=True, kw_only=True)
class CBOWMLPConfig(SiameseConfig):
    """SiameseConfig, with head "mlp" by default (the paper's CBOW + 2-layer MLP)."""

    head: HeadKind = "mlp"


@dataclass(frozen=True, kw_only=True)
class SiameseLSTMConfig(SiameseConfig):
    """SiameseConfig and:
    pooling: "max" (default) or "mean" over the real time steps.
    """

    pooling: Literal["max", "mean"] = "max"


@dataclass(frozen=True, kw_only=True)
class SiameseCNNConfig(SiameseConfig):
    """SiameseConfig and:
    filters: F, convolution filters (paper: 100).
    kernel_size: the filter width, odd (paper: 3).
    """

    filters: int = 100
    kernel_size: int = 3


_SiameseConfigT = TypeVar("_SiameseConfigT", bound=SiameseConfig)


class WordProjection(nn.Module):
    """HCRN eq. 1: u_i = ReLU(W_p w_i + b), then dropout; zero on padding.

    Shape:
        x: (B, T, E), mask: (B, T) -> (B, T, n)
    """

    def __init__(self, input_size: int, size: int, dropout: float) -> None:
        super().__init__()
        self.linear = nn.Linear(input_size, size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        u = self.dropout(torch.relu(self.linear(x)))  # (B, T, n)
        return u * mask.unsqueeze(-1)  # ReLU(b) != 0 on padding: zero it


class ConvEncoder(nn.Module):
    """Per-position features tanh(conv(x)) with zero "same" padding; zero on padding.

    Padded positions are zeroed before the convolution, so the features of a real position equal
    those computed on the unpadded sequence: trailing padding looks like the zero border.

    Shape:
        x: (B, T, n), mask: (B, T) -> (B, T, F)
    """

    def __init__(self, input_size: int, filters: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(input_size, filters, kernel_size, padding=(kernel_size - 1) // 2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask.unsqueeze(-1)  # (B, T, 1)
        x = (x * keep).transpose(1, 2)  # (B, n, T)
        features = torch.tanh(self.conv(x)).transpose(1, 2)  # (B, T, F)
        return features * keep


class ProjectedBaseline(nn.Module, Generic[_Config]):
    """What every siamese and attentive-pooling baseline starts with: the token encoder, then
    HCRN's projection (eq. 1). Subclasses add their encoder, then `head` (`_pair_head`)."""

    def __init__(self, config: _Config) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        self.projection = WordProjection(
            config.encoder.output_dim, config.hidden_size, config.dropout
        )

    def _project(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """A side's projected words, zero on padding: (B, T) -> (B, T, n)."""
        return self.projection(self.token_encoder(ids, mask), mask)  # (B, T, n)

    def _pair_head(self, size: int) -> PairHead:
        """The config's head on two `size`-dim vectors."""
        config = self.config
        return PairHead(config.head, size, config.mlp_hidden, config.num_outputs, config.dropout)


class _Siamese(ProjectedBaseline[_SiameseConfigT]):
    """A siamese baseline: one vector per side, then the head. Subclasses define `_vector` (or
    `_encode_texts`) and `head`."""

    head: PairHead

    def _vector(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """A side's vector from its projected words: (B, T, n), (B, T) -> (B, D)."""
        raise NotImplementedError

    def encode(self, batch: PairBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """One vector per side, (B, D) each: `_encode_texts` on every pair in training; in eval
        mode on each distinct text once, then broadcast to the pairs (the config's
        `share_encodings`; equal up to float rounding)."""
        sides = (batch.left_ids, batch.left_mask, batch.right_ids, batch.right_mask)
        if self.training or not self.config.share_encodings:
            return self._encode_texts(*sides)
        return encode_distinct_pairs(self._encode_texts, *sides)

    def _encode_texts(
        self,
        left_ids: torch.Tensor,
        left_mask: torch.Tensor,
        right_ids: torch.Tensor,
        right_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each side's `_vector`; the sides' row counts may differ (B_l, B_r)."""
        left = self._vector(self._project(left_ids, left_mask), left_mask)  # (B_l, D)
        return left, self._vector(self._project(right_ids, right_mask), right_mask)  # (B_r, D)

    def forward(self, batch: PairBatch) -> torch.Tensor:
        left, right = self.encode(batch)  # (B, D), (B, D)
        return self.head(left, right)  # (B, C)


@register_model("cbow_mlp", config=CBOWMLPConfig, paper=_PAPER)
class CBOWMLP(_Siamese[CBOWMLPConfig]):
    """CBOW: the sum of each side's projected words, scored by a 2-layer ReLU MLP on [a; b]."""

    def __init__(self, config: CBOWMLPConfig) -> None:
        super().__init__(config)
        self.head = self._pair_head(config.hidden_size)

    def _vector(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The masked sum of the side's projected words, (B, n)."""
        return words.sum(dim=1)  # (B, n): padded words are zero


@register_model("lstm", config=SiameseLSTMConfig, paper=_PAPER)
class SiameseLSTM(_Siamese[SiameseLSTMConfig]):
    """A shared BiLSTM over each side's projected words, pooled over time, then the head."""

    def __init__(self, config: SiameseLSTMConfig) -> None:
        super().__init__(config)
        n = config.hidden_size
        self.rnn = BiRNN("lstm", n, n)
        self.head = self._pair_head(2 * n)

    def _encode_texts(
        self,
        left_ids: torch.Tensor,
        left_mask: torch.Tensor,
        right_ids: torch.Tensor,
        right_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each side's BiLSTM states pooled over real steps, (B_l, 2n) and (B_r, 2n)."""
        left = self._project(left_ids, left_mask)  # (B_l, L, n)
        right = self._project(right_ids, right_mask)  # (B_r, R, n)
        left_states, right_states = encode_pair(
            self.rnn, left, left_mask, right, right_mask
        )  # (B_l, L, 2n), (B_r, R, 2n)
        pool = masked_max if self.config.pooling == "max" else masked_mean
        left_vec = pool(left_states, left_mask.unsqueeze(-1), dim=1)  # (B_l, 2n)
        right_vec = pool(right_states, right_mask.unsqueeze(-1), dim=1)  # (B_r, 2n)
        return left_vec, right_vec


@register_model("cnn", config=SiameseCNNConfig, paper=_PAPER)
class SiameseCNN(_Siamese[SiameseCNNConfig]):
    """A shared width-3 tanh CNN over each side's projected words, max-pooled, then the head."""

    def __init__(self, config: SiameseCNNConfig) -> None:
        super().__init__(config)
        self.cnn = ConvEncoder(config.hidden_size, config.filters, config.kernel_size)
        self.head = self._pair_head(config.filters)

    def _vector(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The side's CNN features max-pooled over real positions, (B, F)."""
        features = self.cnn(words, mask)  # (B, T, F)
        return masked_max(features, mask.unsqueeze(-1), dim=1)  # (B, F)
