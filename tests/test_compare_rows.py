"""benchmarks/compare_rows.py: the seed-aware test of two reproduced rows, over a mean-over-items
metric (MAP) and over Pearson."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_rows.py"


def _module() -> Any:  # a script, loaded by its path
    spec = importlib.util.spec_from_file_location("compare_rows", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ranking_row(root: Path, maps: list[list[float]]) -> Path:
    for s, values in enumerate(maps, start=1):
        seed = root / f"seed-{s}"
        seed.mkdir(parents=True)
        queries = [{"group": f"Q{i}", "map": v, "mrr": v} for i, v in enumerate(values)]
        (seed / "test_items.json").write_text(json.dumps({"kind": "ranking", "queries": queries}))
    return root


def _regression_row(root: Path, gold: np.ndarray, noise: float, seeds: int) -> Path:
    rng = np.random.default_rng(int(noise * 1000))
    for s in range(1, seeds + 1):
        seed = root / f"seed-{s}"
        seed.mkdir(parents=True)
        pred = gold + rng.normal(0, noise, gold.shape)
        items = {"kind": "regression", "labels": gold.tolist(), "predictions": pred.tolist()}
        (seed / "test_items.json").write_text(json.dumps(items | {"groups": None}))
        r = float(np.corrcoef(pred, gold)[0, 1])
        (seed / "result.json").write_text(json.dumps({"test": {"pearson": r}}))
    return root


def test_map_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 1.0, 200)
    a = _ranking_row(tmp_path / "a", [list(np.minimum(base + 0.2, 1.0))] * 2)
    b = _ranking_row(tmp_path / "b", [list(base), list(base * 0.98)])
    _module().main([str(a), str(b), "--metric", "map"])
    out = capsys.readouterr().out
    assert "A - B = +0." in out and "p = " in out and "200 items" in out


def test_pearson_rows_tell_a_better_system_from_a_worse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gold = np.random.default_rng(1).uniform(0, 5, 400)
    good = _regression_row(tmp_path / "good", gold, 0.5, 3)
    bad = _regression_row(tmp_path / "bad", gold, 2.0, 3)
    module = _module()
    module.main([str(good), str(bad), "--metric", "pearson"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"A {good}: mean 0.9") and out[1].startswith(f"B {bad}: mean 0.")
    diff = float(out[2].split("A - B = ")[1].split(",")[0])
    p = float(out[2].split("p = ")[1].split(" ")[0])
    assert diff > 0.1 and p < 0.05
    module.main([str(bad), str(good), "--metric", "pearson"])
    assert "A - B = -0." in capsys.readouterr().out


def test_pearson_rows_on_other_pairs_are_refused(tmp_path: Path) -> None:
    gold = np.random.default_rng(2).uniform(0, 5, 50)
    a = _regression_row(tmp_path / "a", gold, 0.5, 2)
    b = _regression_row(tmp_path / "b", gold[::-1].copy(), 0.5, 2)
    with pytest.raises(SystemExit, match="not tested on the same pairs"):
        _module().main([str(a), str(b), "--metric", "pearson"])
