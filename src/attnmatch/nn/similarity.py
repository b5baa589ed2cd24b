"""Vector similarities that score a pair from one vector per side.

- cosine(x, y).
- GESD, geometric mean of Euclidean and sigmoid dot (Feng et al., ASRU 2015, eq. (10) of the
  IARNN paper): 1 / (1 + ||x - y||) * 1 / (1 + exp(-gamma (x . y + c))).
- AESD, their arithmetic mean: 0.5 / (1 + ||x - y||) + 0.5 / (1 + exp(-gamma (x . y + c))).
gamma = 1 and c = 1 are the defaults of Feng et al.'s and Tan et al.'s released code.

Dims: B batch, D vector size.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

SimilarityKind = Literal["cosine", "gesd", "aesd"]
SIMILARITIES: tuple[str, ...] = ("cosine", "gesd", "aesd")


def euclidean_distance(x: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """||x - y|| over axis `dim` (the last by default), differentiable at x == y.

    Shape:
        x, y: (..., D) -> (...)
    """
    # sqrt has an infinite derivative at 0 (x == y): add a tiny epsilon under the root.
    return ((x - y).pow(2).sum(dim=dim) + 1e-12).sqrt()


def _euclid_and_sigmoid_dot(
    x: torch.Tensor, y: torch.Tensor, gamma: float, c: float
) -> tuple[torch.Tensor, torch.Tensor]:
    euclid = 1.0 / (1.0 + euclidean_distance(x, y))  # (B,)
    sig_dot = torch.sigmoid(gamma * ((x * y).sum(dim=-1) + c))  # (B,)
    return euclid, sig_dot


def similarity(
    kind: SimilarityKind, x: torch.Tensor, y: torch.Tensor, *, gamma: float = 1.0, c: float = 1.0
) -> torch.Tensor:
    """`kind` similarity of each row pair.

    Shape:
        x: (B, D), y: (B, D) -> (B,)
    """
    if kind == "cosine":
        return F.cosine_similarity(x, y, dim=-1, eps=1e-8)  # (B,)
    if kind not in ("gesd", "aesd"):
        raise ValueError(f"unknown similarity {kind!r}; choose one of {', '.join(SIMILARITIES)}")
    euclid, sig_dot = _euclid_and_sigmoid_dot(x, y, gamma, c)
    if kind == "gesd":
        return euclid * sig_dot  # (B,)
    return 0.5 * euclid + 0.5 * sig_dot  # (B,)
