"""Evaluation protocols as data: which groups count and which metrics a split reports.

A dataset spec names its official protocol per split; `attnmatch.evaluation.evaluate` applies
it. Nothing else decides which queries are scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RANKING_METRICS = ("map", "mrr", "ndcg@3", "ndcg@5", "p@1")
CLASSIFICATION_METRICS = ("accuracy", "f1")


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
    """Plain classification over every pair."""

    name: str
    num_classes: int
    metrics: tuple[str, ...] = CLASSIFICATION_METRICS
    primary: str = "accuracy"
    description: str = ""
    task: str = "classification"


Protocol = RankingProtocol | ClassificationProtocol
