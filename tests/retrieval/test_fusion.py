"""Reciprocal rank fusion equals ranx's on random runs (ranx compiles with numba on first use:
minutes on a loaded 2-core machine, hence slow)."""

from __future__ import annotations

import numpy as np
import pytest

from attnmatch.retrieval.fusion import reciprocal_rank_fusion


@pytest.mark.slow
def test_rrf_equals_ranx() -> None:
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(0)
    for trial in range(5):
        runs = [list(rng.permutation(40)[: rng.integers(5, 30)]) for _ in range(2)]
        ours = dict(reciprocal_rank_fusion(runs))
        as_ranx = [
            ranx.Run({"q": {f"d{row}": float(len(run) - i) for i, row in enumerate(run)}})
            for run in runs
        ]
        theirs = ranx.fuse(runs=as_ranx, method="rrf", params={"k": 60}).to_dict()["q"]
        assert {f"d{row}": score for row, score in ours.items()} == pytest.approx(theirs), trial
