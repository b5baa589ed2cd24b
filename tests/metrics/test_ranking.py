"""Ranking metrics: trec_eval agreement, hand-computed values, ties, properties, grouping."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmatch.metrics import (
    METRIC_FUNCTIONS,
    average_precision,
    metric_function,
    ndcg_at_k,
    precision_at_k,
    rank_order,
    ranking_metrics,
    recall_n_at_k,
    reciprocal_rank,
)

# ours -> pytrec_eval measure
TREC_MEASURES = {
    "map": "map",
    "mrr": "recip_rank",
    "ndcg@3": "ndcg_cut_3",
    "ndcg@5": "ndcg_cut_5",
    "p@1": "P_1",
    "p@5": "P_5",
}


def _random_queries(
    rng: np.random.Generator, num: int, max_label: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    queries = []
    for _ in range(num):
        n = int(rng.integers(1, 31))
        labels = rng.integers(0, max_label + 1, size=n)
        labels[rng.integers(n)] = rng.integers(1, max_label + 1)  # at least one relevant
        scores = rng.permutation(n) + rng.random(n) * 0.5  # distinct: no ties
        queries.append((scores, labels))
    return queries


@pytest.mark.parametrize("max_label", [1, 3], ids=["binary", "graded"])
def test_matches_trec_eval_on_random_runs_without_ties(max_label: int) -> None:
    queries = _random_queries(np.random.default_rng(max_label), 250, max_label)
    qrels = {
        f"q{q}": {f"d{i}": int(y) for i, y in enumerate(labels)}
        for q, (_, labels) in enumerate(queries)
    }
    run = {
        f"q{q}": {f"d{i}": float(s) for i, s in enumerate(scores)}
        for q, (scores, _) in enumerate(queries)
    }
    expected = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_MEASURES.values())).evaluate(run)
    for q, (scores, labels) in enumerate(queries):
        for ours, theirs in TREC_MEASURES.items():
            got = metric_function(ours)(scores, labels, "pessimistic")
            assert got == pytest.approx(expected[f"q{q}"][theirs], abs=1e-6), (q, ours)


def test_hand_computed_binary() -> None:
    scores, labels = [0.9, 0.8, 0.7, 0.6], [0, 1, 0, 1]
    # relevant at ranks 2 and 4: AP = (1/2 + 2/4) / 2
    assert average_precision(scores, labels) == pytest.approx(0.5)
    assert reciprocal_rank(scores, labels) == pytest.approx(0.5)
    assert precision_at_k(scores, labels, 1) == 0.0
    assert precision_at_k(scores, labels, 2) == pytest.approx(0.5)
    assert precision_at_k(scores, labels, 5) == pytest.approx(2 / 5)  # k in the denominator
    # DCG@3 = 1/log2(3); IDCG@3 = 1 + 1/log2(3)  -> 0.386853
    assert ndcg_at_k(scores, labels, 3) == pytest.approx(
        (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    )
    assert ndcg_at_k(scores, labels, 3) == pytest.approx(0.3868528, abs=1e-7)
    # DCG@5 = 1/log2(3) + 1/log2(5); IDCG@5 = 1 + 1/log2(3)  -> 0.650921
    assert ndcg_at_k(scores, labels, 5) == pytest.approx(0.6509209, abs=1e-7)


def test_hand_computed_graded_ndcg() -> None:
    scores, labels = [0.9, 0.8, 0.7, 0.6], [1, 3, 0, 2]
    # DCG@3 = 1/log2(2) + 3/log2(3) + 0 = 2.892789
    # IDCG@3 = 3/log2(2) + 2/log2(3) + 1/log2(4) = 4.761860  -> 0.607492
    assert ndcg_at_k(scores, labels, 3) == pytest.approx(0.6074915, abs=1e-7)
    # AP, RR and P use relevance label > 0: relevant at ranks 1, 2, 4
    assert average_precision(scores, labels) == pytest.approx((1 + 1 + 3 / 4) / 3)
    assert reciprocal_rank(scores, labels) == 1.0


def test_no_relevant_candidate_scores_zero() -> None:
    for name in ("map", "mrr", "ndcg@3", "p@1", "r2@1"):
        assert metric_function(name)([0.3, 0.2, 0.1], [0, 0, 0], "pessimistic") == 0.0
    assert average_precision([], []) == 0.0


def test_recall_n_at_k_hand_example() -> None:
    # Ubuntu layout: candidate 0 is the true response, 1..9 are negatives.
    labels = [1] + [0] * 9
    scores = [0.5, 0.4, 0.9, 0.7] + [0.1] * 6
    assert recall_n_at_k(scores, labels, 2, 1) == 1.0  # 0.5 beats 0.4
    assert recall_n_at_k(scores, labels, 10, 1) == 0.0  # ranked 3rd of 10
    assert recall_n_at_k(scores, labels, 10, 2) == 0.0
    assert recall_n_at_k(scores, labels, 10, 3) == 1.0
    assert recall_n_at_k(scores, labels, 10, 5) == 1.0
    # two relevant among the first 3, one of them in the top 1
    assert recall_n_at_k([0.2, 0.9, 0.5], [1, 1, 0], 3, 1) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="exceeds"):
        recall_n_at_k(scores, labels, 11, 1)


def test_pessimistic_ties_give_the_worst_case() -> None:
    scores, labels = [0.5] * 5, [1, 0, 1, 0, 0]
    assert rank_order(scores, labels).tolist() == [1, 3, 4, 0, 2]
    # relevant at ranks 4 and 5
    assert average_precision(scores, labels) == pytest.approx((1 / 4 + 2 / 5) / 2)
    assert reciprocal_rank(scores, labels) == pytest.approx(1 / 4)
    assert precision_at_k(scores, labels, 3) == 0.0
    # "input" keeps the order: relevant at ranks 1 and 3
    assert rank_order(scores, labels, ties="input").tolist() == [0, 1, 2, 3, 4]
    assert average_precision(scores, labels, ties="input") == pytest.approx((1 + 2 / 3) / 2)
    assert reciprocal_rank(scores, labels, ties="input") == 1.0


def test_ties_only_reorder_within_equal_scores() -> None:
    scores, labels = [0.5, 0.9, 0.5, 0.5, 0.1], [2, 0, 0, 1, 1]
    assert rank_order(scores, labels).tolist() == [1, 2, 3, 0, 4]
    assert rank_order(scores, labels, ties="input").tolist() == [1, 0, 2, 3, 4]
    with pytest.raises(ValueError, match="ties"):
        rank_order(scores, labels, ties="optimistic")  # type: ignore[arg-type]


def test_invalid_inputs_raise() -> None:
    with pytest.raises(ValueError, match="length"):
        average_precision([0.1, 0.2], [1])
    with pytest.raises(ValueError, match="NaN"):
        average_precision([0.1, float("nan")], [1, 0])
    with pytest.raises(ValueError, match=">= 0"):
        ndcg_at_k([0.1, 0.2], [1, -1], 2)
    with pytest.raises(ValueError, match="1-D"):
        average_precision([[0.1]], [[1]])
    for bad_k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be"):
            ndcg_at_k([0.1], [1], bad_k)  # type: ignore[arg-type]


def test_metric_names() -> None:
    s, y = [0.9, 0.8, 0.7, 0.6], [0, 1, 0, 1]
    assert metric_function("map")(s, y) == average_precision(s, y)
    assert metric_function("mrr")(s, y) == reciprocal_rank(s, y)
    assert metric_function("ndcg@7")(s, y) == ndcg_at_k(s, y, 7)
    assert metric_function("p@2")(s, y) == precision_at_k(s, y, 2)
    assert metric_function("r3@1")(s, y) == recall_n_at_k(s, y, 3, 1)
    assert METRIC_FUNCTIONS["ndcg@3"](s, y, "input") == ndcg_at_k(s, y, 3, ties="input")
    for bad in ("MAP", "ndcg", "ndcg@0", "ndcg@03", "p@", "map@3", "r@1", "r0@1", "recall@1"):
        with pytest.raises(ValueError, match=r"valid forms: .*ndcg@K"):
            metric_function(bad)


# ---- properties -------------------------------------------------------------------------

ALL_METRICS = ("map", "mrr", "ndcg@1", "ndcg@3", "ndcg@5", "p@1", "p@5", "r2@1")


@st.composite
def ranking_lists(draw: st.DrawFn, *, distinct: bool) -> tuple[np.ndarray, np.ndarray]:
    """(scores, labels): integer-valued scores (exact under the transforms below), graded labels."""
    n = draw(st.integers(2, 30))
    labels = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    values = st.integers(-(10**6), 10**6) if distinct else st.integers(0, 3)
    scores = draw(st.lists(values, min_size=n, max_size=n, unique=distinct))
    return np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)


@given(ranking_lists(distinct=False), st.sampled_from(["pessimistic", "input"]))
def test_metrics_lie_in_unit_interval(data: tuple[np.ndarray, np.ndarray], ties: str) -> None:
    scores, labels = data
    for name in ALL_METRICS:
        assert 0.0 <= metric_function(name)(scores, labels, ties) <= 1.0  # type: ignore[arg-type]


@given(ranking_lists(distinct=False))
def test_pessimistic_is_a_lower_bound(data: tuple[np.ndarray, np.ndarray]) -> None:
    scores, labels = data
    for name in ALL_METRICS:
        fn = metric_function(name)
        assert fn(scores, labels, "pessimistic") <= fn(scores, labels, "input") + 1e-12


@given(st.lists(st.integers(0, 3), min_size=1, max_size=30).filter(any), st.randoms())
def test_perfect_ranking_scores_one(labels: list[int], rnd: object) -> None:
    y = np.asarray(labels, dtype=np.float64)
    noise = np.asarray(rnd.sample(range(1000), len(y))) / 2000  # type: ignore[attr-defined]
    scores = y + noise  # distinct, and never reorders two different labels
    for name in ("map", "mrr", "ndcg@1", "ndcg@3", "ndcg@5", "p@1"):
        assert metric_function(name)(scores, y) == pytest.approx(1.0)


@given(ranking_lists(distinct=True))
def test_invariant_to_increasing_transform(data: tuple[np.ndarray, np.ndarray]) -> None:
    scores, labels = data
    transformed = np.sign(scores) * np.log1p(np.abs(scores)) * 3.0 - 7.0
    for name in ALL_METRICS:
        fn = metric_function(name)
        assert fn(transformed, labels) == fn(scores, labels)


@given(ranking_lists(distinct=True), st.randoms())
def test_invariant_to_permuting_candidates(
    data: tuple[np.ndarray, np.ndarray], rnd: object
) -> None:
    scores, labels = data
    perm = np.asarray(rnd.sample(range(len(scores)), len(scores)))  # type: ignore[attr-defined]
    for name in ALL_METRICS:
        if name.startswith("r"):
            continue  # R_n@k depends on input order by definition
        fn = metric_function(name)
        assert fn(scores[perm], labels[perm]) == pytest.approx(fn(scores, labels))


@given(ranking_lists(distinct=False), st.sampled_from(["pessimistic", "input"]))
def test_irrelevant_last_candidate_changes_nothing(
    data: tuple[np.ndarray, np.ndarray], ties: str
) -> None:
    scores, labels = data
    more_scores, more_labels = np.append(scores, scores.min() - 1), np.append(labels, 0)
    for fn in (average_precision, reciprocal_rank):
        assert fn(more_scores, more_labels, ties=ties) == fn(scores, labels, ties=ties)  # type: ignore[arg-type]


# ---- ranking_metrics ----------------------------------------------------------------------


def test_ranking_metrics_groups_in_first_appearance_order() -> None:
    groups = ["b", "a", "b", "a", "c", "b"]
    scores = [0.1, 0.9, 0.8, 0.2, 0.5, 0.3]
    labels = [1, 0, 0, 1, 0, 1]
    summary, rows = ranking_metrics(scores, labels, groups, metrics=("map", "mrr", "p@1"))
    assert [r["group"] for r in rows] == ["b", "a", "c"]
    assert [(r["num_candidates"], r["num_relevant"]) for r in rows] == [(3, 2), (2, 1), (1, 0)]
    # b: scores .1 .8 .3 labels 1 0 1 -> ranked labels 0 1 1: AP = (1/2 + 2/3)/2, RR = 1/2
    # a: ranked labels 0 1: AP = RR = 1/2;  c: nothing relevant -> 0
    assert rows[0]["map"] == pytest.approx(7 / 12)
    assert [r["mrr"] for r in rows] == pytest.approx([0.5, 0.5, 0.0])
    assert summary["map"] == pytest.approx((7 / 12 + 0.5 + 0.0) / 3)
    assert summary["p@1"] == 0.0
    assert summary["num_queries"] == 3


def test_ranking_metrics_keep_filter() -> None:
    groups = ["q1"] * 3 + ["q2"] * 2 + ["q3"] * 2
    scores = [0.9, 0.5, 0.1, 0.7, 0.6, 0.2, 0.3]
    labels = [0, 1, 0, 0, 0, 1, 1]

    def has_positive_and_negative(ys: list[float]) -> bool:
        return 0 < sum(y > 0 for y in ys) < len(ys)

    summary, rows = ranking_metrics(scores, labels, groups, keep=has_positive_and_negative)
    assert [r["group"] for r in rows] == ["q1"]  # q2: no positive, q3: all positive
    assert summary["num_queries"] == 1
    assert summary["map"] == pytest.approx(0.5)
    assert set(summary) == {"map", "mrr", "ndcg@3", "ndcg@5", "p@1", "num_queries"}
    # (1/log2(3)) / 1 for a single relevant candidate at rank 2
    assert summary["ndcg@3"] == pytest.approx(1 / math.log2(3))


def test_ranking_metrics_matches_per_group_calls() -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 20, size=1000)
    groups = np.repeat([f"q{i}" for i in range(len(sizes))], sizes)
    perm = rng.permutation(len(groups))  # interleave the groups
    groups, scores = groups[perm].tolist(), rng.random(len(groups))
    labels = (rng.random(len(groups)) < 0.3).astype(float)
    summary, rows = ranking_metrics(scores, labels, groups, ties="input")
    assert summary["num_queries"] == len(rows) == 1000
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    for row in rows[:50]:
        idx = by_group[row["group"]]
        assert row["ndcg@5"] == ndcg_at_k(scores[idx], labels[idx], 5, ties="input")
    assert summary["mrr"] == pytest.approx(np.mean([r["mrr"] for r in rows]))


def test_ranking_metrics_errors() -> None:
    with pytest.raises(ValueError, match="length"):
        ranking_metrics([0.1, 0.2], [1, 0], ["q"])
    with pytest.raises(ValueError, match="length"):
        ranking_metrics([0.1, 0.2], [1], ["q", "q"])
    with pytest.raises(ValueError, match="no query group kept"):
        ranking_metrics([0.1, 0.2], [0, 0], ["q", "q"], keep=lambda ys: any(y > 0 for y in ys))
    with pytest.raises(ValueError, match="no query group kept"):
        ranking_metrics([], [], [])
    with pytest.raises(ValueError, match="unknown ranking metric"):
        ranking_metrics([0.1], [1], ["q"], metrics=("map", "ndcg"))


@settings(max_examples=50)
@given(ranking_lists(distinct=True))
def test_single_group_equals_direct_call(data: tuple[np.ndarray, np.ndarray]) -> None:
    scores, labels = data
    summary, _ = ranking_metrics(scores, labels, [7] * len(scores), metrics=("map", "ndcg@3"))
    assert summary["map"] == average_precision(scores, labels)
    assert summary["ndcg@3"] == ndcg_at_k(scores, labels, 3)
