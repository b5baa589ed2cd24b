"""Classification metrics over predicted and true class indices.

- accuracy: share of predictions equal to the label.
- F1 of a class c: 2 TP / (2 TP + FP + FN); 0.0 when the class is neither predicted nor true
  (0 / 0; the convention of scikit-learn's `zero_division=0`).
- macro F1: the unweighted mean of the per-class F1 over all `num_classes` classes, also those
  absent from both predictions and labels (they count as 0.0).

Example:
    >>> accuracy([1, 0, 1, 1], [1, 0, 0, 1])
    0.75
    >>> round(f1([1, 0, 1, 1], [1, 0, 0, 1]), 4)
    0.8
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

DEFAULT_METRICS = ("accuracy", "f1")


def _as_classes(
    predictions: ArrayLike, labels: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    arrays = []
    for name, x in (("predictions", predictions), ("labels", labels)):
        a = np.asarray(x)
        if a.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
        if a.size and not (np.issubdtype(a.dtype, np.integer) or np.array_equal(a, np.round(a))):
            raise ValueError(f"{name} must be integer class indices")
        arrays.append(a.astype(np.int64))
    p, y = arrays
    if len(p) != len(y):
        raise ValueError(f"predictions and labels differ in length: {len(p)} != {len(y)}")
    if len(p) == 0:
        raise ValueError("predictions and labels are empty")
    return p, y


def _f1(p: NDArray[np.int64], y: NDArray[np.int64], positive: int) -> float:
    tp = int(((p == positive) & (y == positive)).sum())
    fp = int(((p == positive) & (y != positive)).sum())
    fn = int(((p != positive) & (y == positive)).sum())
    denominator = 2 * tp + fp + fn
    return 0.0 if denominator == 0 else 2 * tp / denominator


def accuracy(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Share of predictions equal to the label.

    Args:
        predictions: (N,) predicted class indices.
        labels: (N,) true class indices.
    """
    p, y = _as_classes(predictions, labels)
    return float((p == y).mean())


def f1(predictions: ArrayLike, labels: ArrayLike, *, positive: int = 1) -> float:
    """Binary F1 of the `positive` class; 0.0 when it is neither predicted nor true.

    Args:
        predictions: (N,) predicted class indices.
        labels: (N,) true class indices.
        positive: the class whose F1 is reported.
    """
    p, y = _as_classes(predictions, labels)
    return _f1(p, y, positive)


def macro_f1(predictions: ArrayLike, labels: ArrayLike, num_classes: int) -> float:
    """Unweighted mean of the per-class F1 over classes `0 .. num_classes - 1`.

    Args:
        predictions: (N,) predicted class indices in [0, num_classes).
        labels: (N,) true class indices in [0, num_classes).
        num_classes: number of classes; a class absent from both inputs contributes 0.0.
    """
    p, y = _as_classes(predictions, labels)
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    for name, a in (("predictions", p), ("labels", y)):
        if a.min() < 0 or a.max() >= num_classes:
            raise ValueError(f"{name} must lie in [0, {num_classes}), got [{a.min()}, {a.max()}]")
    return float(np.mean([_f1(p, y, c) for c in range(num_classes)]))


def classification_metrics(
    logits_or_probs: ArrayLike,
    labels: ArrayLike,
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> dict[str, float]:
    """Metrics of argmax predictions.

    "f1" is the binary F1 of class 1 when there are two classes and the macro F1 otherwise;
    "macro_f1" is always the macro F1.

    Args:
        logits_or_probs: (N, C) class scores, C >= 2; any monotone scale (argmax is taken).
        labels: (N,) true class indices in [0, C).
        metrics: names among "accuracy", "f1", "macro_f1".

    Returns:
        metric name -> value.

    Raises:
        ValueError: empty input, mismatched lengths, C < 2, or an unknown metric name.
    """
    scores = np.asarray(logits_or_probs)
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError(f"logits_or_probs must have shape (N, C) with C >= 2, got {scores.shape}")
    num_classes = scores.shape[1]
    unknown = [m for m in metrics if m not in ("accuracy", "f1", "macro_f1")]
    if unknown:
        raise ValueError(f"unknown classification metrics {unknown}; valid: accuracy, f1, macro_f1")
    predictions, _ = _as_classes(scores.argmax(axis=1), labels)
    result: dict[str, float] = {}
    for name in metrics:
        if name == "accuracy":
            result[name] = accuracy(predictions, labels)
        elif name == "f1" and num_classes == 2:
            result[name] = f1(predictions, labels, positive=1)
        else:
            result[name] = macro_f1(predictions, labels, num_classes)
    return result
