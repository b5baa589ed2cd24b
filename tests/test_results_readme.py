"""results/README.md is generated from results/*.json and up to date; every row that ran names the
commit of each of its runs; the generator, the text sync and the run provenance behave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from attnmatch.research.results_index import (
    GENERATOR,
    RECOVERED,
    load_tables,
    main,
    render_markdown,
    render_results_readme,
    sync_text,
    write_results_readme,
)

RESULTS = Path(__file__).parents[1] / "results"
TABLES = load_tables(RESULTS)
ENV = {"attnmatch": "0", "torch": "2", "python": "3", "threads": 1, "platform": "x"}


def test_committed_results_readme_is_up_to_date() -> None:
    committed = (RESULTS / "README.md").read_text(encoding="utf-8")
    assert committed == render_results_readme(RESULTS), (
        f"results/README.md is stale: run `{GENERATOR}` (after `{GENERATOR} --sync-text` if a "
        "table's TOML text changed)"
    )


@pytest.mark.parametrize("table", TABLES, ids=[t["table"] for t in TABLES])
def test_every_row_that_ran_names_the_commit_of_each_run(table: dict[str, Any]) -> None:
    for row in table["rows"]:
        if row.get("not_run"):
            assert not row.get("seeds"), f"{row['id']}: not run, yet it has seeds"
            continue
        commits = row.get("commits")
        assert isinstance(commits, list), f"{table['table']}/{row['id']}: no commits"
        assert len(commits) == len(row["seeds"]), f"{table['table']}/{row['id']}: one per seed"
        assert all(isinstance(c, str) and c for c in commits)
        if "train_time_s" in row:
            assert len(row["train_time_s"]) == len(row["seeds"])
        if "provenance" in row:
            assert row["provenance"].startswith(RECOVERED)


def test_the_readme_lists_every_table_and_links_its_markdown() -> None:
    text = (RESULTS / "README.md").read_text(encoding="utf-8")
    assert GENERATOR in text.splitlines()[2]  # the generated header line
    for table in TABLES:
        assert f"## {table['title']}" in text
        assert f"]({table['table']}.md)" in text
        assert (RESULTS / f"{table['table']}.md").is_file()


def _row(id_: str, **kw: Any) -> dict[str, Any]:
    runs = kw.pop("runs", [0.6, 0.7])
    mean = sum(runs) / len(runs)
    row = {
        "id": id_,
        "label": id_.upper(),
        "dataset": "wikiqa",
        "train_split": "train",
        "split": "test",
        "non_standard": [],
        "metric_names": ["ndcg@3", "map"],
        "metrics": {
            "ndcg@3": {"mean": mean, "std": 0.05, "runs": runs},
            "map": {"mean": mean, "std": 0.05, "runs": runs},
        },
        "per_group": {},
        "dev": {},
        "paper": {"map": 0.6},
        "note": "",
        "seeds": [1, 2],
        "best_epochs": [1, 2],
        "train_pairs_per_s": [1.0, 1.0],
        "wall_time_s": [1.0, 1.0],
    }
    row.update(kw)
    return row


def _table(rows: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    return {
        "table": "t",
        "title": "Table T",
        "paper": "P",
        "protocol": "proto",
        "commit": "ccc",
        "environment": ENV,
        "rows": rows,
        "notes": [],
        "summary": "",
    } | kw


def test_readme_section_main_metric_commits_not_run_rows_and_summary(tmp_path: Path) -> None:
    rows = [
        _row("a", commits=["aaa", "bbb"], train_time_s=[1.0, None]),
        _row("b", commits=["old", "old"], provenance=f"{RECOVERED}: first in x"),
        _row("c", seeds=[], not_run="data not available", metrics={}),
        _row("d", seeds=[], not_run="not run yet", metrics={}),
    ]
    (tmp_path / "t.json").write_text(json.dumps(_table(rows, summary="Gate loses.")))
    (tmp_path / "t.md").write_text("x")
    (tmp_path / "other.json").write_text(json.dumps({"models": []}))  # not a table
    (tmp_path / "speed.txt").write_text("x")
    text = render_results_readme(tmp_path)
    assert "## Table T" in text and "[`t.md`](t.md)" in text
    # The main metric is MAP (not the first metric, nDCG@3), beside the paper's number.
    assert "| A (`a`) | MAP | 0.650 ± 0.050 | 0.600 | 2 | `aaa` (seed 1), `bbb` (seed 2) |" in text
    assert "| B (`b`) | MAP | 0.650 ± 0.050 | 0.600 | 2 | `old` † |" in text
    assert "Table written at `ccc`; † recovered from git history" in text
    assert "not run (2 rows): data not available (1); not run yet (1)." in text
    assert "Gate loses." in text
    assert "[`other.json`](other.json)" in text and "[`speed.txt`](speed.txt)" in text
    assert "[`t.json`]" not in text
    write_results_readme(tmp_path)
    assert main([str(tmp_path), "--check"]) == 0
    (tmp_path / "README.md").write_text("edited by hand\n")
    assert main([str(tmp_path), "--check"]) == 1


def test_markdown_names_the_training_commits_and_times() -> None:
    rows = [
        _row("a", commits=["aaa", "aaa"], train_time_s=[12.25, 3.0]),
        _row("b", commits=["old", "old"], provenance=f"{RECOVERED}: first in x"),
        _row("c", seeds=[], not_run="not run yet", metrics={}),
    ]
    md = render_markdown(_table(rows), ["ndcg@3", "map"])
    assert "training time s [12.2, 3.0]; trained at `aaa`" in md
    assert f"trained at `old`, {RECOVERED}: first in x" in md
    assert "| C — *not run yet* | `c` |" in md
    assert "Table written at `ccc`; runs trained at `aaa` (1 row), `old` (1 row);" in md
    assert "1 thread," in md


def test_sync_text_copies_the_tables_text_and_keeps_every_result(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    before = _table([_row("a", commits=["aaa", "aaa"]), _row("c", seeds=[], not_run="x")])
    (results / "t.json").write_text(json.dumps(before, indent=2) + "\n")
    toml = tmp_path / "t.toml"
    toml.write_text(
        'table = "t"\ntitle = "New title"\nprotocol = "new proto"\nmetrics = ["ndcg@3", "map"]\n'
        "notes = [\"n\"]\nsummary = '''\nThe gate loses.\n'''\n"
        '[[rows]]\nid = "a"\nlabel = "A!"\npaper = { map = 0.6 }\n'
        '[[rows]]\nid = "c"\nlabel = "C"\nnot_run = "not run yet"\n'
        '[[rows]]\nid = "new"\nlabel = "not in the results yet"\n'
    )
    assert sync_text(toml, results) is True
    after = json.loads((results / "t.json").read_text())
    assert after["title"] == "New title" and after["protocol"] == "new proto"
    assert after["notes"] == ["n"] and after["summary"] == "The gate loses.\n"
    assert after["paper"] == "" and after["rows"][0]["label"] == "A!"
    assert after["rows"][1]["not_run"] == "not run yet" and "not_run" not in after["rows"][0]
    for old, new in zip(before["rows"], after["rows"], strict=True):
        assert {k: v for k, v in new.items() if k not in ("label", "not_run", "paper")} == {
            k: v for k, v in old.items() if k not in ("label", "not_run", "paper")
        }
    assert "# New title" in (results / "t.md").read_text()
    assert sync_text(toml, results) is False
    toml.write_text(toml.read_text().replace('not_run = "not run yet"\n', ""))
    with pytest.raises(ValueError, match="attnmatch reproduce t"):
        sync_text(toml, results)


def test_run_provenance_reads_the_trainers_keys_with_fallbacks(tmp_path: Path) -> None:
    from attnmatch.research.reproduce import run_provenance

    new, old, logged, empty = (tmp_path / n for n in ("new", "old", "logged", "empty"))
    for d in (new, old, logged, empty):
        d.mkdir()
    env = {"metrics": {"environment": {"commit": "env1234"}}}
    (new / "result.json").write_text(json.dumps(env | {"commit": "abc-dirty", "train_time_s": 9.5}))
    history = [{"epoch_time_s": 1.25}, {"epoch_time_s": 2.0}]
    (old / "result.json").write_text(json.dumps(env | {"history": history}))
    (logged / "result.json").write_text(json.dumps(env))
    (logged / "log.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    assert run_provenance(new) == {"commit": "abc-dirty", "train_time_s": 9.5}
    assert run_provenance(old) == {"commit": "env1234", "train_time_s": 3.25}
    assert run_provenance(logged) == {"commit": "env1234", "train_time_s": 3.25}
    assert run_provenance(empty) == {"commit": "unknown", "train_time_s": None}


def test_reproduce_writes_the_results_readme(tmp_path: Path) -> None:
    from attnmatch.research.reproduce import reproduce

    table = tmp_path / "t.toml"
    table.write_text(
        'table = "t"\ntitle = "T"\nprotocol = "p"\nmetrics = ["map"]\nsummary = "S."\n'
        '[[rows]]\nid = "mvlstm"\nlabel = "MV-LSTM"\nnot_run = "data not available"\n'
        'overrides = { data = { dataset = "ubuntu-v1" } }\n'
    )
    out = reproduce(table, runs_dir=tmp_path / "runs", results_dir=tmp_path / "res", progress=False)
    assert out["summary"] == "S."
    readme = (tmp_path / "res" / "README.md").read_text()
    assert readme == render_results_readme(tmp_path / "res")
    assert "## T" in readme and "S." in readme
