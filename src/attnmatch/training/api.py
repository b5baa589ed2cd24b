"""`Matcher.fit`: training from Python on pairs in memory, a DataFrame, or a dataset name."""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console

from attnmatch import configs
from attnmatch.data.datasets import Split
from attnmatch.data.datasets.pairs import evaluation_examples
from attnmatch.data.labels import Labels, LabelScheme, choose_task, read_labels
from attnmatch.data.schema import Example
from attnmatch.data.tabular import table_columns
from attnmatch.inputs import parse_inputs
from attnmatch.matcher import Matcher
from attnmatch.models import default_inputs
from attnmatch.tasks import Task
from attnmatch.training.config import DataConfig, ExperimentConfig, TrainConfig
from attnmatch.training.experiment import experiment_from_splits
from attnmatch.training.trainer import FLOOR_MODEL_DIR
from attnmatch.training.trainer import train as train_run


def read_pairs(
    data: Any, name: str, columns: dict[str, str] | None = None
) -> tuple[list[tuple[str, str, str]], Labels]:
    """(left, right, label[, group]) tuples, or a pandas DataFrame or Hugging Face
    `datasets.Dataset` with columns left, right, label (and optionally group; `columns` maps
    them to the table's own names), as `(left, right, group)` triples and their labels
    (`read_labels`: numbers, or class names such as "duplicate"). Ranking groups default to the
    left text."""
    texts, labels, _ = read_grouped_pairs(data, name, columns)
    return texts, labels


def read_grouped_pairs(
    data: Any, name: str, columns: dict[str, str] | None = None
) -> tuple[list[tuple[str, str, str]], Labels, bool]:
    """`read_pairs`, and whether `data` gave groups (a group column, 4-tuples or Examples with
    a group): only given groups make 0/1 labels a ranking task (`attnmatch.data.labels`)."""
    grouped = False
    table = table_columns(
        data, name, required=("left", "right", "label"), optional=("group",), columns=columns
    )
    if table is not None:
        data = list(zip(*table.values(), strict=True))
    texts: list[tuple[str, str, str]] = []
    raw_labels: list[object] = []
    for i, row in enumerate(data):
        if isinstance(row, Example):
            grouped = grouped or row.group is not None
            row = (row.left, row.right, row.label, row.group if row.group is not None else row.left)
        elif isinstance(row, Sequence) and not isinstance(row, str) and len(row) == 4:
            grouped = True
        if not isinstance(row, Sequence) or isinstance(row, str) or len(row) not in (3, 4):
            raise ValueError(f"{name}: row {i} is not (left, right, label[, group]): {row!r}")
        left, right = row[0], row[1]
        if not isinstance(left, str) or not isinstance(right, str):
            raise ValueError(f"{name}: row {i}: left and right must be strings, got {row!r}")
        texts.append((left, right, str(row[3]) if len(row) == 4 else left))
        raw_labels.append(row[2])
    if not texts:
        raise ValueError(f"{name}: no pairs")
    where = [f"{name}: row {i}" for i in range(len(texts))]
    return texts, read_labels(raw_labels, where), grouped


def as_examples(
    data: Any,
    name: str,
    scheme: LabelScheme | None = None,
    columns: dict[str, str] | None = None,
) -> list[Example]:
    """`data` (see `read_pairs`) as Examples labelled by `scheme` (class indices for
    classification); without a scheme, labels must be numbers (ints when integral)."""
    return _labelled(*read_pairs(data, name, columns), scheme, name)


def _labelled(
    texts: list[tuple[str, str, str]], labels: Labels, scheme: LabelScheme | None, name: str
) -> list[Example]:
    examples = []
    for i, ((left, right, group), value) in enumerate(zip(texts, labels, strict=True)):
        where = f"{name}: row {i}"
        if scheme is not None:
            label = scheme.label(value, where)
        elif isinstance(value, str):
            raise ValueError(f"{where}: the label must be a number, got {value!r}")
        else:
            label = int(value) if value.is_integer() else value
        examples.append(Example(left=left, right=right, label=label, group=group))
    return _distinct(examples, name)


