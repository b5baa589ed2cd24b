"""Dynamic (length-adaptive) max pooling of 2-D interaction maps to a fixed grid.

MatchPyramid's dynamic pooling (Pang et al. 2016) and ARC-II's final pooling: for an example whose
real map is n x m (its first n rows and m columns; padding comes after), output bin p of P along
an axis covers positions [floor(p n / P), ceil((p + 1) n / P)): exactly `F.adaptive_max_pool2d`
of the real map, vectorised over the batch. Bins tile the real positions (overlapping by one
when P does not divide n) and never reach padding; with n < P a real position lies in several
bins; an example with n = 0 pools to 0.

Dims: B batch, F feature maps, H / W map size (padded), P1 / P2 output grid.
"""

from __future__ import annotations

import torch

from attnmatch.nn.masking import masked_max


def dynamic_bins(counts: torch.Tensor, size: int, length: int) -> torch.Tensor:
    """Which of `length` positions each of `size` bins covers, from each example's real count.

    Shape:
        counts: (B,) -> (B, size, length) bool
    """
    p = torch.arange(size, device=counts.device)  # (P,)
    n = counts.long().unsqueeze(-1)  # (B, 1)
    start = (p * n) // size  # (B, P)
    end = ((p + 1) * n + size - 1) // size  # (B, P), ceil
    pos = torch.arange(length, device=counts.device)  # (T,)
    return (pos >= start.unsqueeze(-1)) & (pos < end.unsqueeze(-1))  # (B, P, T)


def dynamic_max_pool2d(
    x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, size: tuple[int, int]
) -> torch.Tensor:
    """Max pooling of each example's real rows[b] x cols[b] map to a P1 x P2 grid.

    Shape:
        x: (B, F, H, W), rows, cols: (B,) real counts -> (B, F, P1, P2)
    """
    p1, p2 = size
    batch, channels, height, width = x.shape
    row_bins = dynamic_bins(rows, p1, height)  # (B, P1, H)
    col_bins = dynamic_bins(cols, p2, width)  # (B, P2, W)
    expanded = x.unsqueeze(2).expand(batch, channels, p1, height, width)  # (B, F, P1, H, W)
    by_rows = masked_max(expanded, row_bins[:, None, :, :, None], dim=3)  # (B, F, P1, W)
    expanded = by_rows.unsqueeze(3).expand(batch, channels, p1, p2, width)  # (B, F, P1, P2, W)
    return masked_max(expanded, col_bins[:, None, None, :, :], dim=4)  # (B, F, P1, P2)
