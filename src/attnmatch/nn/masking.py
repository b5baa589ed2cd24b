"""Masked reductions. Masks are True on real tokens.

Conventions, tested in tests/nn/test_masking.py:
- padded positions get exactly zero weight / never win a max, min or top-k;
- a row with no real position gives zeros (never NaN or +-inf).
"""

from __future__ import annotations

import torch

from attnmatch.nn.exporting import exporting


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax over `dim` with padded positions at exactly zero weight.

    Args:
        scores: any shape.
        mask: bool, broadcastable to `scores`, True on real positions.
        dim: the dimension to normalise over.

    Returns:
        Weights of `scores`' shape; a fully masked slice is all zeros.
    """
    # The dtype's most negative finite value, not -inf: exp(min - max) is exactly 0 next to a real
    # position, and a fully masked slice becomes uniform (then zeroed) instead of NaN, so no NaN
    # appears in the forward or the backward pass.
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=dim)
    return weights.masked_fill(~mask, 0.0)


def masked_max(values: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Max over `dim`, ignoring padding; a fully masked slice gives 0."""
    filled = values.masked_fill(~mask, float("-inf"))
    out = filled.amax(dim=dim)
    return out.masked_fill(~mask.any(dim=dim), 0.0)


def masked_min(values: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Min over `dim`, ignoring padding; a fully masked slice gives 0."""
    filled = values.masked_fill(~mask, float("inf"))
    out = filled.amin(dim=dim)
    return out.masked_fill(~mask.any(dim=dim), 0.0)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Mean over `dim` of the real positions; a fully masked slice gives 0.

    Shape:
        values: (..., T, ...) and mask broadcastable to it (e.g. (B, T, 1) for (B, T, H)).
    """
    mask_f = mask.to(values.dtype)
    total = (values * mask_f).sum(dim=dim)
    count = mask_f.sum(dim=dim).clamp(min=1.0)
    return total / count


def masked_kmax(values: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """The k largest real values of each row, in descending order.

    Padded cells never win; if a row has fewer than k real cells the remainder is 0. Export
    (`nn.exporting`): always k padded candidates more, whatever N is.

    Shape:
        values: (B, N), mask: (B, N) bool -> (B, k)
    """
    batch, n = values.shape
    if exporting():  # the padding does not depend on N
        values = torch.nn.functional.pad(values, (0, k))  # (B, N + k)
        mask = torch.nn.functional.pad(mask, (0, k), value=False)  # (B, N + k)
    elif n < k:  # pad so that topk always has k candidates
        values = torch.nn.functional.pad(values, (0, k - n))
        mask = torch.nn.functional.pad(mask, (0, k - n), value=False)
    filled = values.masked_fill(~mask, float("-inf"))
    top, idx = filled.topk(k, dim=-1)  # (B, k)
    real = mask.gather(-1, idx)  # (B, k)
    return top.masked_fill(~real, 0.0)
