"""Training objectives. Models return scores/logits; every loss lives here.

Ranking losses take scores laid out as (G, 1 + k): one row per ranking group, the positive in
column 0 and k negatives after it (what `RankingGroupSampler` produces; `as_groups` checks it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnmatch.data.schema import PairBatch

LOSSES = ("rank_hinge", "listwise", "cross_entropy")


def rank_hinge_loss(scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Pairwise rank hinge (aMV-LSTM eq. 5), a hinge per negative, then the mean.

    loss = mean_{g, j} max(0, margin - s(q_g, d+_g) + s(q_g, d-_gj))

    This is the mean of per-negative hinges, not a hinge on the mean negative score (which
    would let one hard negative hide behind easy ones).

    Shape:
        scores: (G, 1 + k), positive first -> scalar
    """
    pos = scores[:, :1]  # (G, 1)
    neg = scores[:, 1:]  # (G, k)
    return F.relu(margin - pos + neg).mean()


def listwise_softmax_loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Listwise softmax cross-entropy: -sum_i p_i log softmax(s)_i, p = labels / sum(labels).

    Shape:
        scores, labels: (G, n) -> scalar. Every row needs a positive label.
    """
    target = labels.clamp(min=0)
    target = target / target.sum(dim=-1, keepdim=True)
    return -(target * F.log_softmax(scores, dim=-1)).sum(dim=-1).mean()


def cross_entropy_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Categorical cross-entropy (aMV-LSTM eq. 6).

    Shape:
        logits: (B, C), labels: (B,) class indices -> scalar
    """
    return F.cross_entropy(logits, labels.long())


def as_groups(values: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """Reshapes (B,) values into (G, B // G) after checking groups are contiguous and equal-sized."""
    num_groups = int(group_index[-1]) + 1
    size = values.shape[0] // num_groups
    expected = torch.arange(num_groups, device=group_index.device).repeat_interleave(size)
    if size * num_groups != values.shape[0] or not torch.equal(group_index, expected):
        raise ValueError("ranking losses need contiguous, equal-sized groups (RankingGroupSampler)")
    return values.reshape(num_groups, size)


def compute_loss(
    name: str, outputs: torch.Tensor, batch: PairBatch, *, margin: float = 1.0
) -> torch.Tensor:
    """The named loss for a model's outputs on `batch`.

    Args:
        name: "rank_hinge", "listwise" or "cross_entropy".
        outputs: (B, num_outputs). Ranking losses use column 0 (or, for 2-class heads, the
            logit difference of class 1 over class 0).
    """
    if name == "cross_entropy":
        return cross_entropy_loss(outputs, batch.labels)
    scores = ranking_scores(outputs)
    if name == "rank_hinge":
        return rank_hinge_loss(as_groups(scores, batch.group_index), margin)
    if name == "listwise":
        return listwise_softmax_loss(
            as_groups(scores, batch.group_index), as_groups(batch.labels, batch.group_index)
        )
    raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}")


def ranking_scores(outputs: torch.Tensor) -> torch.Tensor:
    """One relevance score per pair from model outputs.

    (B, 1) -> the score; (B, C>=2) -> log P(match), the log-probability of the last class
    (ranks exactly like P(match)).
    """
    if outputs.shape[-1] == 1:
        return outputs[:, 0]
    return F.log_softmax(outputs, dim=-1)[:, -1]
