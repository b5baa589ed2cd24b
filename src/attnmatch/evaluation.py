"""Evaluation: a model on an encoded split under the split's official protocol."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from attnmatch.data.collate import bucketed_batches, collate
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.protocol import (
    ClassificationProtocol,
    Protocol,
    RankingProtocol,
    RegressionProtocol,
)
from attnmatch.tasks import ranking_scores, regression_predictions
from attnmatch.metrics import classification_metrics, ranking_metrics, regression_metrics


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


def _declared_num_outputs(model: nn.Module) -> int | None:
    """The model's `config.num_outputs` (every registered model declares it), else None."""
    inner = getattr(model, "module", model)  # a DistributedDataParallel wrapper
    n = getattr(getattr(inner, "config", None), "num_outputs", None)
    return n if isinstance(n, int) and n > 0 else None


@torch.inference_mode()
def predict(
    model: nn.Module, data: EncodedPairs, *, batch_size: int = 512, device: str = "cpu"
) -> np.ndarray:
    """Model outputs for every pair of `data`, in the data's order.

    Batches are length-bucketed for speed and run under `torch.inference_mode`; results are put
    back in order.

    Returns:
        (N, num_outputs) float32 array. With no pairs, no forward pass is run and the array is
        (0, num_outputs), or (0, 1) when the model does not declare `config.num_outputs`.
    """
    if len(data) == 0:
        return np.empty((0, _declared_num_outputs(model) or 1), dtype=np.float32)
    was_training = model.training
    model.eval()
    outputs: np.ndarray | None = None
    try:
        for idx in bucketed_batches(data, batch_size):
            with torch.inference_mode():  # no autograd bookkeeping at all
                out = model(collate(data, idx).to(device)).float().cpu().numpy()  # (b, outputs)
            if outputs is None:
                outputs = np.empty((len(data), out.shape[1]), dtype=np.float32)
            outputs[idx] = out
    finally:
        model.train(was_training)
    assert outputs is not None  # len(data) > 0: at least one batch ran
    return outputs


def evaluate(
    model: nn.Module,
    data: EncodedPairs,
    protocol: Protocol,
    *,
    batch_size: int = 512,
    device: str = "cpu",
) -> Report:
    """Scores `data` and computes the protocol's metrics.

    Ranking: scores are grouped by query; only the groups the protocol keeps count (e.g. WikiQA:
    questions with at least one correct answer); ties are broken pessimistically (see
    `attnmatch.metrics.ranking`). Classification: argmax accuracy / F1 over all pairs.
    Regression: the predicted score (`regression_predictions`) against the gold score; with a
    `by_group` protocol (SemEval STS) "pearson" is the pair-weighted mean of per-set Pearson and
    every set's value is reported as "pearson/<set>".

    Raises:
        ValueError: `data` has no pairs (nothing to evaluate); no forward pass is run.
    """
    outputs = predict(model, data, batch_size=batch_size, device=device)
    return report_from_outputs(outputs, data, protocol)


def report_from_outputs(outputs: np.ndarray, data: EncodedPairs, protocol: Protocol) -> Report:
    """The protocol's metrics for `outputs` ((N, num_outputs), e.g. from `predict`) on `data`.

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
        return _regression_report(outputs, data, protocol)
    raise TypeError(f"unsupported protocol {protocol!r}")


def _regression_report(
    outputs: np.ndarray, data: EncodedPairs, protocol: RegressionProtocol
) -> Report:
    predictions = regression_predictions(torch.from_numpy(outputs), protocol.min_score).numpy()
    groups = [data.group_names[g] for g in data.group_ids] if protocol.by_group else None
    metrics = regression_metrics(predictions, data.labels, metrics=protocol.metrics, groups=groups)
    rows: list[dict[str, Any]] = []
    if groups is not None:
        rows = [
            {"group": g, "pairs": n, "pearson": metrics[f"pearson/{g}"]}
            for g, n in Counter(groups).items()
        ]
    return Report(metrics, protocol.name, protocol.primary, len(data), rows)
