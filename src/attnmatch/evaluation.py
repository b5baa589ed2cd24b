"""Evaluation: a Matcher on an encoded split under the split's official protocol."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.protocol import (
    ClassificationProtocol,
    Protocol,
    RankingProtocol,
    RegressionProtocol,
)
from attnmatch.metrics import classification_metrics, ranking_metrics, regression_metrics
from attnmatch.tasks import Task, ranking_scores, regression_predictions

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.matcher import Matcher


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


NO_PAIRS = "nothing to evaluate: the split has no pairs"


def evaluate(matcher: Matcher, data: EncodedPairs, protocol: Protocol) -> Report:
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
    outputs: np.ndarray, data: EncodedPairs, protocol: Protocol, *, task: Task | None = None
) -> Report:
    """The protocol's metrics for `outputs` ((N, num_outputs), e.g. from `predict`) on `data`.

    `task` is the model's: a regression model's outputs become scores on its own range
    (`min_score`), which may differ from the split's (default: the protocol's).

    Raises:
        ValueError: `data` has no pairs.
    """
    if len(data) == 0:
        raise ValueError(NO_PAIRS)
    if isinstance(protocol, RankingProtocol):
        scores = ranking_scores(torch.from_numpy(outputs)).numpy()
        groups = [data.group_names[g] for g in data.group_ids]
        metrics, rows = ranking_metrics(
            scores, data.labels, groups, metrics=protocol.metrics, keep=protocol.keeps
        )
        return Report(metrics, protocol.name, protocol.primary, len(data), rows)
    if isinstance(protocol, ClassificationProtocol):
        metrics = classification_metrics(
            outputs, data.labels.astype(np.int64), metrics=protocol.metrics
        )
        return Report(metrics, protocol.name, protocol.primary, len(data))
    if isinstance(protocol, RegressionProtocol):
        own = task is not None and task.kind == "regression"
        min_score = task.min_score if own and task is not None else protocol.min_score
        return _regression_report(outputs, data, protocol, min_score)
    raise TypeError(f"unsupported protocol {protocol!r}")


def report_items(
    outputs: np.ndarray, data: EncodedPairs, protocol: Protocol, *, task: Task | None = None
) -> dict[str, Any]:
    """One record per evaluated item of a split, for paired significance tests
    (`attnmatch.claims`): ranking, each kept query's metrics (`Report.per_query`); classification,
    each pair's gold and predicted class; regression, each pair's gold and predicted score (and
    its set, for a `by_group` protocol). JSON-ready; items are in the split's order."""
    if isinstance(protocol, RankingProtocol):
        report = report_from_outputs(outputs, data, protocol, task=task)
        return {"kind": "ranking", "protocol": protocol.name, "queries": report.per_query}
    if isinstance(protocol, ClassificationProtocol):
        return {
            "kind": "classification",
            "protocol": protocol.name,
            "labels": data.labels.astype(np.int64).tolist(),
            "predicted": np.asarray(outputs).argmax(axis=1).tolist(),
        }
    if isinstance(protocol, RegressionProtocol):
        own = task is not None and task.kind == "regression"
        min_score = task.min_score if own and task is not None else protocol.min_score
        predictions = regression_predictions(torch.from_numpy(outputs), min_score).numpy()
        groups = [data.group_names[g] for g in data.group_ids] if protocol.by_group else None
        return {
            "kind": "regression",
            "protocol": protocol.name,
            "labels": [float(x) for x in data.labels],
            "predictions": [float(x) for x in predictions],
            "groups": groups,
        }
    raise TypeError(f"unsupported protocol {protocol!r}")


def _regression_report(
    outputs: np.ndarray, data: EncodedPairs, protocol: RegressionProtocol, min_score: float
) -> Report:
    predictions = regression_predictions(torch.from_numpy(outputs), min_score).numpy()
    groups = [data.group_names[g] for g in data.group_ids] if protocol.by_group else None
    metrics = regression_metrics(predictions, data.labels, metrics=protocol.metrics, groups=groups)
    rows: list[dict[str, Any]] = []
    if groups is not None:
        rows = [
            {"group": g, "pairs": n, "pearson": metrics[f"pearson/{g}"]}
            for g, n in Counter(groups).items()
        ]
    return Report(metrics, protocol.name, protocol.primary, len(data), rows)
