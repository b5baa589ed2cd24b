"""Regression metrics against direct computations, and the SemEval pair-weighted year score."""

from __future__ import annotations

import numpy as np
import pytest

from attnmatch.metrics import mse, pearson, regression_metrics, spearman, weighted_pearson
from attnmatch.metrics.regression import average_ranks


def test_pearson_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert pearson(x, 2 * x + 1) == pytest.approx(1.0)
    assert pearson(x, -x) == pytest.approx(-1.0)


def test_pearson_of_a_constant_is_zero() -> None:
    assert pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) == 0.0


def test_average_ranks_share_ties() -> None:
    np.testing.assert_allclose(average_ranks(np.array([10.0, 20.0, 10.0, 30.0])), [1.5, 3, 1.5, 4])


def test_spearman_by_hand_with_ties() -> None:
    # ranks of x: [1, 2.5, 2.5, 4]; of y: [1, 2, 3, 4] -> Pearson of the ranks.
    expected = np.corrcoef([1, 2.5, 2.5, 4], [1, 2, 3, 4])[0, 1]
    assert spearman([1, 2, 2, 5], [0.1, 0.2, 0.3, 0.9]) == pytest.approx(expected)
    assert spearman([1, 2, 3], [1, 4, 9]) == pytest.approx(1.0)  # monotone, not linear


def test_mse() -> None:
    assert mse([1, 2, 3], [1, 2, 5]) == pytest.approx(4 / 3)


def test_year_score_is_the_pair_weighted_mean_of_per_set_pearson() -> None:
    rng = np.random.default_rng(1)
    sizes = {"2015/images": 30, "2015/belief": 10, "2015/headlines": 60}
    groups = [g for g, n in sizes.items() for _ in range(n)]
    gold = rng.uniform(0, 5, size=len(groups))
    pred = gold + rng.normal(scale=[0.5 if g.endswith("images") else 2.0 for g in groups])
    mean, per_set, counts = weighted_pearson(pred, gold, groups)
    assert counts == sizes
    direct = {}
    for g in sizes:
        sel = np.array([x == g for x in groups])
        direct[g] = np.corrcoef(pred[sel], gold[sel])[0, 1]
    assert per_set == pytest.approx(direct)
    expected = sum(direct[g] * n for g, n in sizes.items()) / sum(sizes.values())
    assert mean == pytest.approx(expected)
    # ... which is not the unweighted mean, nor the pooled Pearson.
    assert mean != pytest.approx(np.mean(list(direct.values())))
    assert mean != pytest.approx(pearson(pred, gold))
    metrics = regression_metrics(pred, gold, groups=groups)
    assert metrics["pearson"] == pytest.approx(expected)
    assert metrics["pearson/2015/belief"] == pytest.approx(direct["2015/belief"])
    assert metrics["spearman"] == pytest.approx(spearman(pred, gold))  # pooled


def test_errors() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        pearson([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least 2"):
        pearson([1], [1])
    with pytest.raises(ValueError, match="finite"):
        pearson([1, float("nan")], [1, 2])
    with pytest.raises(ValueError, match="unknown regression metrics"):
        regression_metrics([1, 2], [1, 2], metrics=("r2",))
