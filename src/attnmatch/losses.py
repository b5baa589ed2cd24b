"""Training objectives. Models return scores/logits; every loss lives here.

Ranking losses take scores laid out as (G, 1 + k): one row per ranking group, the positive in
column 0 and k negatives after it (what `RankingGroupSampler` produces; `as_groups` checks it).
Regression (STS) either predicts a distribution over the integer score levels, trained with KL
divergence to the sparse target distribution of Tai et al. (2015) ("kl"), or one score trained
with squared error ("mse"). Which losses train which task, and how outputs become scores,
is `attnmatch.tasks`.

Distillation (`attnmatch.training.distillation`) adds a teacher's targets to each batch
(`PairBatch.teacher`) and trains on `mixed_loss`: the gold-label loss and one of
`DISTILL_LOSSES` weighted together.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from attnmatch.data.schema import PairBatch
from attnmatch.models.contract import auxiliary_terms
from attnmatch.tasks import ranking_scores, regression_predictions

LOSSES = ("rank_hinge", "listwise", "cross_entropy", "kl", "mse")
DISTILL_LOSSES = ("margin_mse", "listwise_kl", "score_mse", "soft_kl")


def sparse_score_distribution(
    scores: torch.Tensor, min_score: float, num_levels: int
) -> torch.Tensor:
    """Tai et al. (2015) target: the gold score's mass split between its two nearest levels.

    For levels r_i = min_score + i, a score y with floor(y) = r_j puts 1 - (y - r_j) on level j
    and y - r_j on level j + 1 (all of it on the top level when y is the maximum), so that
    sum_i p_i r_i = y exactly.

    Shape:
        scores: (B,) in [min_score, min_score + num_levels - 1] -> (B, num_levels)
    """
    max_score = min_score + num_levels - 1
    if bool(((scores < min_score) | (scores > max_score)).any()):
        raise ValueError(f"regression labels must lie in [{min_score}, {max_score}]")
    pos = scores.float() - min_score  # (B,)
    low = pos.floor().clamp(max=num_levels - 2).long()  # (B,)
    frac = pos - low  # (B,) in [0, 1]
    target = torch.zeros(scores.shape[0], num_levels, device=scores.device)
    target.scatter_(1, low[:, None], (1 - frac)[:, None])
    target.scatter_add_(1, (low + 1)[:, None], frac[:, None])
    return target


def kl_score_loss(logits: torch.Tensor, scores: torch.Tensor, min_score: float) -> torch.Tensor:
    """KL(p || p_hat) from the sparse target distribution to softmax(logits), batch mean.

    Shape:
        logits: (B, K) over the K integer score levels, scores: (B,) -> scalar
    """
    target = sparse_score_distribution(scores, min_score, logits.shape[-1])  # (B, K)
    return F.kl_div(F.log_softmax(logits, dim=-1), target, reduction="batchmean")


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
    name: str,
    outputs: torch.Tensor,
    batch: PairBatch,
    *,
    margin: float = 1.0,
    min_score: float = 0,
) -> torch.Tensor:
    """The named loss for a model's outputs on `batch`.

    Args:
        name: one of `LOSSES`.
        outputs: (B, num_outputs). Ranking losses use column 0 (or, for class heads, log P of
            the last class); "kl" needs one column per score level, "mse" one column or levels.
        margin: the rank hinge margin.
        min_score: the lowest score level of a regression task (STS 0, SICK 1).
    """
    if name == "cross_entropy":
        return cross_entropy_loss(outputs, batch.labels)
    if name == "kl":
        if outputs.shape[-1] < 2:
            raise ValueError("the kl loss needs one output per score level, the model has 1")
        return kl_score_loss(outputs, batch.labels, min_score)
    if name == "mse":
        return F.mse_loss(regression_predictions(outputs, min_score), batch.labels.float())
    scores = ranking_scores(outputs)
    if name == "rank_hinge":
        return rank_hinge_loss(as_groups(scores, batch.group_index), margin)
    if name == "listwise":
        return listwise_softmax_loss(
            as_groups(scores, batch.group_index), as_groups(batch.labels, batch.group_index)
        )
    raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}")


def margin_mse_loss(scores: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Margin-MSE (Hofstaetter et al. 2020, arXiv:2010.02666): the student's margin between
    the positive and each negative regressed onto the teacher's, then the mean.

    loss = mean_{g, j} ((s_g+ - s_gj-) - (t_g+ - t_gj-))^2

    Shape:
        scores, teacher: (G, 1 + k), positive first -> scalar
    """
    student = scores[:, :1] - scores[:, 1:]  # (G, k)
    target = teacher[:, :1] - teacher[:, 1:]  # (G, k)
    return F.mse_loss(student, target)


