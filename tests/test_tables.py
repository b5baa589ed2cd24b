"""Every table is valid and has its committed results: it parses, its rows resolve to
experiments of registered models and datasets (known splits, valid loader options, metrics the
protocol reports), and results/<table>.json exists, holds only the table's rows and carries the
table's text (title, protocol, notes, summary, labels, notes, not-run reasons, paper numbers)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from attnmatch.data.datasets import get_dataset, list_datasets
from attnmatch.models import list_models, list_presets
from attnmatch.research.reproduce import experiment_for, load_table, model_of
from attnmatch.research.results_index import GENERATOR, is_table, table_text

ROOT = Path(__file__).parents[1]
TABLES = sorted((ROOT / "benchmarks" / "tables").glob("*.toml"))


def _results() -> dict[str, dict]:
    found = {}
    for path in sorted((ROOT / "results").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if is_table(data):
            assert data["table"] == path.stem, f"{path.name} holds table {data['table']!r}"
            found[path.stem] = data
    return found


def test_every_table_has_its_results_and_every_result_its_table() -> None:
    assert TABLES, "no tables under benchmarks/tables"
    assert {p.stem for p in TABLES} == set(_results())


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_results_hold_the_tables_rows_and_text(path: Path) -> None:
    result = _results()[path.stem]
    text = table_text(tomllib.loads(path.read_text(encoding="utf-8")))
    fix = f"run `{GENERATOR} --sync-text` (copies the TOML's text, changes no result)"
    for key, value in text["table"].items():
        assert result.get(key, "") == value, f"results/{path.stem}.json: {key} differs: {fix}"
    for row in result["rows"]:
        assert row["id"] in text["rows"], f"results row {row['id']!r} is not in {path.name}"
        for key, value in text["rows"][row["id"]].items():
            assert row.get(key, "") == value, f"row {row['id']}: {key} differs: {fix}"


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_table_rows_resolve_to_runnable_experiments(path: Path) -> None:
    spec = load_table(path)
    assert spec.table == path.stem, "a table's name is its file name"
    for row in spec.rows:
        name = model_of(row)
        assert name in list_presets() or name in list_models(), f"row {row.id}: model {name}"
        exp = experiment_for(spec, row)
        registered = {d.name for d in list_datasets()}
        assert exp.data.dataset == "pairs" or exp.data.dataset in registered, row.id
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


def test_results_json_is_strict_and_undefined_numbers_are_null() -> None:
    import math

    from attnmatch.research.results_index import render_markdown
    from attnmatch.strict_json import dumps_json

    row = {
        "id": "r",
        "label": "R",
        "metric_names": ["pearson"],
        "metrics": {"pearson": {"mean": math.nan, "std": math.inf, "runs": [math.nan]}},
        "paper": {},
        "dev": {"pearson": {"mean": 0.5}},
        "seeds": [1],
        "best_epochs": [1],
        "train_pairs_per_s": [1.0],
    }
    env = {"attnmatch": "0", "torch": "2", "python": "3", "threads": 1, "platform": "x"}
    result = {"table": "t", "title": "T", "protocol": "p", "commit": "c", "environment": env}
    result["rows"] = [row]
    text = dumps_json(result)
    assert "NaN" not in text and "Infinity" not in text
    loaded = json.loads(text)
    assert loaded["rows"][0]["metrics"]["pearson"] == {"mean": None, "std": None, "runs": [None]}
    for source in (result, loaded):  # in memory (NaN) or read back (null): "n/a"
        assert "| R | `r` | n/a ± n/a |" in render_markdown(source, ["pearson"])
