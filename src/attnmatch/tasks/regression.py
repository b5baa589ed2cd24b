"""`RegressionTask`: a similarity score per pair, on the task's range."""

from __future__ import annotations

import math
import numbers
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from attnmatch.data.encoding import EncodedPairs
from attnmatch.tasks.base import Predictions, Task, group_names, have_labels
from attnmatch.tasks.ranking import softmax
from attnmatch.zero_shot import ScoreHead, fit_line

if TYPE_CHECKING:  # pragma: no cover
    import torch

REGRESSION_METRICS = ("pearson", "spearman", "mse")


def regression_predictions(outputs: torch.Tensor, min_score: float) -> torch.Tensor:
    """Predicted scores in torch (the losses' path; `predicted_scores` is the numpy one):
    (B, 1) -> the value; (B, K) -> sum_i softmax_i (min_score + i).

    Shape:
        outputs: (B, 1) or (B, K) -> (B,)
    """
    import torch
    import torch.nn.functional as F

    if outputs.shape[-1] == 1:
        return outputs[:, 0]
    levels = min_score + torch.arange(outputs.shape[-1], device=outputs.device)  # (K,)
    return F.softmax(outputs.float(), dim=-1) @ levels.float()


def predicted_scores(outputs: np.ndarray, min_score: float) -> np.ndarray:
    """`regression_predictions` in numpy (float32), what decoding and evaluation read.

    Shape:
        outputs: (N, 1) or (N, K) -> (N,)
    """
    outputs = np.asarray(outputs, dtype=np.float32)  # (N, K)
    if outputs.shape[-1] == 1:
        return outputs[:, 0].copy()  # (N,)
    levels = (min_score + np.arange(outputs.shape[-1])).astype(np.float32)  # (K,)
    return softmax(outputs) @ levels  # (N,)