def listwise_kl_loss(scores: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """KL(softmax(teacher) || softmax(scores)) over each group's candidates, mean over groups.

    Shape:
        scores, teacher: (G, n) -> scalar
    """
    target = F.softmax(teacher.float(), dim=-1)  # (G, n)
    return F.kl_div(F.log_softmax(scores, dim=-1), target, reduction="batchmean")


def soft_kl_loss(logits: torch.Tensor, probabilities: torch.Tensor) -> torch.Tensor:
    """KL(p_teacher || softmax(logits)), the soft-label loss of Hinton et al. (2015) at
    temperature 1, batch mean.

    Shape:
        logits, probabilities: (B, C) -> scalar
    """
    return F.kl_div(F.log_softmax(logits, dim=-1), probabilities, reduction="batchmean")


def distill_loss(
    name: str, outputs: torch.Tensor, batch: PairBatch, *, min_score: float = 0
) -> torch.Tensor:
    """The named distillation loss of a model's outputs against `batch.teacher`.

    Args:
        name: one of `DISTILL_LOSSES` (the task's: `attnmatch.training.distillation.DISTILL_LOSSES`).
        outputs: (B, num_outputs); batch.teacher: (B, 1) scores, or (B, C) probabilities
            for "soft_kl".
    """
    teacher = batch.teacher
    if teacher is None:
        raise ValueError("distillation needs the teacher's targets in the batch")
    if name == "soft_kl":
        return soft_kl_loss(outputs, teacher)
    if name == "score_mse":
        return F.mse_loss(regression_predictions(outputs, min_score), teacher[:, 0])
    scores = as_groups(ranking_scores(outputs), batch.group_index)  # (G, n)
    target = as_groups(teacher[:, 0], batch.group_index)  # (G, n)
    if name == "margin_mse":
        return margin_mse_loss(scores, target)
    if name == "listwise_kl":
        return listwise_kl_loss(scores, target)
    raise ValueError(
        f"unknown distillation loss {name!r}; choose one of {', '.join(DISTILL_LOSSES)}"
    )


def mixed_loss(
    loss: str,
    distill: str,
    weight: float,
    outputs: torch.Tensor,
    batch: PairBatch,
    *,
    margin: float = 1.0,
    min_score: float = 0,
) -> torch.Tensor:
    """(1 - weight) x the gold-label loss + weight x the distillation loss.

    The gold loss covers the pairs that have a gold label (a NaN label: a pair only the
    teacher labelled); a batch without any has the distillation loss alone.
    """
    soft = distill_loss(distill, outputs, batch, min_score=min_score)
    if weight >= 1.0:
        return soft
    gold_rows = ~torch.isnan(batch.labels)  # (B,)
    if not bool(gold_rows.any()):
        return soft
    if not bool(gold_rows.all()):
        batch = dataclasses.replace(
            batch, labels=batch.labels[gold_rows], group_index=batch.group_index[gold_rows]
        )
        outputs = outputs[gold_rows]  # (B', num_outputs)
    gold = compute_loss(loss, outputs, batch, margin=margin, min_score=min_score)
    return (1.0 - weight) * gold + weight * soft


def auxiliary_loss(model: torch.nn.Module) -> torch.Tensor | None:
    """The sum of the auxiliary terms `model` recorded in its last forward pass, or None.

    A model with training terms of its own (IARNN's Occam regulariser, eq. 8) declares the
    capability `auxiliary_loss` and gives `auxiliary_terms() -> dict[str, Tensor]` of scalars
    (`attnmatch.models.contract`); losses stay outside models, and the trainer adds this to the
    task loss. Wrappers (`DistributedDataParallel`, the overlap features) are looked through.
    """
    terms = list(auxiliary_terms(model).values())
    if not terms:
        return None
    return torch.stack(terms).sum()
