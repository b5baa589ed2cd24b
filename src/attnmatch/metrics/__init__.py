"""Evaluation metrics: ranking (per query group, trec_eval definitions), classification and
regression (Pearson, Spearman, MSE, the SemEval pair-weighted Pearson)."""

from attnmatch.metrics.classification import accuracy, classification_metrics, f1, macro_f1
from attnmatch.metrics.ranking import (
    METRIC_FUNCTIONS,
    RankingMetric,
    Ties,
    average_precision,
    metric_function,
    ndcg_at_k,
    precision_at_k,
    rank_order,
    ranking_metrics,
    recall_n_at_k,
    reciprocal_rank,
)
from attnmatch.metrics.regression import (
    mse,
    pearson,
    regression_metrics,
    spearman,
    weighted_pearson,
)

# Metrics where a smaller value is better; every other metric is better when larger.
LOWER_IS_BETTER = frozenset({"mse"})


def greater_is_better(metric: str) -> bool:
    """Whether a larger value of `metric` is better (False for errors such as "mse")."""
    return metric not in LOWER_IS_BETTER


__all__ = [
    "LOWER_IS_BETTER",
    "greater_is_better",
    "METRIC_FUNCTIONS",
    "RankingMetric",
    "Ties",
    "accuracy",
    "average_precision",
    "classification_metrics",
    "f1",
    "macro_f1",
    "metric_function",
    "mse",
    "pearson",
    "regression_metrics",
    "spearman",
    "weighted_pearson",
    "ndcg_at_k",
    "precision_at_k",
    "rank_order",
    "ranking_metrics",
    "recall_n_at_k",
    "reciprocal_rank",
]
