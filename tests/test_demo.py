"""`attnmatch demo`'s recipe is the paper table's, changed only where `attnmatch.demo` says.

The demo itself runs in tests/test_readme.py (a tiny stand-in of its experiment, which the
README's examples then use); `pytest -m slow tests/test_readme.py` runs it as `make demo` does.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

from attnmatch import configs, demo
from attnmatch.training import ExperimentConfig
from tests.test_readme import _parse_cli

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / demo.RECIPE


def _table() -> dict[str, Any]:
    return tomllib.loads(TABLE.read_text(encoding="utf-8"))


def _recipe_row() -> dict[str, Any]:
    (row,) = [r for r in _table()["rows"] if r["id"] == demo.MODEL]
    return row


def _recipe() -> ExperimentConfig:
    """The table's experiment for the demo's row: its defaults, the row's model and overrides."""
    table, row = _table(), _recipe_row()
    data = configs.merge(table["defaults"], {"model": row.get("model", row["id"])})
    return ExperimentConfig.from_dict(configs.merge(data, row.get("overrides", {})))


def _resolved(config: ExperimentConfig) -> ExperimentConfig:
    """`config` with its inputs spelled out (unset: the model's own)."""
    return dataclasses.replace(config, inputs=config.resolved_inputs())


def test_demo_differs_from_the_recipe_only_in_its_changes() -> None:
    ours = configs.flatten(_resolved(demo.demo_experiment()).to_dict())
    recipe = configs.flatten(_resolved(_recipe()).to_dict())
    assert ours.keys() == recipe.keys()
    differ = {key for key in ours if ours[key] != recipe[key]}
    assert differ == {c.key for c in demo.CHANGES}
    for change in demo.CHANGES:
        assert (ours[change.key], recipe[change.key]) == (change.demo, change.recipe), change.key


def test_recipe_defaults_are_the_tables() -> None:
    assert demo.RECIPE_DEFAULTS == _table()["defaults"]
    assert _recipe_row().get("overrides", {}) == {}


def test_demo_compares_with_the_paper_row_of_the_table() -> None:
    assert demo.PAPER == _recipe_row()["paper"]
    assert demo.demo_experiment().model == demo.MODEL
    assert (
        demo.demo_experiment().data.dataset
        == demo.DATASET
        == _table()["defaults"]["data"]["dataset"]
    )


def test_what_the_changes_say_holds() -> None:
    """The recipe's seed-1 best epoch named in the epochs change is the one in results/, and the
    README states the demo's budget."""
    (epochs,) = [c for c in demo.CHANGES if c.key == "train.epochs"]
    result = json.loads((ROOT / "results" / "amvlstm_table3.json").read_text(encoding="utf-8"))
    (row,) = [r for r in result["rows"] if r["id"] == demo.MODEL]
    assert row["seeds"][0] == 1
    assert f"kept epoch {row['best_epochs'][0]}" in epochs.why
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"{epochs.demo} epochs instead of {epochs.recipe}" in readme
    assert all(
        line.startswith(f"  {c.key} = ")
        for line, c in zip(demo.changes_lines(), demo.CHANGES, strict=True)
    )


def test_the_full_recipe_command_is_the_recipe() -> None:
    """The printed command trains the table's row at seed 1: the run the demo shortens."""
    ctx = _parse_cli(demo.FULL_RECIPE_COMMAND.split()[1:])
    assert ROOT / "benchmarks" / "tables" / f"{ctx.params['table']}.toml" == TABLE
    assert (ctx.params["rows"], ctx.params["seeds"]) == (demo.MODEL, "1")
