"""Platt scaling: the logistic line it fits, its edge cases, and its saved form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnmatch.calibration import PlattScaling, fit_platt


def test_fit_platt_recovers_a_logistic_line() -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(0.0, 2.0, 20000)
    relevant = rng.random(20000) < 1 / (1 + np.exp(-(1.5 * scores - 2.0)))
    platt = fit_platt(scores, relevant)
    assert platt.scale == pytest.approx(1.5, rel=0.05)
    assert platt.shift == pytest.approx(-2.0, rel=0.05)


def test_the_maximum_likelihood_line_of_the_smoothed_targets() -> None:
    """At the fit, the gradient of the cross-entropy against Platt's targets is zero."""
    rng = np.random.default_rng(1)
    scores = rng.normal(size=200)
    relevant = rng.random(200) < 0.3 + 0.4 * (scores > 0)
    platt = fit_platt(scores, relevant)
    n_pos, n_neg = int(relevant.sum()), int((~relevant).sum())
    target = np.where(relevant, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    residual = platt.probability(scores) - target
    assert abs(residual.sum()) < 1e-6 and abs((residual * scores).sum()) < 1e-6


def test_separable_scores_give_a_finite_line() -> None:
    platt = fit_platt([-2.0, -1.0, 1.0, 2.0], [False, False, True, True])
    assert math.isfinite(platt.scale) and platt.scale > 0
    low, high = platt.probability([-2.0, 2.0])
    assert 0 < low < 0.5 < high < 1


def test_scores_that_rank_relevant_pairs_lower_get_the_base_rate() -> None:
    platt = fit_platt([1.0, 2.0, 3.0, 4.0], [True, False, False, False])
    assert platt.scale == 0.0
    expected = np.mean([2 / 3, 1 / 5, 1 / 5, 1 / 5])  # Platt's smoothed targets
    np.testing.assert_allclose(platt.probability([-10.0, 10.0]), [expected, expected])
    constant = fit_platt([0.5, 0.5, 0.5], [True, False, False])
    assert constant.scale == 0.0


def test_probability_is_monotone_and_never_overflows() -> None:
    platt = PlattScaling(scale=3.0, shift=1.0)
    p = platt.probability(np.array([-1e6, -1.0, 0.0, 1.0, 1e6]))
    assert np.all(np.diff(p) >= 0) and p[0] == 0.0 and p[-1] == 1.0
    assert p[2] == pytest.approx(1 / (1 + math.exp(-1.0)))


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        fit_platt([], [])
    with pytest.raises(ValueError, match="equally long"):
        fit_platt([1.0, 2.0], [True])
    with pytest.raises(ValueError, match="finite"):
        fit_platt([1.0, math.nan], [True, False])
    with pytest.raises(ValueError, match="scale must be >= 0"):
        PlattScaling(scale=-1.0, shift=0.0)
    with pytest.raises(ValueError, match="finite"):
        PlattScaling(scale=math.inf, shift=0.0)
    with pytest.raises(ValueError, match="must be a number"):
        PlattScaling(scale=True, shift=0.0)


def test_saved_form_round_trips_and_is_checked() -> None:
    platt = PlattScaling(scale=0.5, shift=-1.25)
    assert PlattScaling.from_dict(platt.to_dict()) == platt
    assert platt.to_dict() == {"scale": 0.5, "shift": -1.25}
    for bad in ({"scale": 1.0}, {"scale": 1.0, "shift": 0.0, "bias": 1.0}, [1.0, 0.0]):
        with pytest.raises(ValueError, match="a scale and a shift"):
            PlattScaling.from_dict(bad)
