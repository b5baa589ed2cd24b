"""Training from Python (`fit`, `distill`) on pairs in memory, a DataFrame, or a dataset name."""

from __future__ import annotations

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
from attnmatch.data.datasets.pairs import evaluation_examples
from attnmatch.data.labels import Labels, LabelScheme, choose_task, read_labels
from attnmatch.data.schema import Example
from attnmatch.data.tabular import table_columns
from attnmatch.inputs import parse_inputs
from attnmatch.matcher import Matcher, load_matcher
from attnmatch.models import default_inputs
from attnmatch.tasks import Task
from attnmatch.training.config import (
    OWN_DATA_FALLBACK,
    DataConfig,
    ExperimentConfig,
    TrainConfig,
    own_data_model,
)
from attnmatch.training.distillation import DistillConfig, default_student, distill_splits
from attnmatch.training.experiment import experiment_from_splits, load_splits
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


def fit(
    train: Any,
    dev: Any = None,
    *,
    model: str | None = None,
    inputs: str | dict[str, Any] | None = None,
    task: str | None = None,
    epochs: int | None = None,
    seed: int = 1,
    output_dir: str | Path | None = None,
    progress: bool = False,
    columns: dict[str, str] | None = None,
    **train_options: Any,
) -> Matcher:
    """Trains a model and returns it as a Matcher: the run's kept model, the best on dev of
    the trained model and the no-training floors (`attnmatch.training.keep`; the trained one
    whatever the floors score with keep="trained").

    Args:
        train, dev: lists of (left, right, label) tuples, pandas DataFrames or Hugging Face
            `datasets.Dataset`s with columns left, right, label (and optionally group), or
            a dataset name ("wikiqa"). With no dev split nothing is selected: the last
            epoch is kept.
        model: a preset or model type; default: for your own pairs the fine-tuned MiniLM
            bi-encoder ("minilm_bi_encoder") when the minilm extra is installed, else
            and for a dataset name "amvlstm_q".
        inputs: the model's own by default (GloVe 6B 50d word vectors for most models,
            trigrams for DSSM and CDSSM, MiniLM for the MiniLM presets); or
            "glove-6b-50d", "random" (trained word vectors), "trigrams", "minilm-l6", a
            vectors file or encoder directory, or an `[inputs]` dict (a dict without
            "kind" changes the model's own inputs).
        train, dev, task: with a dataset name as `train`, its dev split and task are
            used; `dev` and `task` are then errors.
        task: "ranking", "classification" or "regression"; inferred when omitted (pairs
            grouped by query with 0/1 labels rank; other integer labels classify; real
            labels regress).
        epochs, seed, **train_options: `[train]` settings (lr, batch_size, loss, ...),
            among them device ("cpu", "cuda", "cuda:N", "auto") and precision ("fp32",
            "bf16", "fp16"): the returned Matcher is on that device, in that precision.
        output_dir: the run folder (a temporary one by default).
        columns: for a DataFrame or Dataset whose columns are named otherwise, {our
            name: theirs}, e.g. {"left": "question", "right": "answer"}.
    """
    train_settings = {"seed": seed, **train_options}
    if epochs is not None:
        train_settings["epochs"] = epochs
    _check_dataset_alone(train, dev, task)
    if model is None:
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
                return matcher
        return _fit(train, dev, base, task, Path(output_dir), progress, columns)


def distill(
    teacher: Any,
    train: Any,
    dev: Any = None,
    *,
    student: str | None = None,
    inputs: str | dict[str, Any] | None = None,
    task: str | None = None,
    weights: Sequence[float] = (0.5, 1.0),
    loss: str = "auto",
    seed: int = 1,
    output_dir: str | Path | None = None,
    progress: bool = False,
    **train_options: Any,
) -> Matcher:
    """Trains a fast student on a teacher's scores and the gold labels
    (`attnmatch.training.distillation`) and returns it.

    Args:
        teacher: a Matcher, a model directory or encoder source ("minilm-l6": zero-shot),
            or a list of them (their scores averaged).
        train, dev, task: as `fit` (pairs, a DataFrame, or a dataset name).
        student: a preset or model type (any seed model), on `inputs` (as `fit`); None: the
            task's (`training.distillation.DISTILL_STUDENTS`: attention MP-CNN for similarity scores, aMV-LSTM
            (Q) otherwise).
        weights: the distillation loss's weights tried (one run each, the best on dev).
        loss: the distillation loss ("auto": Margin-MSE for ranking, squared error for
            regression, soft-label KL for classification).
        output_dir: the run folder (a temporary one by default); **train_options:
            `[train]` settings (epochs, lr, batch_size, ...).
    """
    given = teacher if isinstance(teacher, list | tuple) else [teacher]
    teachers = [t if isinstance(t, Matcher) else load_matcher(t) for t in given]
    _check_dataset_alone(train, dev, task)
    splits: tuple[Split, Split | None, Split | None]
    if isinstance(train, str):
        data = DataConfig(dataset=train)
        splits = load_splits(ExperimentConfig(data=data))
    else:
        data = DataConfig(dataset="pairs", test_split=None)
        splits = splits_from_pairs(train, dev, task=task)
    student = student or default_student(splits)
    config = ExperimentConfig(
        model=student,
        inputs=None if inputs is None else parse_inputs(inputs, default=default_inputs(student)),
        data=data,
        train=configs.from_dict(TrainConfig, {"seed": seed, **train_options}, path="train"),
    )
    options = DistillConfig(loss=loss, weights=tuple(weights), seed=seed)

    def run(out: Path) -> Matcher:
        result = distill_splits(config, teachers, splits, out, options, progress=progress)
        return Matcher.load(result.model_dir)

    if output_dir is not None:
        return run(Path(output_dir))
    with tempfile.TemporaryDirectory(prefix="attnmatch-distill-") as tmp:
        matcher = run(Path(tmp))
        matcher.path = None
        return matcher


def splits_from_pairs(
    train: Any, dev: Any, *, task: str | None = None, columns: dict[str, str] | None = None
) -> tuple[Split, Split | None, None]:
    """(train, dev, None) splits of pairs given in memory (`read_pairs`), their task chosen
    from train's labels (`choose_task`; only given groups make 0/1 labels a ranking), dev
    read as evaluation examples (a question with its answers only is ranked among all the
    answers)."""
    texts, labels, grouped = read_grouped_pairs(train, "train", columns)
    groups = [group for _, _, group in texts] if grouped else None
    scheme = choose_task(labels, groups, task=task or "auto")
    train_split = _split(_labelled(texts, labels, scheme, "train"), "train", scheme)
    if dev is None:
        return train_split, None, None
    dev_examples, _ = evaluation_examples(as_examples(dev, "dev", scheme, columns), scheme, "dev")
    return train_split, _split(dev_examples, "dev", scheme), None


def _check_dataset_alone(train: Any, dev: Any, task: str | None) -> None:
    if isinstance(train, str) and (dev is not None or task is not None):
        raise ValueError(
            f"train={train!r} names a dataset: its own dev split and task are used, so dev and "
            "task must not be given (pass pairs to choose them)"
        )


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
    train_split, dev_split, _ = splits_from_pairs(train, dev, task=task, columns=columns)
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