def integral(value: float) -> float:
    """`value` as an int when it is integral (5.0 -> 5), else unchanged; bools are refused.

    Raises:
        ValueError: `value` is a bool, or not a finite real number.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"a score bound must be a finite number, got {value!r}")
    number = float(value)
    return int(number) if number.is_integer() else number


@dataclass(frozen=True, kw_only=True)
class RegressionTask(Task):
    """A real-valued similarity score per pair (STS, SICK relatedness), predicted as a
    distribution over the integer levels (loss kl, the default, Tai et al. 2015) or as one
    value (loss mse, the default when a bound is not an integer, e.g. 0.5..2.5).

    Args:
        min_score, max_score: the gold score range (STS 0-5, SICK 1-5); real numbers, kept as
            ints when integral. Only integer bounds allow the KL objective of Tai et al.
            (2015), a distribution over the integer scores min_score .. max_score.
        metrics: among "pearson", "spearman", "mse".
        by_group: also report Pearson per group (the example's `group`, e.g. SemEval's
            "2015/images") as "pearson/<group>", and as "pearson" the pair-weighted mean of the
            per-group values (the SemEval year score) instead of the pooled Pearson.
    """

    kind: str = "regression"
    name: str = "regression"
    metrics: tuple[str, ...] = REGRESSION_METRICS
    primary: str = "pearson"
    min_score: float = 0
    max_score: float = 1
    by_group: bool = False

    LOSSES: ClassVar[tuple[str, ...]] = ("kl", "mse")

    def __post_init__(self) -> None:
        # 5.0 is stored as 5: equal tasks compare equal and save alike (config.json "max_score": 5).
        object.__setattr__(self, "min_score", integral(self.min_score))
        object.__setattr__(self, "max_score", integral(self.max_score))
        if not self.min_score < self.max_score:
            raise ValueError(
                f"{self.name}: min_score ({self.min_score}) must be < max_score ({self.max_score})"
            )

    @property
    def integer_bounds(self) -> bool:
        """Whether both score bounds are integers (what a KL head needs)."""
        return isinstance(self.min_score, int) and isinstance(self.max_score, int)

    @property
    def num_levels(self) -> int:
        """The integer score levels (the output size of a KL head)."""
        if not self.integer_bounds:
            raise ValueError(
                f"the score range {self.min_score}..{self.max_score} has no integer levels"
            )
        return int(self.max_score - self.min_score) + 1

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {"min_score": self.min_score, "max_score": self.max_score}

    @classmethod
    def _loaded(cls, data: dict[str, Any]) -> Task:
        if "calibration" in data:
            raise ValueError("a calibration belongs to a ranking task, not a regression one")
        return cls(min_score=data.get("min_score", 0), max_score=data.get("max_score", 1))

    def resolve_loss(self, loss: str) -> str:
        resolved = super().resolve_loss(
            "mse" if loss == "auto" and not self.integer_bounds else loss
        )
        if resolved == "kl" and not self.integer_bounds:
            raise ValueError(
                f"loss 'kl' needs integer score bounds (one output per integer level), but the "
                f"range is {self.min_score}..{self.max_score}; use loss mse, or set integer "
                "min_score and max_score"
            )
        return resolved

    def num_outputs(self, loss: str) -> int:
        return self.num_levels if loss == "kl" else 1

    def decode(self, outputs: np.ndarray) -> Predictions:
        """The predicted scores; as relevance, mapped linearly onto [0, 1] from the score
        range (a similarity, not a probability)."""
        scores = predicted_scores(outputs, self.min_score)  # (N,)
        span = self.max_score - self.min_score
        relevance = np.clip((scores.astype(np.float64) - self.min_score) / span, 0.0, 1.0)
        return Predictions(scores=scores, relevance=relevance)

    @property
    def relevance_scale(self) -> str:
        return "similarity"

    def _predicted(self, outputs: np.ndarray, model: Task | None) -> np.ndarray:
        """A regression model's outputs read on its own range (which may differ from this
        protocol's); any other outputs on this protocol's."""
        own = model if isinstance(model, RegressionTask) else self
        return predicted_scores(outputs, own.min_score)  # (N,)

    def measure(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        from attnmatch.metrics import regression_metrics  # on first evaluation

        predictions = self._predicted(outputs, model)
        groups = group_names(data) if self.by_group else None
        metrics = regression_metrics(predictions, data.labels, metrics=self.metrics, groups=groups)
        rows: list[dict[str, Any]] = []
        if groups is not None:
            rows = [
                {"group": g, "pairs": n, "pearson": metrics[f"pearson/{g}"]}
                for g, n in Counter(groups).items()
            ]
        return metrics, rows

    def items(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "protocol": self.name,
            "labels": [float(x) for x in data.labels],
            "predictions": [float(x) for x in self._predicted(outputs, model)],
            "groups": group_names(data) if self.by_group else None,
        }

    def check_label(self, label: float) -> None:
        if not self.min_score <= float(label) <= self.max_score:
            raise ValueError(
                f"the label {label!r} is outside the task's score range "
                f"{self.min_score}..{self.max_score}"
            )

    def check_num_outputs(self, num_outputs: int) -> None:
        levels = self.integer_bounds and num_outputs == self.num_levels
        if num_outputs != 1 and not levels:
            raise ValueError(
                f"a regression model over {self.min_score}..{self.max_score} has 1 output or "
                f"one per integer level, not {num_outputs} (config.num_outputs)"
            )

    def zero_shot_head(
        self,
        similarities: ArrayLike | None,
        labels: ArrayLike | None,
        *,
        metric: str = "accuracy",
        similarity_range: tuple[float, float] | None = None,
    ) -> ScoreHead:
        """The least-squares line through the labelled pairs, or the similarity range mapped
        linearly onto the score range."""
        if have_labels(similarities, labels):
            slope, intercept = fit_line(np.asarray(similarities), np.asarray(labels))
            return ScoreHead(scale=slope, shift=intercept)
        if similarity_range is None:
            raise ValueError(
                "this scorer's similarities have no fixed range: zero-shot regression needs "
                "labelled pairs (calibration) to fit its line"
            )
        low, high = similarity_range
        scale = (self.max_score - self.min_score) / (high - low)
        return ScoreHead(scale=scale, shift=self.min_score - scale * low)
