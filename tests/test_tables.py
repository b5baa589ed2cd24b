"""Every committed results table is valid: it parses, its rows resolve to experiments, and each
row names a known dataset, splits of it, valid loader options and metrics its protocol reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmatch.data.datasets import get_dataset
from attnmatch.reproduce import experiment_for, load_table

TABLES = sorted((Path(__file__).parents[1] / "benchmarks" / "tables").glob("*.toml"))


def test_there_are_tables() -> None:
    assert len(TABLES) >= 5


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_table_rows_resolve_to_runnable_experiments(path: Path) -> None:
    spec = load_table(path)
    assert spec.table == path.stem, "a table's name is its file name"
    for row in spec.rows:
        exp = experiment_for(spec, row)
        d = exp.data
        if d.dataset == "pairs":
            continue
        dataset = get_dataset(d.dataset)
        splits = [d.train_split, d.dev_split] + ([d.test_split] if d.test_split else [])
        for split in splits:
            assert split in dataset.splits, f"{path.name}: row {row.id}: unknown split {split}"
        evaluated = d.test_split if spec.split == "test" else d.dev_split
        protocol = dataset.protocol(evaluated, **d.options)
        assert protocol is not None, f"{path.name}: row {row.id}: {evaluated} has no protocol"
        missing = set(spec.metrics_of(row)) - set(protocol.metrics)
        assert not missing, f"{path.name}: row {row.id}: {evaluated} reports no {missing}"
        assert set(row.paper) <= set(spec.metrics_of(row)) | {k for k in row.paper if "/" in k}, (
            f"{path.name}: row {row.id}: paper values for metrics the table does not show"
        )
