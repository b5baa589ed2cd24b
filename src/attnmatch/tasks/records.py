"""What tasks wrote, read back: a run's per-item results (`Task.items`) and the task of a
first-format model directory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnmatch.tasks.base import TASKS, Task, for_task
from attnmatch.tasks.classification import ClassificationTask
from attnmatch.tasks.ranking import RankingTask
from attnmatch.tasks.regression import RegressionTask

ItemValues = tuple[list[str], np.ndarray]


def _query_values(items: dict[str, Any], metric: str) -> ItemValues:
    queries = items["queries"]
    return [str(q["group"]) for q in queries], np.array([q[metric] for q in queries], float)


def _pair_values(items: dict[str, Any], metric: str) -> ItemValues:
    if metric != "accuracy":
        raise ValueError(f"{metric}: only accuracy is a mean over pairs")
    labels = np.asarray(items["labels"])
    correct = (np.asarray(items["predicted"]) == labels).astype(np.float64)
    return [str(i) for i in range(len(labels))], correct


def _no_values(items: dict[str, Any], metric: str) -> ItemValues:
    raise ValueError(f"{metric} on {items['kind']} items is not a mean over items")


# How each kind's items give one value per item: ranking, each kept query's metric;
# classification, each pair's accuracy (0 or 1); regression, none (Pearson is no mean).
_ITEM_VALUES: dict[type[Task], Callable[[dict[str, Any], str], ItemValues]] = {
    RankingTask: _query_values,
    ClassificationTask: _pair_values,
    RegressionTask: _no_values,
}


def item_values(items: dict[str, Any], metric: str) -> ItemValues:
    """(item keys, each item's value of `metric`) of a run's per-item results (`Task.items`),
    for metrics that are means over items (`attnmatch.research.claims`).

    Raises:
        ValueError: `metric` is not a mean over the items of their kind.
    """
    kind = TASKS.get(items["kind"])
    return for_task(_ITEM_VALUES, kind)(items, metric) if kind else _no_values(items, metric)


def _v1_classes(label_space: dict[str, Any], num_outputs: Any) -> dict[str, Any]:
    """The space's class names, or "0" .. "C-1" for the model's C outputs."""
    names = label_space.get("class_names") or [str(i) for i in range(int(num_outputs))]
    return {"class_names": list(names)}


def _v1_range(label_space: dict[str, Any], num_outputs: Any) -> dict[str, Any]:
    """The space's integer range, 0..5 by default."""
    return {
        "min_score": int(label_space.get("min_score", 0)),
        "max_score": int(label_space.get("max_score", 5)),
    }


# The saved fields of a first-format model's task: its label space (a dict) read for a model
# of `num_outputs` outputs (config.json "config.num_outputs").
_V1_FIELDS: dict[type[Task], Callable[[dict[str, Any], Any], dict[str, Any]]] = {
    RankingTask: lambda label_space, num_outputs: {},
    ClassificationTask: _v1_classes,
    RegressionTask: _v1_range,
}


def migrate_v1_task(name: str, label_space: dict[str, Any], num_outputs: Any) -> dict[str, Any]:
    """A first-format model's task (a kind name plus a label space) as config.json's "task";
    an unknown name is kept for the loader to refuse."""
    kind = TASKS.get(name)
    fields = for_task(_V1_FIELDS, kind)(label_space, num_outputs) if kind else {}
    return {"kind": name, **fields}
