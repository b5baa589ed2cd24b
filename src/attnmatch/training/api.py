"""`Matcher.fit`: training from Python on pairs in memory, a DataFrame, or a dataset name."""

from __future__ import annotations

import math
import numbers
import random
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmatch import configs
from attnmatch.data.datasets import Split
from attnmatch.data.protocol import (
    ClassificationProtocol,
    Protocol,
    RankingProtocol,
    RegressionProtocol,
)
from attnmatch.data.schema import Example
from attnmatch.inputs import parse_inputs
from attnmatch.matcher import Matcher
from attnmatch.models import default_inputs
from attnmatch.training.config import DataConfig, ExperimentConfig, TrainConfig
from attnmatch.training.experiment import experiment_from_splits
from attnmatch.training.trainer import train as train_run

TASKS = ("ranking", "classification", "regression")


def as_examples(data: Any, name: str) -> list[Example]:
    """(left, right, label[, group]) tuples, Examples, or a DataFrame with columns left, right,
    label (and optionally group) as Examples. Ranking groups default to the left text."""
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        missing = {"left", "right", "label"} - set(data.columns)
        if missing:
            raise ValueError(f"{name}: the DataFrame lacks column(s) {sorted(missing)}")
        has_group = "group" in data.columns
        cols = ["left", "right", "label"] + (["group"] if has_group else [])
        data = list(data[cols].itertuples(index=False, name=None))
    examples: list[Example] = []
    for i, row in enumerate(data):
        if isinstance(row, Example):
            examples.append(row)
            continue
        if not isinstance(row, Sequence) or len(row) not in (3, 4):
            raise ValueError(f"{name}: row {i} is not (left, right, label[, group]): {row!r}")
        left, right, label = row[0], row[1], row[2]
        if not isinstance(left, str) or not isinstance(right, str):
            raise ValueError(f"{name}: row {i}: left and right must be strings, got {row!r}")
        if not isinstance(label, numbers.Real) or isinstance(label, bool | np.bool_):
            raise ValueError(f"{name}: row {i}: the label must be a number, got {label!r}")
        label = int(label) if isinstance(label, numbers.Integral) else float(label)
        if math.isnan(label):
            raise ValueError(f"{name}: row {i}: the label is NaN")
        group = str(row[3]) if len(row) == 4 else left
        examples.append(Example(left=left, right=right, label=label, group=group))
    if not examples:
        raise ValueError(f"{name}: no pairs")
    return examples


def infer_task(examples: Sequence[Example]) -> str:
    """ranking for 0/1 labels where some query has several candidates; classification for
    other integer labels (or 0/1 labels with one candidate per query); regression otherwise."""
    labels = [float(ex.label) for ex in examples]
    if any(y != int(y) for y in labels):
        return "regression"
    groups: dict[str | None, int] = {}
    for ex in examples:
        groups[ex.group] = groups.get(ex.group, 0) + 1
    if set(labels) <= {0.0, 1.0} and max(groups.values()) > 1:
        return "ranking"
    return "classification"


def protocol_for(task: str, examples: Sequence[Example]) -> Protocol:
    labels = [float(ex.label) for ex in examples]
    if task == "ranking":
        return RankingProtocol(name="pairs-ranking", description="your pairs, ranked per query")
    if task == "classification":
        n = max(2, int(max(labels)) + 1)
        return ClassificationProtocol(
            name="pairs-classification",
            num_classes=n,
            metrics=("accuracy", "f1") if n == 2 else ("accuracy", "macro_f1"),
        )
    if task == "regression":
        lo, hi = math.floor(min(labels)), math.ceil(max(labels))
        return RegressionProtocol(name="pairs-regression", min_score=lo, max_score=max(hi, lo + 1))
    raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")


def _split(examples: list[Example], name: str, task: str, protocol: Protocol) -> Split:
    return Split("pairs", name, task, examples, protocol, {})


def fit_matcher(
    train: Any,
    dev: Any,
    *,
    model: str,
    inputs: Any,
    task: str | None,
    epochs: int | None,
    seed: int,
    output_dir: str | Path | None,
    progress: bool,
    train_options: dict[str, Any],
) -> Matcher:
    """`Matcher.fit` (its docstring has the arguments)."""
    train_settings = {"seed": seed, **train_options}
    if epochs is not None:
        train_settings["epochs"] = epochs
    if isinstance(train, str) and (dev is not None or task is not None):
        raise ValueError(
            f"train={train!r} names a dataset: its own dev split and task are used, so dev and "
            "task must not be given (pass pairs to choose them)"
        )
    base: dict[str, Any] = {"model": model, "train": train_settings}
    if inputs is not None:
        base["inputs"] = parse_inputs(inputs, default=default_inputs(model))
    with _caller_rng_kept():  # training seeds the global generators; the caller's come back
        if output_dir is None:  # a temporary run folder; the Matcher is kept in memory
            with tempfile.TemporaryDirectory(prefix="attnmatch-fit-") as tmp:
                matcher = _fit(train, dev, base, task, Path(tmp), progress)
                matcher.path = None
                return matcher
        return _fit(train, dev, base, task, Path(output_dir), progress)


@contextmanager
def _caller_rng_kept() -> Iterator[None]:
    """The states of Python's, numpy's and torch's global random generators, restored after."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def _fit(
    train: Any, dev: Any, base: dict[str, Any], task: str | None, out: Path, progress: bool
) -> Matcher:
    if isinstance(train, str):  # a registered dataset, its standard splits
        config = _config(base, DataConfig(dataset=train))
        return Matcher.load(train_run(config, out, progress=progress).model_dir)
    train_examples = as_examples(train, "train")
    kind = task or infer_task(train_examples)
    protocol = protocol_for(kind, train_examples)
    dev_split = None
    if dev is not None:
        dev_examples = as_examples(dev, "dev")
        dev_protocol = protocol_for(kind, train_examples + dev_examples)
        dev_split = _split(dev_examples, "dev", kind, dev_protocol)
    config = _config(base, DataConfig(dataset="pairs", test_split=None))
    exp = experiment_from_splits(
        config, _split(train_examples, "train", kind, protocol), dev_split, None
    )
    return Matcher.load(train_run(config, out, progress=progress, experiment=exp).model_dir)


def _config(base: dict[str, Any], data: DataConfig) -> ExperimentConfig:
    inputs = base.get("inputs")
    return ExperimentConfig(
        model=base["model"],
        inputs=inputs,
        data=data,
        train=configs.from_dict(TrainConfig, base["train"], path="train"),
    )
