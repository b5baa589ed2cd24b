"""The recipe of `attnmatch demo` (`make demo`): aMV-LSTM (Q) on WikiQA, short enough for a first try.

The demo is the seed-1 run of the aMV-LSTM (Q) row of the paper table
`benchmarks/tables/amvlstm_table3.toml` (the official WikiQA split, fixed L2-normalised GloVe 6B
50d, the pairwise rank hinge with 4 negatives, 32 questions a batch, Adam 1e-3, the epoch with the
best dev MAP kept), with the changes in `CHANGES`, which the demo prints. A test proves that the
demo's experiment differs from the table's in these keys alone.

Example:
    >>> from attnmatch.demo import demo_experiment
    >>> demo_experiment().train.epochs
    10
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from attnmatch.training import ExperimentConfig

MODEL = "amvlstm_q"
DATASET = "wikiqa"
RECIPE = "benchmarks/tables/amvlstm_table3.toml"
"""The paper table whose recipe the demo shortens (its aMV-LSTM (Q) row)."""

RECIPE_DEFAULTS: dict[str, Any] = {
    "data": {"dataset": DATASET},
    "inputs": {"kind": "word_vectors", "vectors": "glove-6b-50d", "normalize": True},
    "train": {
        "epochs": 40,
        "patience": 8,
        "loss": "rank_hinge",
        "margin": 1.0,
        "num_negatives": 4,
        "batch_size": 32,
        "optimizer": "adam",
        "lr": 1e-3,
    },
}
"""The `[defaults]` of the table (a test keeps them equal)."""

PAPER = {"ndcg@3": 0.651922, "ndcg@5": 0.694755, "map": 0.650664}
"""aMV-LSTM (Q) in the paper's Table 3 (their random 80/10/10 split of WikiQA)."""

FULL_RECIPE_COMMAND = f"attnmatch reproduce amvlstm_table3 --rows {MODEL} --seeds 1"
"""The run of the recipe itself (from the repository, where the table is)."""


@dataclass(frozen=True)
class Change:
    """One experiment key the demo sets otherwise than the recipe.

    Args:
        key: the dotted experiment key ("train.epochs").
        demo: the demo's value.
        recipe: the recipe's value.
        why: what the change saves or costs, in a few words.
    """

    key: str
    demo: Any
    recipe: Any
    why: str


CHANGES = (
    Change(
        "train.epochs",
        10,
        40,
        "a quarter of the budget, the best of the 10 epochs on dev kept (the recipe stops "
        "after 8 epochs without a better dev MAP; its seed-1 run kept epoch 22)",
    ),
    Change(
        "train.threads",
        1,
        0,
        "one CPU thread instead of one per core: this small model's training steps gain little "
        "from a second thread, and on a busy machine two threads stall each other (epochs 5x "
        "slower)",
    ),
    Change(
        "train.floors",
        "lexical",
        "all",
        "the random, word-overlap and BM25 floors, without MiniLM zero-shot (minutes of CPU)",
    ),
)


def demo_experiment() -> ExperimentConfig:
    """The demo's experiment: the recipe (`RECIPE_DEFAULTS`, `MODEL`) with `CHANGES` applied."""
    data: dict[str, Any] = {"model": MODEL, **copy.deepcopy(RECIPE_DEFAULTS)}
    for change in CHANGES:
        section, name = change.key.split(".")
        data.setdefault(section, {})[name] = change.demo
    return ExperimentConfig.from_dict(data)


def changes_lines() -> list[str]:
    """The demo's changes to the recipe, one line each, as the demo prints them."""
    return [f"  {c.key} = {c.demo!r} instead of {c.recipe!r}: {c.why}" for c in CHANGES]
