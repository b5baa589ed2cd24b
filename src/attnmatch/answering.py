"""What scoring, ranking and classifying share, whatever runs the model: the argument checks,
the refusal of a non-finite output and the order of a ranking (`Matcher` on torch and
`attnmatch.runtime.ExportedMatcher` on ONNX Runtime alone both read them; no torch here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Ranked:
    """One ranked candidate: its position in the input, its text and its score."""

    index: int
    text: str
    score: float


def ranked(scores: np.ndarray, candidates: Sequence[str], top_k: int | None) -> list[Ranked]:
    """The candidates sorted by `scores` ((N,)), best first, ties in input order; the best
    `top_k` when given."""
    order = np.argsort(-scores, kind="stable")
    if top_k is not None:
        order = order[:top_k]
    return [Ranked(int(i), candidates[i], float(scores[i])) for i in order]


def check_finite(values: np.ndarray, what: str, name: str) -> np.ndarray:
    """`values` (one row per pair), when every one is finite; else one ValueError naming the
    first pair and `name` (the model's directory, or its type): NaN or infinity never reaches
    a score, a rank or a metric."""
    finite = np.isfinite(values)
    if finite.all():
        return values
    rows = np.flatnonzero(~finite.reshape(len(values), -1).all(axis=1))
    raise ValueError(
        f"{name} gave a non-finite {what} (NaN or infinity) for pair {int(rows[0])} "
        f"({len(rows)} of {len(values)} pairs): no scores are returned; the model is "
        "numerically broken on these texts (re-train it)"
    )


def check_pairs(pairs: Sequence[tuple[str, str]]) -> None:
    """ValueError unless `pairs` is a sequence of (str, str) tuples (or lists)."""
    if isinstance(pairs, str):
        raise ValueError("pairs must be a list of (left, right) tuples, not one string")
    for i, pair in enumerate(pairs):
        if (
            not isinstance(pair, tuple | list)
            or len(pair) != 2
            or not all(isinstance(t, str) for t in pair)
        ):
            raise ValueError(f"pair {i} is not a (str, str) tuple: got {type_of(pair)}")


def check_ranking(query: str, candidates: Sequence[str], top_k: int | None) -> None:
    """ValueError unless the query is a non-empty string, the candidates a non-empty list of
    strings and top_k None or a positive integer (`rank`)."""
    if not isinstance(query, str):
        raise ValueError(f"the query must be a string, got {type_of(query)}")
    if not query.strip():
        raise ValueError("the query is empty")
    if isinstance(candidates, str):
        raise ValueError("candidates must be a list of strings, not one string")
    if not candidates:
        raise ValueError("no candidates to rank")
    for i, candidate in enumerate(candidates):
        if not isinstance(candidate, str):
            raise ValueError(f"candidate {i} is not a string: got {type_of(candidate)}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be an integer >= 1 (or None for all), got {top_k!r}")


def type_of(value: object) -> str:
    """What a wrong argument is, for a message (never the user's text itself)."""
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def classified(
    task: Any, pairs: Sequence[tuple[str, str]], predict: Callable[[Sequence[Any]], Any]
) -> list[str]:
    """The class name of each pair from `predict(pairs).labels` (a `Predictions`); a task
    without labels (ranking, regression) is refused in one line."""
    if not task.has_labels:
        raise ValueError(f"classify needs a classification model; this one is {task.kind}")
    if len(pairs) == 0:
        return []
    labels = predict(pairs).labels
    assert labels is not None  # a task with labels decodes them
    return list(labels)


def evaluation_split(task: Any, dataset: str, data_dir: Any, options: dict[str, Any]) -> Any:
    """(the examples, the protocol) a model of `task` is evaluated on for a dataset reference
    ("wikiqa:test", "pairs:FOLDER:test"; the split defaults to test): your own pairs are read as
    the model's task, and a classifier on a ranking split whose labels are its classes is scored
    as a classifier (`Task.protocol_for`).

    Raises:
        ValueError: the split has no protocol, or `task` cannot be evaluated on it.
    """
    from attnmatch.data.datasets import load_split, resolve_dataset_ref

    name, split_name, folder = resolve_dataset_ref(dataset, default_split="test")
    if name == "pairs" and "task" not in options:
        options = {**options, "task": task.kind}
    split = load_split(name, split_name, data_dir=folder or data_dir, **options)
    if split.protocol is None:
        raise ValueError(f"{name}:{split_name} has no evaluation protocol")
    where = f"{name}:{split_name}"
    protocol = task.protocol_for(split.protocol, split.examples, where)
    task.check_evaluable(protocol, where)
    return split.examples, protocol
