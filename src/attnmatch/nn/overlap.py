"""Exact-match features any model can add: how much of the left text the right text repeats.

Answer-selection models have long appended word-overlap counts to their learned score (Yu et
al. 2014 and Severyn & Moschitti 2015 add the count and the IDF-weighted count of shared words;
aNMM and MatchPyramid build on exact-match signals). `WithOverlapFeatures` adds, to any model's
outputs, a linear function of three such features computed from the pair's token ids:

- the fraction of the left text's tokens that occur in the right text;
- the same fraction weighted by IDF (BM25's idf, from the training split's texts);
- log(1 + the number of left tokens that occur in the right text).

The linear layer starts at zero, so the wrapped model starts exactly as it would without the
features, and learns how much lexical evidence to add. Token ids must be one id per token (word
vectors, sub-word pieces); letter-trigram inputs are refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from torch import nn

from attnmatch.data.schema import PairBatch

NUM_FEATURES = 3


def idf_table(texts: Iterable[np.ndarray]) -> torch.Tensor:
    """BM25's idf of every id of `texts` (each text an id array; a document each):
    ln(1 + (N - df + 0.5) / (df + 0.5)). Entry i is the idf of id i (ids never seen: df 0).

    Shape: -> (max id + 1,) float32
    """
    docs = [np.unique(np.asarray(t).reshape(-1)) for t in texts]
    size = max((int(d.max()) + 1 for d in docs if d.size), default=1)
    df = np.zeros(size, dtype=np.float64)
    for d in docs:
        df[d] += 1
    n = len(docs)
    return torch.from_numpy(np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32))


class OverlapFeatures(nn.Module):
    """The three exact-match features of each pair (module docstring).

    Shape:
        left_ids (B, L), left_mask (B, L), right_ids (B, R), right_mask (B, R) -> (B, 3)
    """

    idf: torch.Tensor  # (V,) a buffer

    def __init__(self, idf: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("idf", idf.float())  # (V,)

    def forward(
        self,
        left_ids: torch.Tensor,
        left_mask: torch.Tensor,
        right_ids: torch.Tensor,
        right_mask: torch.Tensor,
    ) -> torch.Tensor:
        if left_ids.dim() != 2 or right_ids.dim() != 2:
            raise ValueError(
                "overlap features need one id per token (word vectors or sub-word pieces), "
                "not letter trigrams"
            )
        same = left_ids[:, :, None] == right_ids[:, None, :]  # (B, L, R)
        same = same & right_mask[:, None, :]
        found = same.any(dim=-1) & left_mask  # (B, L)
        size = self.idf.shape[0]
        # Ids beyond the table (words the training texts never held) weigh as the rarest: its
        # largest idf, read from the buffer, so that a loaded model weighs them as trained.
        unseen = self.idf.max() if size else torch.tensor(math.log(2.0), device=self.idf.device)
        if size:
            idf = torch.where(
                left_ids < size, self.idf[left_ids.clamp(max=size - 1)], unseen
            )  # (B, L)
        else:
            idf = unseen.expand(left_ids.shape)  # (B, L)
        idf = idf * left_mask
        count = found.sum(dim=-1).float()  # (B,)
        tokens = left_mask.sum(dim=-1).clamp(min=1).float()  # (B,)
        weighted = (idf * found).sum(dim=-1) / idf.sum(dim=-1).clamp(min=1e-6)  # (B,)
        return torch.stack([count / tokens, weighted, torch.log1p(count)], dim=-1)  # (B, 3)


class WithOverlapFeatures(nn.Module):
    """`model`'s outputs plus a linear function of the pair's overlap features.

    Args:
        model: any registered model (its `token_encoder` and `config` stay reachable through
            the wrapper; `attnmatch.models.contract` reads its capabilities through it).
        num_outputs: the model's output size.
        idf: the idf table (`idf_table` of the training texts' ids).

    Shape:
        batch -> (B, num_outputs)
    """

    features: OverlapFeatures

    def __init__(self, model: nn.Module, num_outputs: int, idf: torch.Tensor) -> None:
        super().__init__()
        self.inner = model
        self.features = OverlapFeatures(idf)
        self.head = nn.Linear(NUM_FEATURES, num_outputs)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @property
    def token_encoder(self) -> nn.Module:
        return self.inner.token_encoder  # type: ignore[return-value]

    @property
    def config(self) -> Any:
        return self.inner.config

    @property
    def idf_size(self) -> int:
        return int(self.features.idf.shape[0])

    def forward(self, batch: PairBatch) -> torch.Tensor:
        features = self.features(
            batch.left_ids, batch.left_mask, batch.right_ids, batch.right_mask
        )  # (B, 3)
        return self.inner(batch) + self.head(features)  # (B, num_outputs)
