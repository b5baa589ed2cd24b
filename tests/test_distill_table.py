"""results/distill.md is generated from results/distill.json, names every row the table
promises (run or "not run" with its reason), and the generator computes mean ± std and the
paired test from run folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

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


def test_the_committed_paired_tests_recompute_from_the_committed_items() -> None:
    """Rows computed since the per-item results are recorded carry every seed's value of
    every test item: their seed-aware test is recomputed from the JSON alone."""
    from attnmatch.research.claims_stats import two_level_means

    data = json.loads((RESULTS / "distill.json").read_text(encoding="utf-8"))
    rows = [r for r in data["distillation"] if "test_items" in r]
    for r in rows:
        items = r["test_items"]
        test = two_level_means(np.array(items["distilled"]), np.array(items["labels"]))
        assert test.items == r["paired"]["items"]
        assert test.diff == pytest.approx(r["paired"]["difference"], rel=1e-9)
        assert test.p == pytest.approx(r["paired"]["p"], rel=1e-9)
        assert np.allclose(np.mean(items["distilled"], axis=1), r["per_seed"]["distilled"])


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


def test_a_row_compares_only_the_seeds_both_arms_finished(tmp_path: Path) -> None:
    row = tmp_path / "runs" / ROWS[0].id
    for seed in (1, 2, 3):  # seed 3 distilled only: its labels-only run is still training
        _seed(row / "distilled", seed, [1.0, 0.5] * 5 if seed < 3 else [0.0] * 10, "distill.json")
    for seed in (1, 2):
        _seed(row / "labels", seed, [0.5] * 10, "result.json")
    (row / "distilled" / "summary.json").write_text(json.dumps({"teacher": {"test": {}}}))
    first = collect(tmp_path / "runs", tmp_path)["distillation"][0]
    assert first["distilled"] == {"mean": 0.75, "std": 0.0, "seeds": 2}
    assert first["labels"]["seeds"] == 2 and first["paired"]["difference"] == 0.25


def test_a_row_says_the_weights_it_tried_and_an_unfinished_one_waits(tmp_path: Path) -> None:
    row = tmp_path / "runs" / ROWS[0].id
    for seed in (1, 2):
        _seed(row / "distilled", seed, [1.0, 0.5] * 5, "distill.json")
        _seed(row / "labels", seed, [0.5] * 10, "result.json")
    first = collect(tmp_path / "runs", tmp_path)["distillation"][0]
    assert "has not finished" in first["not_run"]  # no summary.json: still distilling
    students = [{"by_weight": {"0.5": {"map": 0.7}}} for _ in (1, 2)]
    summary = {"teacher": {"test": {}}, "students": students}
    (row / "distilled" / "summary.json").write_text(json.dumps(summary))
    data = collect(tmp_path / "runs", tmp_path)
    assert data["distillation"][0]["weights"] == ["0.5"]
    assert f"except {ROWS[0].dataset}: 0.5 only." in render(data)


def _regression_seed(folder: Path, seed: int, predictions: list[float], gold: list[float]) -> None:
    run = folder / f"seed-{seed}"
    run.mkdir(parents=True)
    items = {"kind": "regression", "labels": gold, "predictions": predictions}
    (run / "test_items.json").write_text(json.dumps(items))
    pearson = float(np.corrcoef(predictions, gold)[0, 1])
    (run / "result.json").write_text(json.dumps({"test": {"pearson": pearson}}))


def test_a_pearson_row_has_the_seed_aware_test_and_a_shared_labels_row(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, size=200)
    row = [r for r in ROWS if r.metric == "pearson" and r.dataset == "STS Benchmark"][0]
    folder = tmp_path / "runs" / row.id
    for seed in (1, 2, 3):
        good = gold + rng.normal(0, 0.5, size=200)
        poor = gold + rng.normal(0, 3.0, size=200)
        _regression_seed(folder / "distilled", seed, good.tolist(), gold.tolist())
        _regression_seed(folder / "labels", seed, poor.tolist(), gold.tolist())
    summary = {"teacher": {"test": {"pearson": 0.85}}, "pairs_per_s": {"teacher": 60}}
    (folder / "distilled" / "summary.json").write_text(json.dumps(summary))
    (r,) = [x for x in collect(tmp_path / "runs", tmp_path)["distillation"] if x["id"] == row.id]
    assert r["distilled"]["mean"] > 0.9 > 0.6 > r["labels"]["mean"]
    assert r["paired"]["difference"] > 0.3 and r["paired"]["p"] < 0.05
    shared = [x for x in ROWS if x.labels is not None]
    assert shared and all(
        (x.labels, x.dataset) in {(y.id, y.dataset) for y in ROWS} for x in shared
    )


def test_own_data_rows_say_whether_the_student_beats_both_floors(tmp_path: Path) -> None:
    from attnmatch.research.distill_table import OWN_ROWS

    first = OWN_ROWS[0]
    folder = tmp_path / first.folder
    folder.mkdir(parents=True)
    m = first.metric
    summary = {
        "teacher": {"test": {m: 0.9}},
        "students": [{"weight": 1.0, "test": {m: 0.5}}],
        "floors": {"test": {"overlap": {m: 0.3}, "bm25": {m: 0.6}, "random": {m: 0.1}}},
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    data = collect(tmp_path / "runs", tmp_path, own_runs=tmp_path)
    (row,) = data["own_data"]
    assert row["floors"] == {"overlap": 0.3, "bm25": 0.6}
    line = [x for x in render(data).splitlines() if x.startswith(f"| {first.data} |")][0]
    assert line.endswith("| 0.300 | 0.600 | no |")
    summary["students"][0]["test"][m] = 0.7
    (folder / "summary.json").write_text(json.dumps(summary))
    line = [
        x
        for x in render(collect(tmp_path / "runs", tmp_path, own_runs=tmp_path)).splitlines()
        if x.startswith(f"| {first.data} |")
    ][0]
    assert line.endswith("| yes |")


def test_rows_whose_runs_are_not_here_keep_their_recorded_figures(tmp_path: Path) -> None:
    from attnmatch.research.distill_table import OWN_ROWS

    earlier = json.loads((RESULTS / "distill.json").read_text(encoding="utf-8"))
    recorded = [r for r in earlier["distillation"] if "not_run" not in r]
    assert recorded and earlier["own_data"]
    row = tmp_path / "runs" / recorded[0]["id"]  # this row's runs are here: computed again
    for seed in (1, 2, 3):
        _seed(row / "distilled", seed, [1.0, 0.5] * 5, "distill.json")
        _seed(row / "labels", seed, [0.5] * 10, "result.json")
    (row / "distilled" / "summary.json").write_text(json.dumps({"teacher": {"test": {}}}))
    data = collect(tmp_path / "runs", RESULTS, own_runs=tmp_path / "own", earlier=earlier)
    by_id = {r["id"]: r for r in data["distillation"]}
    assert by_id[recorded[0]["id"]]["distilled"]["mean"] == 0.75
    for r in recorded[1:]:
        assert by_id[r["id"]] == r
    assert data["own_data"] == earlier["own_data"]
    assert len(data["own_data"]) == len(OWN_ROWS)
    fresh = collect(tmp_path / "runs", RESULTS, own_runs=tmp_path / "own")
    assert sum("not_run" not in r for r in fresh["distillation"]) == 1 and not fresh["own_data"]


def test_ablation_cells_are_read_from_their_runs_or_kept_from_the_json(tmp_path: Path) -> None:
    from attnmatch.research.distill_table import ABLATION

    first, second = ABLATION[0], ABLATION[1]
    folder = tmp_path / "ablation" / first.folder
    folder.mkdir(parents=True)
    student = {"weight": 0.5, "dev": {"map": 0.77}, "test": {"map": 0.72}, "train_pairs": 61052,
               "teacher_seconds": 12.5}  # fmt: skip
    (folder / "summary.json").write_text(json.dumps({"students": [student]}))
    kept = {"folder": second.folder, "dataset": "WikiQA", "student": "aMV-LSTM (Q)",
            "inputs": second.inputs, "transfer": second.transfer, "lexical": True,
            "metric": "map", "dev": 0.7, "test": 0.6, "train_pairs": 17000}  # fmt: skip
    data = collect(tmp_path / "runs", tmp_path, earlier={"ablation": [kept]})
    assert [c["folder"] for c in data["ablation"]] == [first.folder, second.folder]
    assert data["ablation"][0]["test"] == 0.72 and data["ablation"][1] == kept
    page = render(data)
    assert "## Ablation" in page
    assert (
        f"| WikiQA | aMV-LSTM (Q) | {first.inputs} | {first.transfer} | 61,052 | no | 0.770 | 0.720 |"
        in page
    )


def test_the_json_keeps_value_lists_on_one_line() -> None:
    from attnmatch.research.distill_table import dumps_compact

    data = {"rows": [{"items": {"keys": ["a", "b"], "values": [[0.5, 1.0], [0.0, 1e-3]]}}], "e": {}}
    text = dumps_compact(data)
    assert json.loads(text) == data
    assert '"keys": ["a", "b"]' in text and "[0.5, 1.0]" in text
    assert dumps_compact({"a": [1, {"b": 2}]}) == json.dumps({"a": [1, {"b": 2}]}, indent=2)
