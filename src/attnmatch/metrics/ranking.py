"""Ranking metrics for one query's candidate list, and their mean over query groups.

Definitions follow trec_eval (checked against `pytrec_eval` in the tests). A candidate is
relevant when its label is > 0; labels may be graded (gain = label) and must be >= 0.

- AP: mean over relevant candidates of the precision at their rank (trec_eval `map`).
- RR: 1 / rank of the first relevant candidate (`recip_rank`).
- nDCG@k: sum_{i<=k} label_i / log2(i + 1), over the same sum for the labels sorted descending
  (`ndcg_cut_k`; linear gain).
- P@k: number of relevant candidates in the top k, divided by k even if fewer than k candidates
  exist (`P_k`).
- R_n@k: among the first n candidates (in input order), the fraction of relevant ones ranked in
  the top k (Ubuntu Dialogue Corpus; with one relevant candidate it is the hit rate).

A list with no relevant candidate scores 0.0 on every metric.

Ties. Equal scores are ordered deterministically, by a stable sort:

- `ties="pessimistic"` (default): among equal scores, less relevant candidates come first, then
  input order. A scorer that cannot separate candidates gets the worst case, never credit for
  how the data happens to be ordered. (trec_eval instead breaks ties by document name, so it
  agrees with this module only when scores are distinct.)
- `ties="input"`: among equal scores, candidates keep their input order.

Example:
    >>> average_precision([0.9, 0.8, 0.7, 0.6], [0, 1, 0, 1])
    0.5
    >>> ranking_metrics([0.9, 0.1, 0.5], [1, 0, 1], ["q1", "q1", "q2"], metrics=("map",))[0]
    {'map': 1.0, 'num_queries': 2}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

Ties = Literal["pessimistic", "input"]

DEFAULT_METRICS = ("map", "mrr", "ndcg@3", "ndcg@5", "p@1")


class RankingMetric(Protocol):
    """A metric of one query: `fn(scores, labels, ties) -> float`."""

    def __call__(self, scores: ArrayLike, labels: ArrayLike, ties: Ties = ...) -> float: ...


def _as_arrays(
    scores: ArrayLike, labels: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if s.ndim != 1 or y.ndim != 1:
        raise ValueError(f"scores and labels must be 1-D, got shapes {s.shape} and {y.shape}")
    if s.shape != y.shape:
        raise ValueError(f"scores and labels differ in length: {len(s)} != {len(y)}")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    if not np.isfinite(y).all() or (y < 0).any():
        raise ValueError("labels must be finite and >= 0")
    return s, y


def _check_cutoff(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def rank_order(
    scores: ArrayLike, labels: ArrayLike, *, ties: Ties = "pessimistic"
) -> NDArray[np.intp]:
    """Candidate indices in rank order, best first.

    Args:
        scores: (n,) model scores, higher is better.
        labels: (n,) relevance labels, used only to break ties pessimistically.
        ties: "pessimistic" or "input" (see the module docstring).

    Returns:
        (n,) indices into `scores`: `order[0]` is the top-ranked candidate.
    """
    s, y = _as_arrays(scores, labels)
    return _order(s, y, ties)


def _order(s: NDArray[np.float64], y: NDArray[np.float64], ties: Ties) -> NDArray[np.intp]:
    # np.lexsort is stable and sorts by its last key first.
    if ties == "pessimistic":
        return np.lexsort((y, -s))
    if ties == "input":
        return np.lexsort((-s,))
    raise ValueError(f"ties must be 'pessimistic' or 'input', got {ties!r}")


def _ranked_labels(scores: ArrayLike, labels: ArrayLike, ties: Ties) -> NDArray[np.float64]:
    s, y = _as_arrays(scores, labels)
    return y[_order(s, y, ties)]


def average_precision(scores: ArrayLike, labels: ArrayLike, *, ties: Ties = "pessimistic") -> float:
    """Average precision: sum of precision@rank(d) over relevant d, divided by #relevant."""
    rel = _ranked_labels(scores, labels, ties) > 0
    num_rel = int(rel.sum())
    if num_rel == 0:
        return 0.0
    precision = np.cumsum(rel) / np.arange(1, len(rel) + 1)
    return float(precision[rel].sum() / num_rel)


def reciprocal_rank(scores: ArrayLike, labels: ArrayLike, *, ties: Ties = "pessimistic") -> float:
    """Reciprocal rank of the first relevant candidate (0.0 when none is relevant)."""
    rel = _ranked_labels(scores, labels, ties) > 0
    if not rel.any():
        return 0.0
    return 1.0 / (int(np.argmax(rel)) + 1)


def ndcg_at_k(scores: ArrayLike, labels: ArrayLike, k: int, *, ties: Ties = "pessimistic") -> float:
    """nDCG@k with linear gain (gain = label) and discount 1 / log2(rank + 1)."""
    _check_cutoff("k", k)
    gains = _ranked_labels(scores, labels, ties)
    idcg = _dcg(np.sort(gains)[::-1][:k])
    if idcg == 0.0:
        return 0.0
    return _dcg(gains[:k]) / idcg


def _dcg(gains: NDArray[np.float64]) -> float:
    # The same summation for DCG and ideal DCG, so a perfect ranking gives exactly 1.0.
    return float(np.sum(gains / np.log2(np.arange(2, len(gains) + 2))))


