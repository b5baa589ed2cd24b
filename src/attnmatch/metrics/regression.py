"""Regression metrics for semantic similarity: Pearson r, Spearman rho, mean squared error.

- Pearson r: the sample correlation of predictions and gold scores; 0.0 when either side is
  constant (undefined, reported as no correlation rather than NaN).
- Spearman rho: Pearson r of the ranks, ties given their average rank (as scipy's `spearmanr`).
- MSE: mean of (prediction - gold)^2.
- SemEval STS year score: Pearson per set, then the mean of the per-set values weighted by each
  set's number of pairs (`weighted_pearson`), the official aggregation of SemEval 2012-2016.

Example:
    >>> round(pearson([1, 2, 3], [1, 2, 4]), 4)
    0.982
    >>> spearman([1, 2, 3], [1, 2, 4])
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

DEFAULT_METRICS = ("pearson", "spearman", "mse")


def _as_pair(predictions: ArrayLike, gold: ArrayLike) -> tuple[NDArray[np.float64], ...]:
    p = np.asarray(predictions, dtype=np.float64)
    y = np.asarray(gold, dtype=np.float64)
    if p.ndim != 1 or y.ndim != 1:
        raise ValueError(f"predictions and gold must be 1-D, got {p.shape} and {y.shape}")
    if len(p) != len(y):
        raise ValueError(f"predictions and gold differ in length: {len(p)} != {len(y)}")
    if len(p) < 2:
        raise ValueError("correlation needs at least 2 pairs")
    if not (np.isfinite(p).all() and np.isfinite(y).all()):
        raise ValueError("predictions and gold must be finite")
    return p, y


def pearson(predictions: ArrayLike, gold: ArrayLike) -> float:
    """Pearson correlation; 0.0 if either input is constant.

    Args:
        predictions: (N,) predicted scores, N >= 2.
        gold: (N,) gold scores.
    """
    p, y = _as_pair(predictions, gold)
    p, y = p - p.mean(), y - y.mean()
    denominator = float(np.sqrt((p * p).sum() * (y * y).sum()))
    if denominator == 0.0:
        return 0.0
    return float(np.clip((p * y).sum() / denominator, -1.0, 1.0))


def average_ranks(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """1-based ranks of `x`, tied values sharing the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    # Start index of each run of equal values, and each element's run.
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    run = np.cumsum(np.r_[True, sorted_x[1:] != sorted_x[:-1]]) - 1
    ends = np.r_[starts[1:], len(x)]
    mean_rank = (starts + ends + 1) / 2.0  # mean of 1-based ranks start+1 .. end
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = mean_rank[run]
    return ranks


def spearman(predictions: ArrayLike, gold: ArrayLike) -> float:
    """Spearman rank correlation (average ranks for ties); 0.0 if either input is constant."""
    p, y = _as_pair(predictions, gold)
    return pearson(average_ranks(p), average_ranks(y))


def mse(predictions: ArrayLike, gold: ArrayLike) -> float:
    """Mean squared error."""
    p, y = _as_pair(predictions, gold)
    return float(((p - y) ** 2).mean())


def weighted_pearson(
    predictions: ArrayLike, gold: ArrayLike, groups: Sequence[str]
) -> tuple[float, dict[str, float], dict[str, int]]:
    """Pearson per group and their pair-weighted mean (the SemEval STS year score).

    Args:
        predictions, gold: (N,) scores.
        groups: (N,) the set each pair belongs to (e.g. "2015/images").

    Returns:
        (weighted mean, {group: Pearson}, {group: number of pairs}), groups in order of first
        appearance.
    """
    p, y = _as_pair(predictions, gold)
    if len(groups) != len(p):
        raise ValueError(f"{len(groups)} groups for {len(p)} pairs")
    names = list(dict.fromkeys(groups))
    index = {g: i for i, g in enumerate(names)}
    gid = np.fromiter((index[g] for g in groups), dtype=np.int64, count=len(groups))
    per_group, sizes = {}, {}
    for i, name in enumerate(names):
        sel = gid == i
        sizes[name] = int(sel.sum())
        per_group[name] = pearson(p[sel], y[sel]) if sizes[name] >= 2 else 0.0
    total = sum(sizes.values())
    mean = sum(per_group[g] * sizes[g] for g in names) / total
    return float(mean), per_group, sizes


def regression_metrics(
    predictions: ArrayLike,
    gold: ArrayLike,
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    groups: Sequence[str] | None = None,
) -> dict[str, float]:
    """Regression metrics of predicted scores.

    Args:
        predictions, gold: (N,) scores.
        metrics: names among "pearson", "spearman", "mse".
        groups: when given, "pearson" is the pair-weighted mean of per-group Pearson values (the
            SemEval year score) and every group's value is added as "pearson/<group>"; the other
            metrics stay pooled over all pairs.

    Raises:
        ValueError: unknown metric, mismatched lengths, fewer than 2 pairs, non-finite values.
    """
    unknown = [m for m in metrics if m not in DEFAULT_METRICS]
    if unknown:
        raise ValueError(
            f"unknown regression metrics {unknown}; valid: {', '.join(DEFAULT_METRICS)}"
        )
    result: dict[str, float] = {}
    per_group: dict[str, float] = {}
    for name in metrics:
        if name == "pearson":
            if groups is None:
                result[name] = pearson(predictions, gold)
            else:
                result[name], per_group, _ = weighted_pearson(predictions, gold, groups)
        elif name == "spearman":
            result[name] = spearman(predictions, gold)
        else:
            result[name] = mse(predictions, gold)
    result.update({f"pearson/{g}": v for g, v in per_group.items()})
    return result
