"""Prediction heads that score a pair from one vector per side.

Used by HCRN (Tay et al. 2018, §3.5) and the siamese and attentive-pooling baselines:
- ranking: a similarity of a and b (cosine; GESD or AESD, see `nn/similarity.py`), trained
  with a pairwise hinge;
- classification (and regression over score levels): [a; b] -> 2-layer ReLU MLP (h units each)
  -> linear layer to `num_outputs` logits.
`head="auto"` picks cosine for one output and the MLP otherwise, which is what HCRN does.

Dims: B batch, D vector size, C outputs.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from attnmatch.nn.similarity import similarity

HeadKind = Literal["auto", "cosine", "gesd", "aesd", "mlp"]


def resolve_head(kind: HeadKind, num_outputs: int) -> Literal["cosine", "gesd", "aesd", "mlp"]:
    """The concrete head for `kind`; raises if a similarity is asked for more than one output."""
    if kind == "auto":
        return "cosine" if num_outputs == 1 else "mlp"
    if kind != "mlp" and num_outputs != 1:
        raise ValueError(
            f"head={kind!r} gives one score per pair, but num_outputs={num_outputs}: "
            "use head='mlp' (or 'auto') for classification and score-level regression"
        )
    return kind


class PairHead(nn.Module):
    """Args:
        kind: "auto", "cosine", "gesd", "aesd" or "mlp" (see the module docstring).
        dim: D, the size of each side's vector.
        hidden: h, units of each of the MLP's two hidden layers.
        num_outputs: C.
        dropout: dropout on the MLP's input and hidden layers (not used by the similarities).

    Shape:
        a: (B, D), b: (B, D) -> (B, C)
    """

    def __init__(
        self, kind: HeadKind, dim: int, hidden: int, num_outputs: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.kind = resolve_head(kind, num_outputs)
        self.mlp: nn.Sequential | None = None
        if self.kind == "mlp":
            self.mlp = nn.Sequential(
                nn.Dropout(dropout),
                nn.Linear(2 * dim, hidden),
                nn.ReLU(),
                nn.Dropout(dropout),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Dropout(dropout),
                nn.Linear(hidden, num_outputs),
            )

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.mlp is None:
            return similarity(self.kind, a, b).unsqueeze(-1)  # type: ignore[arg-type]  # (B, 1)
        return self.mlp(torch.cat([a, b], dim=-1))  # (B, C)
