"""The token-encoder modules of the table kinds (torch): a word-vector table, letter-trigram
bags and a sub-word table. Their `Inputs` classes (`word_vectors`, `trigrams`, `wordpiece`,
`static`) name them (`Inputs.encoder_cls`) and import this module only when a model is built,
so that tokenizing and encoding need no torch (`attnmatch.runtime`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.inputs import TokenEncoderConfig


class WordVectorEncoder(nn.Module):
    """A word-vector table; the `<pad>` row is zero.

    The table is `embedding`, the fitted vocabulary's rows (trained when `trainable`), followed
    by `pretrained`, a buffer of `config.pretrained_rows` rows (the words added from the
    pretrained file), never trained: a fine-tuned model moves the vectors of the words it was
    trained on and keeps the pretrained vectors of the others. The buffer starts at zero (no
    random draws, so the rest of a model is initialised as without it) and is filled by
    `load_pretrained`; without pretrained rows the module is exactly an `nn.Embedding`.

    Shape:
        ids: (B, L) long, mask: (B, L) bool -> (B, L, E), zero on padding.
    """

    pretrained: torch.Tensor | None

    def __init__(self, config: TokenEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.fitted_rows = config.vocab_size - config.pretrained_rows
        self.embedding = nn.Embedding(self.fitted_rows, config.embedding_dim, padding_idx=0)
        self.embedding.weight.requires_grad_(config.trainable)
        pretrained = torch.zeros(config.pretrained_rows, config.embedding_dim)  # (P, E)
        self.register_buffer("pretrained", pretrained if config.pretrained_rows else None)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.pretrained is None:
            vectors = self.embedding(ids)  # (B, L, E)
        elif ids.device.type == "cpu":
            # The added words' rows written over the fitted lookup: two passes over the
            # vectors instead of four (`where` of two full lookups), same values.
            added = ids >= self.fitted_rows  # (B, L)
            vectors = self.embedding(ids.masked_fill(added, 0))  # (B, L, E); <pad>: no gradient
            rows = ids[added] - self.fitted_rows  # (A,)
            vectors = vectors.index_put_((added,), F.embedding(rows, self.pretrained))
        else:  # no host synchronisation (the number of added words) on an accelerator
            added = ids >= self.fitted_rows  # (B, L)
            fitted = self.embedding(ids.masked_fill(added, 0))  # (B, L, E); <pad>: no gradient
            rows = (ids - self.fitted_rows).clamp_min(0)  # (B, L)
            vectors = torch.where(added.unsqueeze(-1), F.embedding(rows, self.pretrained), fitted)
        return self.dropout(vectors).mul_(mask.unsqueeze(-1))

    def rescale_init(self, fan_in: int, fan_out: int) -> None:
        """A no-op: the initial values are the word vectors', not a random table to scale to a
        model's first-layer fans (`TrigramEncoder.rescale_init`)."""

    @torch.no_grad()
    def load_pretrained(self, matrix: np.ndarray | torch.Tensor) -> None:
        """Copies an aligned (vocab_size, E) matrix into the table (and its pretrained rows)."""
        weight = torch.as_tensor(np.asarray(matrix), dtype=self.embedding.weight.dtype)
        expected = (self.config.vocab_size, self.config.embedding_dim)
        if tuple(weight.shape) != expected:
            raise ValueError(
                f"pretrained matrix has shape {tuple(weight.shape)}, expected {expected} "
                f"(vocab_size, embedding_dim)"
            )
        self.embedding.weight.copy_(weight[: self.fitted_rows])
        if self.pretrained is not None:
            self.pretrained.copy_(weight[self.fitted_rows :])


def word_trigram_sums(table: torch.Tensor, trigrams: torch.Tensor) -> torch.Tensor:
    """table^T f_t for each word's trigram count vector f_t: the sum of the table rows of the
    word's trigrams (padding id 0 adds nothing), an embedding bag per word.

    Shape:
        table: (V, D), trigrams: (B, T, K) -> (B, T, D)
    """
    b, t, k = trigrams.shape
    sums = F.embedding_bag(trigrams.reshape(b * t, k), table, mode="sum", padding_idx=0)  # (B*T, D)
    return sums.reshape(b, t, -1)


class TrigramEncoder(nn.Module):
    """Word vectors from letter-trigram bags: W^T f_t per word.

    The table is initialised uniformly in +-sqrt(6 / (V + E)) (Xavier, as DSSM's first layer;
    a model whose first layer has other fans rescales it with `rescale_init`); its padding row
    is zero and never read.

    Shape:
        ids: (B, L, K) trigram ids, mask: (B, L) bool -> (B, L, E), zero on padding.
    """

    def __init__(self, config: TokenEncoderConfig) -> None:
        super().__init__()
        self.config = config
        v, e = config.vocab_size, config.embedding_dim
        self.bound = math.sqrt(6.0 / (v + e))
        table = torch.empty(v, e).uniform_(-self.bound, self.bound)  # (V, E)
        table[0] = 0.0  # padding: never read
        self.table = nn.Parameter(table, requires_grad=config.trainable)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if ids.dim() != 3 or ids.shape[:2] != mask.shape:
            raise ValueError(
                f"trigram inputs need (B, L, K) trigram ids aligned with the (B, L) mask "
                f"{tuple(mask.shape)}, got shape {tuple(ids.shape)}"
            )
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.table.shape[0]):
            raise ValueError(
                f"trigram ids outside 0..{self.table.shape[0] - 1}: the texts were not hashed "
                f"into this table's {self.table.shape[0]} buckets"
            )
        words = word_trigram_sums(self.table, ids)  # (B, L, E)
        return self.dropout(words) * mask.unsqueeze(-1)

    @torch.no_grad()
    def rescale_init(self, fan_in: int, fan_out: int) -> None:
        """Rescales the initial table to +-sqrt(6 / (fan_in + fan_out)) (a model whose first
        layer is this table with other fans, e.g. CDSSM's convolution)."""
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        self.table.mul_(bound / self.bound)
        self.bound = bound


class WordPieceEncoder(nn.Module):
    """A sub-word vector table (an `nn.Embedding`).

    Shape:
        ids: (B, L) long, mask: (B, L) bool -> (B, L, E), zero on padding.
    """

    def __init__(self, config: TokenEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim)
        self.embedding.weight.requires_grad_(config.trainable)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        vectors = self.embedding(ids.masked_fill(~mask, 0))  # (B, L, E)
        return self.dropout(vectors) * mask.unsqueeze(-1)  # (B, L, E)

    def rescale_init(self, fan_in: int, fan_out: int) -> None:
        """A no-op: the initial values are the encoder's table, not a random one to scale."""

    @torch.no_grad()
    def load_table(self, table: torch.Tensor) -> None:
        """Copies a (vocab_size, E) table into the embedding."""
        expected = tuple(self.embedding.weight.shape)
        if tuple(table.shape) != expected:
            raise ValueError(
                f"the sub-word table has shape {tuple(table.shape)}, expected {expected}"
            )
        self.embedding.weight.copy_(table.to(self.embedding.weight.dtype))
