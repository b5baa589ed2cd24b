"""Co-attention pooling over an affinity matrix (Tay et al. 2018, eq. 4-5; dos Santos et al. 2016).

Both poolings are exact under padding: padded positions get exactly zero weight, and the max of
extractive pooling runs over real cells only (a row or column without real cells gives 0).

Dims: B batch, L left length, R right length, D vector size.
"""

from __future__ import annotations

import torch

from attnmatch.nn.masking import masked_max, masked_softmax


def enhance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """[x; y; x - y; x * y] over the last axis: ESIM's enhancement (Chen et al. 2017, §3.2) and
    DAMM's alignment and prediction layers.

    Shape: x, y: (..., D) -> (..., 4D)
    """
    return torch.cat([x, y, x - y, x * y], dim=-1)  # (..., 4D)


def alignment_pool(
    affinity: torch.Tensor,
    left: torch.Tensor,
    left_mask: torch.Tensor,
    right: torch.Tensor,
    right_mask: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Soft alignment (Parikh et al. 2016; HCRN eq. 4).

    beta_i = sum_j softmax_j(s_ij) b_j is the part of the right text aligned to left token i, and
    alpha_j = sum_i softmax_i(s_ij) a_i the part of the left text aligned to right token j.
    Weights are zero on every cell with a padded row or column.

    Shape:
        affinity: (B, L, R), left: (B, L, D), left_mask: (B, L), right: (B, R, D),
        right_mask: (B, R) -> "left_aligned" beta (B, L, D), "right_aligned" alpha (B, R, D),
        "left_weights" softmax over j (B, L, R), "right_weights" softmax over i (B, L, R)
    """
    cells = left_mask.unsqueeze(-1) & right_mask.unsqueeze(-2)  # (B, L, R)
    over_right = masked_softmax(affinity, cells, dim=-1)  # (B, L, R), rows sum to 1
    over_left = masked_softmax(affinity, cells, dim=-2)  # (B, L, R), columns sum to 1
    return {
        "left_aligned": over_right @ right,  # (B, L, D)
        "right_aligned": over_left.transpose(1, 2) @ left,  # (B, R, D)
        "left_weights": over_right,
        "right_weights": over_left,
    }


def extractive_pool(
    affinity: torch.Tensor,
    left: torch.Tensor,
    left_mask: torch.Tensor,
    right: torch.Tensor,
    right_mask: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Attentive (extractive) pooling (dos Santos et al. 2016; HCRN eq. 5).

    Each left token is weighted by softmax_i(max_j s_ij), each right token by
    softmax_j(max_i s_ij), both over real tokens only; the pooled vectors are the weighted sums.

    Shape:
        affinity: (B, L, R), left: (B, L, D), left_mask: (B, L), right: (B, R, D),
        right_mask: (B, R) -> "left_pooled" (B, D), "right_pooled" (B, D),
        "left_weights" (B, L), "right_weights" (B, R)
    """
    cells = left_mask.unsqueeze(-1) & right_mask.unsqueeze(-2)  # (B, L, R)
    left_scores = masked_max(affinity, cells, dim=-1)  # (B, L)
    right_scores = masked_max(affinity, cells, dim=-2)  # (B, R)
    left_weights = masked_softmax(left_scores, left_mask, dim=-1)  # (B, L)
    right_weights = masked_softmax(right_scores, right_mask, dim=-1)  # (B, R)
    return {
        "left_pooled": (left_weights.unsqueeze(-1) * left).sum(dim=1),  # (B, D)
        "right_pooled": (right_weights.unsqueeze(-1) * right).sum(dim=1),  # (B, D)
        "left_weights": left_weights,
        "right_weights": right_weights,
    }
