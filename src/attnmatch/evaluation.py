"""Evaluation: a model's outputs on an encoded split under the split's protocol (a task).

The protocol computes the metrics (`Task.measure`) and the per-item results (`Task.items`);
this module gives them their form, a `Report`, and runs a model over a split (`evaluate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from attnmatch.data.encoding import EncodedPairs
from attnmatch.tasks import Task


@dataclass
class Report:
    """Aggregate metrics and one row per evaluated query (ranking) or set (grouped regression)."""

    metrics: dict[str, float]
    protocol: str
    primary: str
    num_pairs: int
    per_query: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": self.metrics,
            "protocol": self.protocol,
            "primary": self.primary,
            "num_pairs": self.num_pairs,
            "per_query": self.per_query,
        }


class Predictor(Protocol):
    """What `evaluate` runs: a model's task and its raw outputs (a `Matcher`)."""

    @property
    def task(self) -> Task: ...

    def predict(self, data: EncodedPairs) -> np.ndarray: ...


NO_PAIRS = "nothing to evaluate: the split has no pairs"


def evaluate(matcher: Predictor, data: EncodedPairs, protocol: Task) -> Report:
    """Scores `data` with `matcher` and computes the protocol's metrics.

    Ranking: scores are grouped by query; only the groups the protocol keeps count (e.g. WikiQA:
    questions with at least one correct answer); ties are broken pessimistically (see
    `attnmatch.metrics.ranking`). Classification: argmax accuracy / F1 over all pairs.
    Regression: the predicted score (`regression_predictions`) against the gold score; with a
    `by_group` protocol (SemEval STS) "pearson" is the pair-weighted mean of per-set Pearson and
    every set's value is reported as "pearson/<set>".

    Raises:
        ValueError: `data` has no pairs (nothing to evaluate); no forward pass is run.
    """
    if len(data) == 0:
        raise ValueError(NO_PAIRS)
    return report_from_outputs(matcher.predict(data), data, protocol, task=matcher.task)


def report_from_outputs(
    outputs: np.ndarray, data: EncodedPairs, protocol: Task, *, task: Task | None = None
) -> Report:
    """The protocol's metrics for `outputs` ((N, num_outputs), e.g. from `predict`) on `data`.

    `task` is the model's: a regression model's outputs become scores on its own range
    (`min_score`), which may differ from the split's (default: the protocol's).

    Raises:
        ValueError: `data` has no pairs.
    """
    if len(data) == 0:
        raise ValueError(NO_PAIRS)
    metrics, rows = protocol.measure(outputs, data, model=task)
    return Report(metrics, protocol.name, protocol.primary, len(data), rows)


def report_items(
    outputs: np.ndarray, data: EncodedPairs, protocol: Task, *, task: Task | None = None
) -> dict[str, Any]:
    """One record per evaluated item of a split, for paired significance tests
    (`attnmatch.research.claims`): ranking, each kept query's metrics (`Report.per_query`); classification,
    each pair's gold and predicted class; regression, each pair's gold and predicted score (and
    its set, for a `by_group` protocol). JSON-ready; items are in the split's order."""
    if len(data) == 0:
        raise ValueError(NO_PAIRS)
    return protocol.items(outputs, data, model=task)
