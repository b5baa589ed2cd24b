"""Losses: hand-computed values and the group layout check. (Which losses train which task,
and how outputs become scores, is tests/test_tasks.py.)"""

from __future__ import annotations

import pytest
import torch

from attnmatch.data.schema import PairBatch
from attnmatch.losses import (
    LOSSES,
    as_groups,
    compute_loss,
    kl_score_loss,
    listwise_softmax_loss,
    rank_hinge_loss,
    sparse_score_distribution,
)
from attnmatch.tasks import TASKS


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


def _batch(labels: list[float], group_index: list[int]) -> PairBatch:
    n = len(labels)
    return PairBatch(
        left_ids=torch.ones(n, 3, dtype=torch.long),
        left_mask=torch.ones(n, 3, dtype=torch.bool),
        right_ids=torch.ones(n, 3, dtype=torch.long),
        right_mask=torch.ones(n, 3, dtype=torch.bool),
        labels=torch.tensor(labels),
        group_index=torch.tensor(group_index),
    )


def test_ranking_losses_via_compute_loss_read_scores_or_p_match() -> None:
    batch = _batch([1.0, 0.0, 0.0, 1.0, 0.0, 0.0], [0, 0, 0, 1, 1, 1])
    scores = torch.tensor([[2.0], [1.5], [-1.0], [0.0], [3.0], [0.0]])
    expected = rank_hinge_loss(scores[:, 0].reshape(2, 3), margin=0.5)
    torch.testing.assert_close(compute_loss("rank_hinge", scores, batch, margin=0.5), expected)
    listwise = listwise_softmax_loss(scores[:, 0].reshape(2, 3), batch.labels.reshape(2, 3))
    torch.testing.assert_close(compute_loss("listwise", scores, batch), listwise)
    # A class head ranks by log P(last class).
    logits = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
    p_match = torch.log_softmax(logits, dim=-1)[:, 1].reshape(2, 3)
    torch.testing.assert_close(compute_loss("rank_hinge", logits, batch), rank_hinge_loss(p_match))
    with pytest.raises(ValueError, match="contiguous"):
        compute_loss("rank_hinge", scores, _batch([1.0] * 6, [0, 1, 0, 1, 0, 1]))


def test_every_task_loss_is_a_training_objective() -> None:
    assert set(LOSSES) == {loss for task in TASKS.values() for loss in task.LOSSES}


def test_compute_loss_unknown_name() -> None:
    batch = PairBatch(
        *(torch.zeros(2, 1),) * 4, labels=torch.zeros(2), group_index=torch.zeros(2).long()
    )
    with pytest.raises(ValueError, match="unknown loss"):
        compute_loss("hinge2", torch.zeros(2, 1), batch)


def test_sparse_score_distribution_by_hand() -> None:
    # STS levels 0..5; y = 3.4 -> 0.6 on level 3, 0.4 on level 4; y = 5 -> all on level 5.
    target = sparse_score_distribution(torch.tensor([3.4, 5.0, 0.0]), 0, 6)
    expected = torch.tensor([[0, 0, 0, 0.6, 0.4, 0], [0, 0, 0, 0, 0, 1.0], [1.0, 0, 0, 0, 0, 0]])
    torch.testing.assert_close(target, expected)
    # SICK levels 1..5: the expectation recovers the score.
    y = torch.tensor([1.0, 2.25, 4.9, 5.0])
    p = sparse_score_distribution(y, 1, 5)
    torch.testing.assert_close(p.sum(dim=1), torch.ones(4))
    torch.testing.assert_close(p @ torch.arange(1.0, 6.0), y)


def test_sparse_score_distribution_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"\[1, 5\]"):
        sparse_score_distribution(torch.tensor([0.5]), 1, 5)


def test_kl_loss_is_zero_at_the_target_and_positive_elsewhere() -> None:
    y = torch.tensor([2.5, 4.0])
    target = sparse_score_distribution(y, 1, 5)
    logits = torch.log(target.clamp(min=1e-12))
    assert kl_score_loss(logits, y, 1).item() == pytest.approx(0.0, abs=1e-6)
    assert kl_score_loss(torch.zeros(2, 5), y, 1).item() > 0.1


def test_regression_losses_via_compute_loss() -> None:
    batch = PairBatch(
        left_ids=torch.ones(2, 3, dtype=torch.long),
        left_mask=torch.ones(2, 3, dtype=torch.bool),
        right_ids=torch.ones(2, 3, dtype=torch.long),
        right_mask=torch.ones(2, 3, dtype=torch.bool),
        labels=torch.tensor([1.0, 3.0]),
        group_index=torch.arange(2),
    )
    mse = compute_loss("mse", torch.tensor([[1.0], [2.0]]), batch)
    assert mse.item() == pytest.approx(0.5)
    kl = compute_loss("kl", torch.zeros(2, 6), batch, min_score=0)
    assert kl.item() > 0
    with pytest.raises(ValueError, match="one output per score level"):
        compute_loss("kl", torch.zeros(2, 1), batch)