def _distinct(examples: list[Example], name: str) -> list[Example]:
    """`examples`, checked that no pair (its group and both texts, spaces normalised) is given
    twice with different labels; exact repeats are kept (docs/robustness.md).

    Raises:
        ValueError: a pair given twice with different labels, naming both rows.
    """
    first: dict[tuple[str, ...], int] = {}
    for i, ex in enumerate(examples):
        key = tuple(" ".join((text or "").split()) for text in (ex.group, ex.left, ex.right))
        j = first.setdefault(key, i)
        if j != i and examples[j].label != ex.label:
            raise ValueError(
                f"{name}: row {i} repeats the pair of row {j} with another label "
                f"({ex.label!r} vs {examples[j].label!r}): keep one"
            )
    return examples


def _split(examples: list[Example], name: str, scheme: LabelScheme) -> Split:
    protocol = scheme.protocol()
    return Split("pairs", name, Task.of(protocol), examples, protocol, {}, (scheme.reason,))


def fit_matcher(
    train: Any,
    dev: Any,
    *,
    model: str | None,
    inputs: Any,
    task: str | None,
    epochs: int | None,
    seed: int,
    output_dir: str | Path | None,
    progress: bool,
    train_options: dict[str, Any],
    columns: dict[str, str] | None = None,
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
    if model is None:
        from attnmatch.training.config import OWN_DATA_FALLBACK, own_data_model

        model = OWN_DATA_FALLBACK if isinstance(train, str) else own_data_model()[0]
        features = not isinstance(train, str) and model == OWN_DATA_FALLBACK
    else:
        features = False
    base: dict[str, Any] = {"model": model, "train": train_settings, "features": features}
    if inputs is not None:
        base["inputs"] = parse_inputs(inputs, default=default_inputs(model))
    with _caller_rng_kept():  # training seeds the global generators; the caller's come back
        if output_dir is None:  # a temporary run folder; the Matcher is kept in memory
            with tempfile.TemporaryDirectory(prefix="attnmatch-fit-") as tmp:
                matcher = _fit(train, dev, base, task, Path(tmp), progress, columns)
                matcher.path = None
                if (Path(tmp) / FLOOR_MODEL_DIR).is_dir():
                    Console(stderr=True).print(
                        f"the {FLOOR_MODEL_DIR} above was in a temporary folder, now deleted: "
                        "pass output_dir= to keep it, or build it again (Matcher.from_encoder "
                        "with task= and calibration=, docs/baselines.md)",
                        highlight=False,
                        markup=False,
                    )
                return matcher
        return _fit(train, dev, base, task, Path(output_dir), progress, columns)


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
    train: Any,
    dev: Any,
    base: dict[str, Any],
    task: str | None,
    out: Path,
    progress: bool,
    columns: dict[str, str] | None,
) -> Matcher:
    if isinstance(train, str):  # a registered dataset, its standard splits
        config = _config(base, DataConfig(dataset=train))
        return _trained(config, train_run(config, out, progress=progress).model_dir)
    texts, labels, grouped = read_grouped_pairs(train, "train", columns)
    groups = [group for _, _, group in texts] if grouped else None
    scheme = choose_task(labels, groups, task=task or "auto")
    train_split = _split(_labelled(texts, labels, scheme, "train"), "train", scheme)
    dev_split = None
    if dev is not None:
        # ranking: questions with their answers only are ranked among all the answers
        dev_examples, _ = evaluation_examples(
            as_examples(dev, "dev", scheme, columns), scheme, "dev"
        )
        dev_split = _split(dev_examples, "dev", scheme)
    config = _config(base, DataConfig(dataset="pairs", test_split=None))
    exp = experiment_from_splits(config, train_split, dev_split, None)
    return _trained(config, train_run(config, out, progress=progress, experiment=exp).model_dir)


def _trained(config: ExperimentConfig, model_dir: Path) -> Matcher:
    """The trained model, on the device and in the precision it was trained in."""
    t = config.train
    return Matcher.load(model_dir, device=t.device, precision=t.precision)


def _config(base: dict[str, Any], data: DataConfig) -> ExperimentConfig:
    inputs = base.get("inputs")
    return ExperimentConfig(
        model=base["model"],
        overlap_features=base.get("features", False),
        inputs=inputs,
        data=data,
        train=configs.from_dict(TrainConfig, base["train"], path="train"),
    )
