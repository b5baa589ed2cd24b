"""DSSM and CDSSM: letter-trigram semantic models scored by the cosine of two text vectors.

Papers:
    Huang, He, Gao, Deng, Acero, Heck, "Learning Deep Structured Semantic Models for Web Search
    using Clickthrough Data", CIKM 2013 (https://doi.org/10.1145/2505515.2505665).
    Shen, He, Gao, Deng, Mesnil, "A Latent Semantic Model with Convolutional-Pooling Structure for
    Information Retrieval", CIKM 2014 (https://doi.org/10.1145/2661829.2661935), and "Learning
    Semantic Representations Using Convolutional Neural Networks for Web Search", WWW 2014.
    Baselines of the aMV-LSTM paper (§2.1, §4.2, Table 3: WikiQA MAP DSSM .560, CDSSM .435);
    docs/models.md, DSSM and CDSSM.

Inputs: letter trigrams by default (`attnmatch.inputs.trigrams`): each word is hashed into
letter trigrams, and batches carry `left_ids` (B, L, K) and `right_ids` (B, R, K), trigram ids in
1..V-1, 0 on padding. f_t is word t's trigram count vector (the sum of its trigrams' one-hots,
size V). The trigram inputs' token encoder gives W f_t per word, so DSSM and CDSSM are "trigram
inputs + their tower"; like every model they can read other inputs too (e.g. word vectors).

Summary:
- `dssm`: x = sum_t f_t, the text's bag of letter trigrams -> l_1 = tanh(W_1 x + b_1) (300) ->
  l_2 = tanh(W_2 l_1 + b_2) (300) -> y = tanh(W_3 l_2 + b_3) (128) -> score cos(y_a, y_b).
- `cdssm`: word-n-gram layer l_t = [f_{t-1}; f_t; f_{t+1}] (window 3) -> convolution
  h_t = tanh(W_c l_t + b_c) (300 filters) -> max pooling v = max_t h_t over the real words ->
  semantic layer y = tanh(W_s v + b_s) (128) -> score cos(y_a, y_b).
The same tower maps both texts (weights shared).

Sparse first layers, never materialising a count vector (tests/models/test_dssm.py checks both
against the dense matmuls):
- DSSM: W_1 x = sum_t W_1 f_t, and W_1 f_t is the sum of W_1's columns of word t's trigrams:
  the trigram token encoder's embedding bag (`F.embedding_bag(mode="sum", padding_idx=0)`) over
  the (B*T, K) word bags with the table W_1^T (V, 300), then a sum over the words, plus b_1.
- CDSSM: W_c = [W_1, ..., W_w] in blocks of V columns, so W_c l_t = sum_k W_k f_{t+k-c}
  (c = (w - 1) / 2). ONE embedding bag with a table of width w * filters (the token encoder, whose
  `dim` must be window * filters) gives every [W_1 f_s; ...; W_w f_s] per word s; shifting block k
  by k - c positions and adding gives W_c l_t for all t.

Deviations from the papers / decisions:
- Word hashing: CRC-32 buckets (the trigram inputs' `buckets`, default 30001: 30000 ids +
  padding, about DSSM's 30K trigram vocabulary) instead of an indexed trigram vocabulary (see
  data/trigrams.py).
- Towers shared between the two texts (a Siamese model). The papers draw one network for the
  query and the documents without saying whether their weights are tied; MatchZoo's Keras DSSM
  applies one MLP to both sides (MatchZoo-py keeps two).
- CDSSM windows are "same" windows centred on each real word, with zero vectors outside the text
  (where the paper pads the word sequence at both ends), so a text of n words has n windows, even
  when n < window; `window` must be odd. Padded positions never win the max; a fully padded text
  pools to zeros.
- Biases: DSSM's layers have them (b_i in the paper); CDSSM's convolution and semantic layer get
  one too, although its paper's equations have none.
- Initialisation: weights uniform in +-sqrt(6 / (fan_in + fan_out)) (the DSSM paper's range,
  with fan_in = V, or window * V for the convolution, whose table the model rescales), biases
  zero.
  The padding row of the trigram tables is zero (it is never read).
- Dropout (config.dropout; the papers use none, default 0): DSSM after each hidden layer,
  CDSSM on the max-pooled vector.
- Head: one output -> the cosine itself (B, 1). More outputs (classification, score levels) -> a
  linear map of the cosine to the logits, as MatchZoo's DSSM does; the pair is still judged only
  through the similarity in the semantic space. The cosine of a zero vector is 0.
- The training objective (softmax over the cosines of one clicked and four unclicked documents,
  smoothing factor gamma) is a loss outside the model.

Dims: B batch, L left length, R right length, T either length, K trigrams per word (padded),
V trigram buckets, H hidden/first-layer size, w window, c = (w - 1) / 2, F filters, S output
(semantic) size, C outputs.
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

COSINE_EPS = 1e-8  # the cosine of a zero vector is 0


def _check_common(config: DSSMConfig | CDSSMConfig) -> None:
    check_positive(config, "output_size", "num_outputs")
    check_dropout(config.dropout)


@dataclass(frozen=True, kw_only=True)
class DSSMConfig:
    """Args:
    encoder: the input layer; with letter-trigram inputs (the paper's, and the default) each
        word's vector is W_1 f_t, so the input layer is DSSM's first layer (its size H_1 is
        the inputs' `dim`, paper: 300).
    hidden_sizes: sizes of the tanh hidden layers after the first (paper: 300); () maps the
        first layer straight to the output layer.
    output_size: S, the semantic vector size (paper: 128).
    dropout: dropout after each hidden layer (paper: none).
    num_outputs: 1 for the cosine score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    hidden_sizes: tuple[int, ...] = (300,)
    output_size: int = 128
    dropout: float = 0.0
    num_outputs: int = 1

    def __post_init__(self) -> None:
        _check_common(self)
        if any(size < 1 for size in self.hidden_sizes):
            raise ValueError(f"hidden_sizes must all be >= 1, got {self.hidden_sizes}")


@dataclass(frozen=True, kw_only=True)
class CDSSMConfig:
    """Args:
    encoder: the input layer; with letter-trigram inputs (the paper's, and the default) it
        holds the convolution's per-word blocks [W_1 f_t; ...; W_w f_t], so its `dim` must be
        window * filters (paper: 3 * 300).
    window: w, words per word-n-gram window, odd (paper: 3).
    filters: F, convolution feature maps (paper: 300).
    output_size: S, the semantic layer size (paper: 128).
    dropout: dropout on the max-pooled vector (paper: none).
    num_outputs: 1 for the cosine score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    window: int = 3
    filters: int = 300
    output_size: int = 128
    dropout: float = 0.0
    num_outputs: int = 1

    def __post_init__(self) -> None:
        _check_common(self)
        if self.window < 1 or self.window % 2 == 0:
            raise ValueError(
                f"window must be a positive odd number (windows centred on each word), "
                f"got {self.window}"
            )
        check_positive(self, "filters")
        if self.encoder.embedding_dim != self.window * self.filters:
            raise ValueError(
                f"CDSSM's input layer holds one block of `filters` per window position: the "
                f"inputs' dim must be window * filters = {self.window * self.filters}, got "
                f"{self.encoder.embedding_dim}"
            )


def _linear(size_in: int, size_out: int) -> nn.Linear:
    layer = nn.Linear(size_in, size_out)
    nn.init.xavier_uniform_(layer.weight)  # +-sqrt(6 / (fan_in + fan_out))
    nn.init.zeros_(layer.bias)
    return layer


class TrigramConv(nn.Module):
    """CDSSM's convolution before the tanh: W_c l_t + b_c for every real word t, with
    l_t = [f_{t-c}; ...; f_{t+c}] and f_s = 0 outside the text ("same" windows).

    The input layer gives each word's blocks [W_1 f_t; ...; W_w f_t] (B, T, w F) (with trigram
    inputs, its table is [W_1^T | ... | W_w^T], (V, w F)); this module shifts and sums them.

    Shape:
        words: (B, T, w F), 0 on padding -> (B, T, F) (padded positions hold junk: mask them)
    """

    def __init__(self, window: int, filters: int) -> None:
        super().__init__()
        self.window, self.filters = window, filters
        self.bias = nn.Parameter(torch.zeros(filters))  # (F,)

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        b, t, _ = words.shape
        w, c = self.window, (self.window - 1) // 2
        words = words.reshape(b, t, w, self.filters)  # (B, T, w, F): W_k f_s in [:, s, k]
        words = F.pad(words, (0, 0, 0, 0, c, c))  # (B, T + 2c, w, F), zero words outside
        out = self.bias.expand(b, t, self.filters)  # (B, T, F)
        for k in range(w):  # W_k f_{t+k-c}; position s sits at s + c after the padding
            out = out + words[:, k : k + t, k]  # (B, T, F)
        return out


class CosineHead(nn.Module):
    """cos(a, b) as the score (one output), or a linear map of it to `num_outputs` logits.

    Shape:
        a: (B, S), b: (B, S) -> (B, C)
    """

    def __init__(self, num_outputs: int) -> None:
        super().__init__()
        self.output = nn.Linear(1, num_outputs) if num_outputs > 1 else None

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = F.normalize(a, dim=-1, eps=COSINE_EPS)  # (B, S)
        b = F.normalize(b, dim=-1, eps=COSINE_EPS)  # (B, S)
        cosine = (a * b).sum(dim=-1, keepdim=True)  # (B, 1)
        return cosine if self.output is None else self.output(cosine)  # (B, C)


class _Towers(nn.Module):
    """DSSM and CDSSM: one semantic vector per text from the same `tower`, then `head`."""

    head: CosineHead

    def tower(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The semantic vector y of each text. Shape: (B, T[, K]), (B, T) -> (B, S)"""
        raise NotImplementedError

    def encode(self, batch: PairBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """One semantic vector per text, (B, S) each, from the same tower."""
        left = self.tower(batch.left_ids, batch.left_mask)
        return left, self.tower(batch.right_ids, batch.right_mask)

    def forward(self, batch: PairBatch) -> torch.Tensor:
        left, right = self.encode(batch)  # (B, S), (B, S)
        return self.head(left, right)  # (B, C)


@register_model(
    "dssm",
    config=DSSMConfig,
    paper="Huang et al. CIKM 2013",
    default_inputs={"kind": "trigrams", "dim": 300},
)
class DSSM(_Towers):
    """DSSM (Huang et al. 2013): trigram bag -> tanh MLP -> cosine. Returns (B, num_outputs).

    The first layer is W_1 x + b_1 with x = sum_t f_t: the input layer gives W_1 f_t per word
    (trigram inputs), summed over the real words here.
    """

    def __init__(self, config: DSSMConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)  # W_1 f_t per word
        sizes = [config.encoder.embedding_dim, *config.hidden_sizes, config.output_size]
        self.bias = nn.Parameter(torch.zeros(sizes[0]))  # (H_1,), b_1
        self.layers = nn.ModuleList(
            _linear(size_in, size_out) for size_in, size_out in zip(sizes, sizes[1:], strict=False)
        )
        self.dropout = nn.Dropout(config.dropout)
        self.head = CosineHead(config.num_outputs)

    def tower(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        words = self.token_encoder(ids, mask)  # (B, T, H_1), 0 on padding
        h = torch.tanh(words.sum(dim=1) + self.bias)  # (B, H_1), l_1 = tanh(W_1 x + b_1)
        for layer in self.layers:
            h = torch.tanh(layer(self.dropout(h)))  # (B, H_i), the last (B, S)
        return h


@register_model(
    "cdssm",
    config=CDSSMConfig,
    paper="Shen et al. CIKM 2014",
    default_inputs={"kind": "trigrams", "dim": 900},
)
class CDSSM(_Towers):
    """CDSSM (Shen et al. 2014): trigram word-n-gram convolution -> max pooling -> tanh semantic
    layer -> cosine. Returns (B, num_outputs).

    The input layer holds the convolution's per-word blocks (trigram inputs: W_k f_t); its
    initial values are rescaled to the convolution's fans (fan_in w V, fan_out F).
    """

    def __init__(self, config: CDSSMConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)  # [W_1 f_t; ...; W_w f_t]
        # Xavier over the convolution's fans (a trigram table; pretrained inputs keep theirs).
        fan_in = config.window * config.encoder.vocab_size
        self.token_encoder.rescale_init(fan_in, config.filters)  # type: ignore[operator]
        self.conv = TrigramConv(config.window, config.filters)
        self.dropout = nn.Dropout(config.dropout)
        self.semantic = _linear(config.filters, config.output_size)
        self.head = CosineHead(config.num_outputs)

    def tower(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        words = self.token_encoder(ids, mask)  # (B, T, w F), 0 on padding
        h = torch.tanh(self.conv(words))  # (B, T, F)
        v = masked_max(h, mask.unsqueeze(-1), dim=1)  # (B, F), over the real words only
        return torch.tanh(self.semantic(self.dropout(v)))  # (B, S)
