"""Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009).

    rrf(d) = sum over runs r containing d of 1 / (k + rank_r(d)),   ranks from 1, k = 60

This is the formula of ranx's `fuse(method="rrf")` (Bassani, ECIR 2022), and a test holds the
two equal on random runs (tests/retrieval/test_fusion.py, marked slow). ranx itself is not
imported at search time: on this project's 2-core machine `import ranx` takes 5-14 s and its
first fusion, compiled by numba, 35-150 s more, where this function takes microseconds.
Ties of the fused score keep the order of first appearance (the first run first).
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60


def reciprocal_rank_fusion(
    runs: Sequence[Sequence[int]], k: int = RRF_K
) -> list[tuple[int, float]]:
    """Fuses ranked lists of document rows (best first) into (row, score) pairs, best first."""
    if k < 0:
        raise ValueError(f"the RRF constant k must be >= 0, got {k}")
    fused: dict[int, float] = {}
    for run in runs:
        for rank, row in enumerate(run, 1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: -item[1])