def precision_at_k(
    scores: ArrayLike, labels: ArrayLike, k: int, *, ties: Ties = "pessimistic"
) -> float:
    """Relevant candidates in the top k, divided by k (also when the list is shorter than k)."""
    _check_cutoff("k", k)
    rel = _ranked_labels(scores, labels, ties) > 0
    if not rel.any():
        return 0.0
    return float(rel[:k].sum()) / k


def recall_n_at_k(
    scores: ArrayLike, labels: ArrayLike, n: int, k: int, *, ties: Ties = "pessimistic"
) -> float:
    """R_n@k: of the relevant candidates among the first n (input order), the share ranked <= k.

    Args:
        scores: (m,) scores with m >= n.
        labels: (m,) relevance labels.
        n: how many leading candidates compete (Ubuntu: the true response plus n - 1 negatives).
        k: rank cut-off.
    """
    _check_cutoff("n", n)
    _check_cutoff("k", k)
    s, y = _as_arrays(scores, labels)
    if n > len(s):
        raise ValueError(f"n={n} exceeds the number of candidates ({len(s)})")
    rel = y[:n][_order(s[:n], y[:n], ties)] > 0
    num_rel = int(rel.sum())
    if num_rel == 0:
        return 0.0
    return float(rel[:k].sum()) / num_rel


def _map(scores: ArrayLike, labels: ArrayLike, ties: Ties = "pessimistic") -> float:
    return average_precision(scores, labels, ties=ties)


def _mrr(scores: ArrayLike, labels: ArrayLike, ties: Ties = "pessimistic") -> float:
    return reciprocal_rank(scores, labels, ties=ties)


def _with_cutoff(fn: Callable[..., float], *cutoffs: int) -> RankingMetric:
    def metric(scores: ArrayLike, labels: ArrayLike, ties: Ties = "pessimistic") -> float:
        return fn(scores, labels, *cutoffs, ties=ties)

    return metric


_NAME_FORMS = '"map", "mrr", "ndcg@K", "p@K", "rN@K" (lower case, integers K, N >= 1)'
_CUTOFF_NAME = re.compile(r"(ndcg|p|r([1-9]\d*))@([1-9]\d*)")


def metric_function(name: str) -> RankingMetric:
    """Parses a metric name into `fn(scores, labels, ties) -> float`.

    Args:
        name: "map", "mrr", "ndcg@K", "p@K" or "rN@K" (R_N@K), lower case.

    Raises:
        ValueError: the name is none of these forms.
    """
    if name == "map":
        return _map
    if name == "mrr":
        return _mrr
    match = _CUTOFF_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"unknown ranking metric {name!r}; valid forms: {_NAME_FORMS}")
    kind, n, k = match.group(1), match.group(2), int(match.group(3))
    if kind == "ndcg":
        return _with_cutoff(ndcg_at_k, k)
    if kind == "p":
        return _with_cutoff(precision_at_k, k)
    return _with_cutoff(recall_n_at_k, int(n), k)


# The usual names, for lookup and listing; `metric_function` parses any valid name.
METRIC_FUNCTIONS: Mapping[str, RankingMetric] = {
    name: metric_function(name)
    for name in (
        "map",
        "mrr",
        "ndcg@1",
        "ndcg@3",
        "ndcg@5",
        "ndcg@10",
        "ndcg@20",
        "p@1",
        "p@3",
        "p@5",
        "p@10",
    )
}


def ranking_metrics(
    scores: Sequence[float] | ArrayLike,
    labels: Sequence[float] | ArrayLike,
    groups: Sequence[Hashable],
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    ties: Ties = "pessimistic",
    keep: Callable[[list[float]], bool] | None = None,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Per-query metrics and their mean over the kept query groups.

    Args:
        scores: (N,) a score per pair, over all pairs of all queries.
        labels: (N,) relevance per pair.
        groups: (N,) the query id of each pair; groups are reported in order of first appearance.
        metrics: metric names (see `metric_function`).
        ties: tie-breaking (see the module docstring).
        keep: optional protocol filter, `keep(labels_of_group) -> bool`; None keeps every group.

    Returns:
        `(summary, rows)`: `summary` maps each metric to its mean over kept groups, plus
        "num_queries" (int); `rows` has one dict per kept group with "group", "num_candidates",
        "num_relevant" and each metric.

    Raises:
        ValueError: lengths differ, a metric name is unknown, or no group is kept.
    """
    fns = {name: metric_function(name) for name in metrics}
    s, y = _as_arrays(scores, labels)
    if len(groups) != len(s):
        raise ValueError(f"groups differ in length from scores: {len(groups)} != {len(s)}")
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)

    rows: list[dict[str, Any]] = []
    for g, idx_list in members.items():
        idx = np.asarray(idx_list)
        gs, gy = s[idx], y[idx]
        if keep is not None and not keep(gy.tolist()):
            continue
        row: dict[str, Any] = {
            "group": g,
            "num_candidates": len(idx),
            "num_relevant": int((gy > 0).sum()),
        }
        for name, fn in fns.items():
            row[name] = fn(gs, gy, ties)
        rows.append(row)
    if not rows:
        raise ValueError(f"no query group kept (of {len(members)}); check the protocol filter")
    summary: dict[str, float] = {name: float(np.mean([r[name] for r in rows])) for name in fns}
    summary["num_queries"] = len(rows)
    return summary, rows
