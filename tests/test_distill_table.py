"""results/distill.md is generated from results/distill.json, names every row the table
promises (run or "not run" with its reason), and the generator computes mean ± std and the
paired test from run folders."""

from __future__ import annotations

import json
from pathlib import Path

from attnmatch.research.distill_table import ROWS, collect, render

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "results"


def test_the_committed_table_is_its_json_rendered() -> None:
    data = json.loads((RESULTS / "distill.json").read_text(encoding="utf-8"))
    assert (RESULTS / "distill.md").read_text(encoding="utf-8") == render(data)
    rows = data["distillation"]
    assert [r["id"] for r in rows] == [row.id for row in ROWS]
    for r in rows:
        assert "not_run" in r or {"teacher", "distilled", "labels", "pairs_per_s"} <= set(r)
    datasets = {r["dataset"] for r in rows}
    assert {"WikiQA", "TrecQA (raw)", "SICK relatedness", "STS Benchmark", "STS2015", "STS2016",
            "MSRP", "SICK entailment"} <= datasets  # fmt: skip


def _seed(folder: Path, seed: int, maps: list[float], file: str) -> None:
    run = folder / f"seed-{seed}"
    run.mkdir(parents=True)
    queries = [{"group": f"q{i}", "map": v, "mrr": v} for i, v in enumerate(maps)]
    items = {"kind": "ranking", "protocol": "wikiqa-official", "queries": queries}
    (run / "test_items.json").write_text(json.dumps(items))
    (run / file).write_text(json.dumps({"test": {"map": sum(maps) / len(maps)}}))


def test_a_row_with_runs_has_means_and_a_paired_test(tmp_path: Path) -> None:
    row = tmp_path / "runs" / ROWS[0].id
    for seed in (1, 2, 3):
        _seed(row / "distilled", seed, [1.0, 1.0, 0.5, 1.0] * 5, "distill.json")
        _seed(row / "labels", seed, [0.5, 0.5, 0.5, 0.5] * 5, "result.json")
    summary = {"teacher": {"test": {"map": 0.9}}, "pairs_per_s": {"teacher": 60, "student": 6000}}
    (row / "distilled" / "summary.json").write_text(json.dumps(summary))
    data = collect(tmp_path / "runs", tmp_path)
    first = data["distillation"][0]
    assert first["distilled"]["mean"] == 0.875 and first["labels"]["mean"] == 0.5
    assert first["paired"]["difference"] == 0.375 and first["paired"]["p"] < 0.05
    assert "6,000" in render(data) and "not run" in render(data)  # the other rows
