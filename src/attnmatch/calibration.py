"""Platt scaling: a ranking score read as a probability of relevance.

A ranking model's score is unbounded and means nothing on its own: only its order within a
query counts. Platt (1999) fits P(relevant | s) = sigmoid(a s + b) by maximum likelihood on
held-out labelled pairs; training fits it on the dev split when it selects a model, and the
model saves it with its task (config.json "task": {"kind": "ranking", "calibration": {"scale":
a, "shift": b}}). The targets are Platt's smoothed ones, (N+ + 1) / (N+ + 2) for a relevant pair
and 1 / (N- + 2) for another, so separable scores still give a finite line; Newton's method with
a backtracking line search minimises the cross-entropy (Lin, Lin and Weng 2007). The scale is
never negative: scores that rank relevant pairs lower than the others get the base rate of
relevance for every score (a = 0), never a probability that falls as the score rises.

Example:
    >>> import numpy as np
    >>> platt = fit_platt(np.array([-2.0, -1.0, 1.0, 2.0]), np.array([False, False, True, True]))
    >>> bool(platt.probability(np.array([-2.0]))[0] < 0.5 < platt.probability(np.array([2.0]))[0])
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

MAX_NEWTON_STEPS = 100


@dataclass(frozen=True, kw_only=True)
class PlattScaling:
    """P(relevant | s) = sigmoid(scale * s + shift), scale >= 0.

    Args:
        scale, shift: the logistic line; finite numbers, the scale not negative.
    """

    scale: float
    shift: float

    def __post_init__(self) -> None:
        for name in ("scale", "shift"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"calibration {name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"calibration {name} must be finite, got {value!r}")
        if self.scale < 0:
            raise ValueError(f"calibration scale must be >= 0, got {self.scale!r}")

    def probability(self, scores: ArrayLike) -> NDArray[np.float64]:
        """Shape: (N,) -> (N,) in [0, 1], non-decreasing in the score."""
        z = self.scale * np.asarray(scores, dtype=np.float64) + self.shift  # (N,)
        return np.exp(-np.logaddexp(0.0, -z))  # sigmoid(z), without overflow

    def to_dict(self) -> dict[str, float]:
        return {"scale": float(self.scale), "shift": float(self.shift)}

    @classmethod
    def from_dict(cls, data: Any) -> PlattScaling:
        """A saved calibration, `{"scale": a, "shift": b}`; ValueError on anything else."""
        if not isinstance(data, dict) or set(data) != {"scale", "shift"}:
            raise ValueError(f"a calibration is an object with a scale and a shift, got {data!r}")
        return cls(scale=data["scale"], shift=data["shift"])


def fit_platt(scores: ArrayLike, relevant: ArrayLike) -> PlattScaling:
    """The Platt scaling of `scores` for the pairs marked `relevant` (module docstring).

    Args:
        scores: (N,) a model's ranking scores of labelled pairs.
        relevant: (N,) bool: whether each pair is relevant (label > 0).

    Raises:
        ValueError: empty or mismatched inputs, or a score that is not finite.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(relevant).astype(bool)
    if s.ndim != 1 or s.shape != y.shape or len(s) == 0:
        raise ValueError(f"need equally long, non-empty 1-D inputs, got {s.shape} and {y.shape}")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite to calibrate them")
    positives = int(y.sum())
    negatives = len(y) - positives
    target = np.where(y, (positives + 1) / (positives + 2), 1 / (negatives + 2))  # (N,)
    center, spread = float(s.mean()), float(s.std())
    x = (s - center) / spread if spread > 0 else np.zeros_like(s)  # (N,), for conditioning
    a, b = _newton(x, target, math.log((positives + 1) / (negatives + 1)))
    if a <= 0 or spread == 0:  # no positive relation: the base rate for every score
        rate = float(target.mean())
        return PlattScaling(scale=0.0, shift=math.log(rate / (1 - rate)))
    return PlattScaling(scale=a / spread, shift=b - a * center / spread)


def _cross_entropy(x: NDArray[np.float64], t: NDArray[np.float64], a: float, b: float) -> float:
    z = a * x + b  # (N,)
    # -t log sigmoid(z) - (1 - t) log sigmoid(-z), each term as a softplus
    return float((t * np.logaddexp(0.0, -z) + (1 - t) * np.logaddexp(0.0, z)).sum())


def _newton(x: NDArray[np.float64], t: NDArray[np.float64], b0: float) -> tuple[float, float]:
    """(a, b) minimising the cross-entropy of sigmoid(a x + b) against the targets `t`."""
    a, b = 0.0, b0
    loss = _cross_entropy(x, t, a, b)
    for _ in range(MAX_NEWTON_STEPS):
        p = np.exp(-np.logaddexp(0.0, -(a * x + b)))  # (N,)
        w = p * (1 - p) + 1e-12  # (N,), > 0: the Hessian stays invertible
        gradient = np.array([((p - t) * x).sum(), (p - t).sum()])  # (2,)
        hessian = np.array([[(w * x * x).sum(), (w * x).sum()], [(w * x).sum(), w.sum()]])
        step = np.linalg.solve(hessian + 1e-12 * np.eye(2), gradient)  # (2,)
        size = 1.0
        while size > 1e-10:
            new = _cross_entropy(x, t, a - size * step[0], b - size * step[1])
            if new <= loss:
                break
            size /= 2
        else:
            break  # no step decreases the loss: at the minimum within float precision
        a, b = a - size * float(step[0]), b - size * float(step[1])
        improvement, loss = loss - new, new
        if improvement <= 1e-12 * max(1.0, loss):
            break
    return a, b
