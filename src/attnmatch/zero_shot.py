"""Zero-shot heads: one similarity per pair read as a task's outputs, with no trained weights.

An untrained scorer (a pretrained encoder's cosine, a lexical score) gives one similarity s per
pair. It ranks as it is. To classify or regress, s is calibrated on labelled pairs, and nothing
else is learned; the task chooses the head (`Task.zero_shot_head`):

- ranking: the output is s.
- classification (2 classes): the last class when s > t, the threshold t chosen on the labelled
  pairs to maximise accuracy, F1 or macro F1 (`fit_threshold`). The outputs are the logits
  [0, k (s - t)], so argmax is the thresholded prediction and log P(last class) still ranks by
  s; k = 1 / std(s) only sets how sure the logits look and changes no prediction.
- regression: the least-squares line a s + b through the labelled (s, score) pairs
  (`fit_line`); without labelled pairs, the similarity's range (cosine: [-1, 1]) mapped
  linearly onto [min_score, max_score].

More than two classes cannot be read off one similarity: that is an error. The head is three
numbers (`ScoreHead`), so a model config stores it exactly (`BiEncoderConfig` num_outputs,
scale, shift, cosine_logits).

Example:
    >>> import numpy as np
    >>> from attnmatch.tasks import ClassificationTask
    >>> task = ClassificationTask(class_names=("different", "same"))
    >>> head = task.zero_shot_head(np.array([0.1, 0.2, 0.8, 0.9]), np.array([0, 0, 1, 1]))
    >>> round(head.threshold, 3), head.outputs(np.array([0.3, 0.7])).argmax(axis=1).tolist()
    (0.5, [0, 1])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

THRESHOLD_METRICS = ("accuracy", "f1", "macro_f1")


@dataclass(frozen=True, kw_only=True)
class ScoreHead:
    """How one similarity s becomes a model's outputs: z = scale * s + shift, then (N, 1) = z,
    or (N, 2) = [0, z] (two class logits; the last class wins when z > 0).

    Args:
        num_outputs: 1 (a score or a regression value) or 2 (binary class logits).
        scale, shift: the affine map; finite, scale != 0.
    """

    num_outputs: int = 1
    scale: float = 1.0
    shift: float = 0.0

    def __post_init__(self) -> None:
        if self.num_outputs not in (1, 2):
            raise ValueError(f"num_outputs must be 1 or 2, got {self.num_outputs}")
        if not (np.isfinite(self.scale) and np.isfinite(self.shift)) or self.scale == 0:
            raise ValueError(f"scale and shift must be finite, scale != 0: {self}")

    @property
    def threshold(self) -> float:
        """The similarity where z = 0: above it, two-output heads predict the last class."""
        return -self.shift / self.scale

    def outputs(self, similarities: ArrayLike) -> NDArray[np.float32]:
        """Shape: (N,) -> (N, num_outputs) float32."""
        z = self.scale * np.asarray(similarities, dtype=np.float64) + self.shift  # (N,)
        if self.num_outputs == 1:
            return z.astype(np.float32)[:, None]
        return np.stack([np.zeros_like(z), z], axis=1).astype(np.float32)  # (N, 2)


def fit_threshold(
    similarities: ArrayLike, positive: ArrayLike, *, metric: str = "accuracy"
) -> float:
    """The threshold t that maximises `metric` of the rule "positive when s > t".

    Candidates are midpoints between consecutive distinct similarities, and one value below
    the smallest and above the largest (everything positive / nothing positive). Among equal
    best values the highest t wins. O(N log N).

    Args:
        similarities: (N,) scores.
        positive: (N,) bool (or 0/1): whether each pair is of the last class.
        metric: "accuracy", "f1" (of the positive class) or "macro_f1" (of both classes).

    Raises:
        ValueError: empty or mismatched inputs, NaN scores, or an unknown metric.
    """
    if metric not in THRESHOLD_METRICS:
        raise ValueError(
            f"cannot fit a threshold for metric {metric!r}; use one of {', '.join(THRESHOLD_METRICS)}"
        )
    s = np.asarray(similarities, dtype=np.float64)
    y = np.asarray(positive).astype(bool)
    if s.ndim != 1 or s.shape != y.shape or len(s) == 0:
        raise ValueError(f"need equally long, non-empty 1-D inputs, got {s.shape} and {y.shape}")
    if not np.isfinite(s).all():
        raise ValueError("similarities must be finite")
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]  # descending
    n, num_pos = len(s), int(y.sum())
    # Cutting after the first j pairs predicts them positive: j = 0 .. n, only between distinct s.
    j = np.arange(n + 1)
    tp = np.r_[0, np.cumsum(y)]  # (n+1,)
    fp = j - tp
    fn = num_pos - tp
    tn = n - j - fn
    if metric == "accuracy":
        value = (tp + tn) / n
    else:
        value = _f1(tp, fp, fn)
        if metric == "macro_f1":
            value = (value + _f1(tn, fn, fp)) / 2
    valid = np.r_[True, s[1:] != s[:-1], True]  # (n+1,): a cut between distinct values
    best = int(np.argmax(np.where(valid, value, -np.inf)))
    if best == 0:
        return float(s[0] + 1.0)
    if best == n:
        return float(s[-1] - 1.0)
    return float((s[best - 1] + s[best]) / 2)


def _f1(tp: NDArray[np.int64], fp: NDArray[np.int64], fn: NDArray[np.int64]) -> NDArray[np.float64]:
    denominator = 2 * tp + fp + fn
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)


def fit_line(similarities: ArrayLike, scores: ArrayLike) -> tuple[float, float]:
    """The least-squares line `score ~ slope * s + intercept`.

    Raises:
        ValueError: fewer than 2 pairs, mismatched lengths, non-finite values, or constant
            similarities (no line through them).
    """
    s = np.asarray(similarities, dtype=np.float64)
    y = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.shape != y.shape or len(s) < 2:
        raise ValueError(f"need equally long 1-D inputs of >= 2 pairs, got {s.shape}, {y.shape}")
    if not (np.isfinite(s).all() and np.isfinite(y).all()):
        raise ValueError("similarities and scores must be finite")
    ds = s - s.mean()
    variance = float((ds * ds).sum())
    if variance == 0.0:
        raise ValueError("the labelled pairs all have the same similarity: no line fits them")
    slope = float((ds * (y - y.mean())).sum() / variance)
    if slope == 0.0:  # uncorrelated: a (nearly) flat line keeps the map invertible
        slope = float(np.finfo(np.float32).eps)
    return slope, float(y.mean() - slope * s.mean())
