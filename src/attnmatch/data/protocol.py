"""Evaluation protocols as data: which groups count and which metrics a split reports.

A dataset spec names its official protocol per split; `attnmatch.evaluation.evaluate` applies
it. Nothing else decides which queries are scored.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

RANKING_METRICS = ("map", "mrr", "ndcg@3", "ndcg@5", "p@1")
CLASSIFICATION_METRICS = ("accuracy", "f1")
MULTICLASS_METRICS = ("accuracy", "macro_f1")
REGRESSION_METRICS = ("pearson", "spearman", "mse")


@dataclass(frozen=True, kw_only=True)
class RankingProtocol:
    """Which ranking groups are evaluated.

    Args:
        name: a short id written into results (e.g. "wikiqa-official").
        require_positive: drop groups with no relevant candidate (WikiQA, TrecQA).
        require_negative: drop groups whose candidates are all relevant (WikiQA "filtered",
            TrecQA raw-test).
        metrics: metric names reported, lower case.
        primary: the metric used for model selection.
        description: one sentence for results tables.
    """

    name: str
    require_positive: bool = True
    require_negative: bool = False
    metrics: tuple[str, ...] = RANKING_METRICS
    primary: str = "map"
    description: str = ""
    task: str = "ranking"

    def keeps(self, labels: Sequence[float]) -> bool:
        """Whether a group with these candidate labels is evaluated."""
        n_pos = sum(1 for y in labels if y > 0)
        if self.require_positive and n_pos == 0:
            return False
        return not (self.require_negative and n_pos == len(labels))


@dataclass(frozen=True, kw_only=True)
class ClassificationProtocol:
    """Plain classification over every pair.

    Args:
        name: a short id written into results.
        num_classes: C; labels are class indices 0 .. C-1.
        class_names: the label of each class index, e.g. ("NEUTRAL", "ENTAILMENT", ...).
        metrics: "accuracy", "f1" (binary F1 of class 1 when C = 2, macro F1 otherwise) and
            "macro_f1".
        primary: the metric used for model selection.
        description: one sentence for results tables.
    """

    name: str
    num_classes: int
    class_names: tuple[str, ...] = ()
    metrics: tuple[str, ...] = CLASSIFICATION_METRICS
    primary: str = "accuracy"
    description: str = ""
    task: str = "classification"

    def __post_init__(self) -> None:
        if self.num_classes < 2:
            raise ValueError(f"{self.name}: num_classes must be >= 2, got {self.num_classes}")
        if self.class_names and len(self.class_names) != self.num_classes:
            raise ValueError(
                f"{self.name}: {len(self.class_names)} class_names for {self.num_classes} classes"
            )


@dataclass(frozen=True, kw_only=True)
class RegressionProtocol:
    """A real-valued similarity score per pair (STS, SICK relatedness).

    Args:
        name: a short id written into results.
        min_score, max_score: the gold score range (STS 0-5, SICK 1-5); real numbers, kept as
            ints when integral. Only integer bounds allow the KL objective of Tai et al.
            (2015), a distribution over the integer scores min_score .. max_score.
        metrics: among "pearson", "spearman", "mse".
        primary: the metric used for model selection.
        by_group: also report Pearson per group (the example's `group`, e.g. SemEval's
            "2015/images") as "pearson/<group>", and as "pearson" the pair-weighted mean of the
            per-group values (the SemEval year score) instead of the pooled Pearson.
        description: one sentence for results tables.
    """

    name: str
    min_score: float
    max_score: float
    metrics: tuple[str, ...] = REGRESSION_METRICS
    primary: str = "pearson"
    by_group: bool = False
    description: str = ""
    task: str = "regression"

    def __post_init__(self) -> None:
        # Integral bounds are stored as ints, so that 5.0 and 5 are one protocol and print alike.
        object.__setattr__(self, "min_score", integral(self.min_score))
        object.__setattr__(self, "max_score", integral(self.max_score))
        if not self.min_score < self.max_score:
            raise ValueError(f"{self.name}: min_score must be < max_score")

    @property
    def integer_bounds(self) -> bool:
        """Whether both bounds are integers (what a KL-trained head needs)."""
        return isinstance(self.min_score, int) and isinstance(self.max_score, int)

    @property
    def num_levels(self) -> int:
        """The number of integer score levels, the output size of a KL-trained head."""
        if not self.integer_bounds:
            raise ValueError(
                f"{self.name}: score range {self.min_score}..{self.max_score} has no integer "
                "levels (integer bounds needed)"
            )
        return int(self.max_score - self.min_score) + 1


def integral(value: float) -> float:
    """`value` as an int when it is integral (5.0 -> 5), else unchanged; bools are refused.

    Raises:
        ValueError: `value` is a bool, or not a finite real number.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"a score bound must be a finite number, got {value!r}")
    number = float(value)
    return int(number) if number.is_integer() else number


Protocol = RankingProtocol | ClassificationProtocol | RegressionProtocol

P = TypeVar("P", RankingProtocol, ClassificationProtocol, RegressionProtocol)


def non_standard(protocol: P, name: str, description: str) -> P:
    """`protocol` (same groups and metrics) for a split outside a corpus's official protocol.

    Args:
        protocol: the official protocol it evaluates like.
        name: its name, without the " (non-standard)" that is appended.
        description: what is non-standard about it, without the "NON-STANDARD: " prefix.

    Example:
        `non_standard(SNLI, "snli-train-on-dev", "90% of dev for training, 10% for selection.")`
        is SNLI's protocol named "snli-train-on-dev (non-standard)".
    """
    return replace(
        protocol, name=f"{name} (non-standard)", description=f"NON-STANDARD: {description}"
    )
