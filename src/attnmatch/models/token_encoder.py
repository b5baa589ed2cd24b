"""The input layer: token ids + masks -> (B, L, E) vectors.

Models never own a word-embedding table directly; they build a token encoder from
`TokenEncoderConfig`, so a contextual encoder can replace static vectors without touching models.
Only `static` exists today: a vocabulary-sized embedding table, usually filled with pretrained
vectors (GloVe) by `load_pretrained` and kept fixed, as the papers do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True, kw_only=True)
class TokenEncoderConfig:
    """Args:
    kind: "static" (a word-vector table).
    vocab_size: rows of the table, `<pad>` (0) and `<unk>` (1) included.
    embedding_dim: E.
    trainable: fine-tune the vectors (the papers keep them fixed).
    dropout: dropout on the output vectors.
    """

    kind: Literal["static"] = "static"
    vocab_size: int
    embedding_dim: int = 50
    trainable: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (<pad>, <unk>), got {self.vocab_size}")
        if self.embedding_dim < 1:
            raise ValueError(f"embedding_dim must be >= 1, got {self.embedding_dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def output_dim(self) -> int:
        return self.embedding_dim


class StaticTokenEncoder(nn.Module):
    """A word-vector table; the `<pad>` row is zero.

    Shape:
        ids: (B, L) long, mask: (B, L) bool -> (B, L, E), zero on padding.
    """

    def __init__(self, config: TokenEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=0)
        self.embedding.weight.requires_grad_(config.trainable)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        vectors = self.embedding(ids)  # (B, L, E)
        return self.dropout(vectors) * mask.unsqueeze(-1)

    @torch.no_grad()
    def load_pretrained(self, matrix: np.ndarray | torch.Tensor) -> None:
        """Copies an aligned (vocab_size, E) matrix into the table."""
        weight = torch.as_tensor(np.asarray(matrix), dtype=self.embedding.weight.dtype)
        if tuple(weight.shape) != tuple(self.embedding.weight.shape):
            raise ValueError(
                f"pretrained matrix has shape {tuple(weight.shape)}, expected "
                f"{tuple(self.embedding.weight.shape)} (vocab_size, embedding_dim)"
            )
        self.embedding.weight.copy_(weight)


def build_token_encoder(config: TokenEncoderConfig) -> StaticTokenEncoder:
    if config.kind == "static":
        return StaticTokenEncoder(config)
    raise ValueError(f"unknown token encoder kind {config.kind!r}")
