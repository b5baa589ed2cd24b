"""Losses: hand-computed values and the group layout check."""

from __future__ import annotations

import pytest
import torch

from attnmatch.data.schema import PairBatch
from attnmatch.losses import (
    as_groups,
    compute_loss,
    listwise_softmax_loss,
    rank_hinge_loss,
    ranking_scores,
)


def test_rank_hinge_is_mean_of_per_negative_hinges() -> None:
    scores = torch.tensor([[2.0, 1.5, -1.0, 1.9], [0.0, 3.0, 0.0, -2.0]])
    # group 1: max(0, 1-2+1.5)=0.5, max(0, 1-2-1)=0, max(0, 1-2+1.9)=0.9
    # group 2: max(0, 1+3)=4, max(0, 1+0)=1, max(0, 1-2)=0   -> mean of 6 hinges = 6.4 / 6
    assert rank_hinge_loss(scores, margin=1.0).item() == pytest.approx(6.4 / 6)
    # Not the hinge on the mean negative: group 1 would give max(0, 1 - 2 + 0.8) = 0.
    assert rank_hinge_loss(scores[:1], margin=1.0).item() == pytest.approx(1.4 / 3)


def test_listwise_softmax() -> None:
    scores = torch.tensor([[1.0, 0.0, 0.0]])
    labels = torch.tensor([[1.0, 0.0, 0.0]])
    expected = -torch.log_softmax(scores, dim=-1)[0, 0]
    assert listwise_softmax_loss(scores, labels).item() == pytest.approx(expected.item())


def test_as_groups_checks_layout() -> None:
    values = torch.arange(6.0)
    assert as_groups(values, torch.tensor([0, 0, 0, 1, 1, 1])).shape == (2, 3)
    with pytest.raises(ValueError, match="contiguous"):
        as_groups(values, torch.tensor([0, 1, 0, 1, 0, 1]))


def test_ranking_scores_of_class_heads_follow_p_match() -> None:
    logits = torch.tensor([[0.0, 1.0], [2.0, 0.5], [0.0, 0.0]])
    order = ranking_scores(logits).argsort(descending=True).tolist()
    assert order == [0, 2, 1]
    assert torch.equal(ranking_scores(torch.tensor([[0.3], [0.1]])), torch.tensor([0.3, 0.1]))


def test_compute_loss_unknown_name() -> None:
    batch = PairBatch(
        *(torch.zeros(2, 1),) * 4, labels=torch.zeros(2), group_index=torch.zeros(2).long()
    )
    with pytest.raises(ValueError, match="unknown loss"):
        compute_loss("hinge2", torch.zeros(2, 1), batch)
