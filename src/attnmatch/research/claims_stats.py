"""The claims' seed-aware test: seeds and test items as two levels of variation.

A claim compares two trained systems A and B, each trained with S seeds and tested on the same N
items. Its statistic is the difference of the two means over seeds and items (MAP, accuracy), or
of the two seed-mean Pearsons. Both seeds and items vary it: another seed moves a run's score
(u, per seed), another test set moves the difference (w, per item), and each run errs on its own
items (e, per seed and item). A two-level random-effects model, estimated by moments:

- the seed part, ``var_s(A) / S_A + var_s(B) / S_B``, from each system's per-seed scores (it
  holds ``var(u) / S + var(e) / (S N)``);
- the item part, ``var_i(d) / N``, from each item's seed-mean difference d (it holds
  ``var(w) / N + var(e) / (S N)``); for Pearson, the paired bootstrap variance over items
  (resampled within each STS set) of the seed-mean difference;
- their sum, which counts the seed-by-item term ``var(e) / (S N)`` twice: the test errs on the
  safe side.

The t statistic ``diff / sqrt(seed part + item part)`` is read against Student's t with the
Welch-Satterthwaite degrees of freedom of the seed part (S_A + S_B - 2 at most, far fewer than
the items': the safe side again); p is two-sided and the interval is ``diff +- t * se``.
Quantiles come from scipy.

Where the per-item results of the runs are not kept, the item part comes from the interval of
the earlier item-only test of the same runs (`recorded_item_part`), which is that same bootstrap
over items of the seed-mean difference. Holm's step-down adjustment (`holm`) then corrects the
p-values within each paper. `simulate` measures the false-positive rate of the test (and of the
earlier item-only test) with two identical systems given this project's own spreads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

INSTALL_HINT = "pip install 'attnmatch[claims]'"
try:
    from scipy import stats
except ImportError as e:  # pragma: no cover - the claims extra
    raise ImportError(
        f"attnmatch reproduce claims needs scipy: {INSTALL_HINT}", name="scipy"
    ) from e

Z975 = float(stats.norm.ppf(0.975))


@dataclass(frozen=True)
class SeedAware:
    """One claim's seed-aware comparison."""

    diff: float
    low: float
    high: float
    p: float
    se: float
    df: float
    seed_var: float
    item_var: float
    items: int
    test: str


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The t-interval of the mean of `values` (at least 2), quantile from scipy."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    m = float(x.mean())
    return m - half, m + half


def seed_part(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(variance of mean(a) - mean(b) over seeds, its Welch-Satterthwaite degrees of freedom).

    Shape:
        a, b: ``(S_A,)``, ``(S_B,)``: each seed's score.
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    den = va**2 / (len(x) - 1) + vb**2 / (len(y) - 1)
    df = (va + vb) ** 2 / den if den > 0 else float(len(x) + len(y) - 2)
    return float(va + vb), float(df)


def combine(
    diff: float, seed_var: float, df: float, item_var: float, items: int, test: str
) -> SeedAware:
    """The t test and interval of `diff` with variance seed part + item part."""
    se = math.sqrt(seed_var + item_var)
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
        return SeedAware(diff, diff, diff, p, 0.0, df, seed_var, item_var, items, test)
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    half = float(stats.t.ppf(0.975, df)) * se
    return SeedAware(diff, diff - half, diff + half, p, se, df, seed_var, item_var, items, test)


def two_level_means(a: np.ndarray, b: np.ndarray) -> SeedAware:
    """The seed-aware test of mean(a) - mean(b) for metrics that are means over items.

    Shape:
        a, b: ``(S_A, N)``, ``(S_B, N)``: each seed's value on each item.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    seed_var, df = seed_part(a.mean(axis=1), b.mean(axis=1))
    d = a.mean(axis=0) - b.mean(axis=0)  # (N,): each item's seed-mean difference
    n = len(d)
    item_var = float(d.var(ddof=1)) / n
    diff = float(a.mean() - b.mean())
    return combine(diff, seed_var, df, item_var, n, "two-level (seeds, items)")


def recorded_item_part(low: float, high: float) -> float:
    """The item part's variance from an earlier 95% bootstrap interval over items."""
    return ((high - low) / (2 * Z975)) ** 2


def seed_level(
    a: Sequence[float], b: Sequence[float], item_var: float | None, items: int
) -> SeedAware:
    """The seed-aware test from per-seed scores alone, the item part given (`item_var`, from
    `recorded_item_part`) or, when None, left out (a test over seeds only)."""
    seed_var, df = seed_part(a, b)
    diff = float(np.mean(a) - np.mean(b))
    test = "two-level (seeds; items from the record)" if item_var is not None else "seeds only"
    return combine(diff, seed_var, df, item_var or 0.0, items, test)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error at most alpha, any dependence)."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return [float(x) for x in adjusted]


# ------------------------------------------------------------------------------------ simulation


@dataclass(frozen=True)
class Spread:
    """One claim's spreads, as its runs show them."""

    claim: str
    seed_sd: float  # sd of a run's score over seeds (pooled over the two systems)
    item_se: float  # the item-only test's standard error of the seed-mean difference
    items: int
    seeds: int


def _draw(
    spread: Spread, reps: int, rng: np.random.Generator, shift: float, seeds: int
) -> np.ndarray:
    """Simulated per-seed per-item values of two systems, as (2, reps, seeds, N), under the
    two-level model with var(w) = 0 (identical systems but for `shift`)."""
    s, n = spread.seeds, spread.items
    # var(d_i) = 2 var(e) / S  ->  var(e); var(seed score) = var(u) + var(e) / N  ->  var(u).
    var_e = spread.item_se**2 * n * s / 2
    var_u = max(spread.seed_sd**2 - var_e / n, 0.0)
    u = rng.normal(0, math.sqrt(var_u), (2, reps, seeds, 1))
    e = rng.normal(0, math.sqrt(var_e), (2, reps, seeds, n))
    values = u + e
    values[0] += shift
    return values


def simulate(
    spread: Spread,
    *,
    reps: int = 2000,
    seed: int = 0,
    shift: float = 0.0,
    seeds: int | None = None,
) -> dict[str, float]:
    """Rates of p < .05 and of "A > B holds" (difference > 0, p < .05) for the seed-aware test
    and the earlier item-only test (a paired t over items of the seed-mean values, which the
    randomisation test approximates), with two systems equal but for `shift` (A's), each
    trained with `seeds` seeds (default: the spread's)."""
    rng = np.random.default_rng(seed)
    out = {"new_p05": 0, "new_holds": 0, "old_p05": 0, "old_holds": 0}
    for start in range(0, reps, 200):
        values = _draw(spread, min(200, reps - start), rng, shift, seeds or spread.seeds)
        for k in range(values.shape[1]):
            a, b = values[0, k], values[1, k]  # (S, N)
            new = two_level_means(a, b)
            d = a.mean(axis=0) - b.mean(axis=0)
            old_p = float(stats.ttest_1samp(d, 0.0).pvalue)
            out["new_p05"] += new.p < 0.05
            out["new_holds"] += new.p < 0.05 and new.diff > 0
            out["old_p05"] += old_p < 0.05
            out["old_holds"] += old_p < 0.05 and d.mean() > 0
    return {k: v / reps for k, v in out.items()}
