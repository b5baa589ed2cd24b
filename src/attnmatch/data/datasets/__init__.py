"""The dataset registry: one spec per corpus module, listed explicitly below.

    split = load_split("wikiqa", "test")  # or load_split(*parse_dataset_ref("wikiqa:test"))
    len(split.examples), split.protocol.name  # (6165, 'wikiqa-official')

Files are found by `find_dataset_dir` (explicit path, `$ATTNMATCH_DATA`, `./data`, the source
checkout's `data/`, `~/.cache/attnmatch`) and their sha256 checked before parsing. Your own pairs
are the dataset "pairs" (see `pairs.py`), named with their folder as `pairs:FOLDER` (and, where a
split is asked for, `pairs:FOLDER:SPLIT`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from attnmatch.data.datasets import (
    insuranceqa,
    msrp,
    multinli,
    pairs,
    quora,
    scitail,
    semeval_sts,
    sick,
    snli,
    sts_benchmark,
    trecqa,
    twitter_cs,
    ubuntu,
    wikiqa,
)
from attnmatch.data.datasets._spec import (
    ChecksumError,
    DatasetFormatError,
    DatasetNotFoundError,
    DatasetSpec,
    DownloadError,
    FileCheck,
    FileSpec,
    download_dataset,
    find_dataset_dir,
    open_text,
    verified_paths,
    verify_files,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import Task

__all__ = [
    "ChecksumError",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "DatasetSpec",
    "DownloadError",
    "FileCheck",
    "FileSpec",
    "Split",
    "fetch_dataset",
    "find_dataset_dir",
    "get_dataset",
    "is_available",
    "list_datasets",
    "load_split",
    "load_train_dev_test",
    "open_text",
    "parse_dataset_ref",
    "resolve_dataset_ref",
    "split_availability",
    "verify_dataset",
]

# Add a corpus here by importing its module and listing its SPECS; nothing registers by import.
_MODULES = (
    wikiqa,
    trecqa,
    sick,
    sts_benchmark,
    semeval_sts,
    msrp,
    quora,
    scitail,
    snli,
    multinli,
    insuranceqa,
    ubuntu,
    twitter_cs,
)
_REGISTRY: dict[str, DatasetSpec] = {spec.name: spec for m in _MODULES for spec in m.SPECS}


@dataclass(frozen=True)
class Split:
    """One loaded split.

    Args:
        dataset: the dataset's registry name.
        split: the split's name.
        task: what a model trained on the split predicts: `Task.of(protocol)` (the spec's task
            when the split has no protocol).
        examples: the pairs, in file order.
        protocol: the official evaluation protocol for these options (None if the dataset has
            none).
        options: every loader option, defaults filled in.
        notes: what loading decided that a user should be told, one sentence each (your pairs:
            the inferred task, a dev split held out of train, expanded candidates).
    """

    dataset: str
    split: str
    task: Task
    examples: list[Example]
    protocol: Task | None
    options: dict[str, Any]
    notes: tuple[str, ...] = ()


def get_dataset(name: str) -> DatasetSpec:
    """The spec registered as `name`; an unknown name raises ValueError listing the known ones."""
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown dataset {name!r}; known datasets: {known}")
    return _REGISTRY[name]


def list_datasets() -> list[DatasetSpec]:
    """Every registered spec, sorted by name."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def resolve_dataset_ref(
    ref: str, *, default_split: str | None = None
) -> tuple[str, str, str | None]:
    """Splits a split reference into `(dataset name, split, folder or None)`.

    - `"name:split"` (e.g. `"wikiqa:test"`), or `"name"` with `default_split`: a registered
      dataset, found by `find_dataset_dir`; the folder is None.
    - `"pairs:FOLDER"` (an existing folder; `default_split`) or `"pairs:FOLDER:SPLIT"`: your own
      pairs in FOLDER. `"pairs:SPLIT"` where SPLIT is no folder, and `"pairs"`, leave the folder
      to the caller's `data_dir`.

    Raises:
        ValueError: unknown dataset, or no or unknown split.
    """
    name, sep, rest = ref.partition(":")
    if name == pairs.NAME and sep:
        if not rest:
            raise ValueError(f"expected 'pairs:FOLDER' or 'pairs:FOLDER:SPLIT', got {ref!r}")
        if Path(rest).expanduser().is_dir():
            return name, _split_or_default(ref, default_split), rest
        folder, colon, split = rest.rpartition(":")
        if colon and folder and split:
            return name, split, folder
        return name, rest, None  # a split of the folder given as data_dir
    split = rest if sep else _split_or_default(ref, default_split)
    if name != pairs.NAME:  # a user's folder may name any split
        get_dataset(name).check_split(split)
    return name, split, None


def _split_or_default(ref: str, default_split: str | None) -> str:
    if default_split is None:
        raise ValueError(f"expected 'dataset:split', got {ref!r}")
    return default_split


def parse_dataset_ref(ref: str, *, default_split: str | None = None) -> tuple[str, str]:
    """`(name, split)` of a split reference for `load_split(name, split)`: `resolve_dataset_ref`,
    with your pairs' folder kept in the name (`"pairs:FOLDER"`).

    Raises:
        ValueError: unknown dataset, or no or unknown split.
    """
    name, split, folder = resolve_dataset_ref(ref, default_split=default_split)
    return (f"{name}:{folder}" if folder is not None else name), split


def _pairs_folder(name: str, data_dir: str | Path | None) -> str | Path | None:
    """The folder of the pairs dataset `name` ("pairs" or "pairs:FOLDER") and `data_dir`."""
    folder = name.partition(":")[2] or None
    if folder is not None and data_dir is not None and Path(folder) != Path(data_dir):
        raise ValueError(
            f"the pairs folder is named twice: {name!r} and data_dir={str(data_dir)!r}; give one"
        )
    return folder if folder is not None else data_dir


def _is_pairs(name: str) -> bool:
    return name == pairs.NAME or name.startswith(f"{pairs.NAME}:")


def split_availability(
    spec: DatasetSpec | str, data_dir: str | Path | None = None
) -> dict[str, bool]:
    """For each split, whether all its files are present (checksums are checked when loading)."""
    spec = get_dataset(spec) if isinstance(spec, str) else spec
    try:
        folder = find_dataset_dir(spec, data_dir)
    except DatasetNotFoundError:
        return dict.fromkeys(spec.splits, False)
    return {
        split: all(
            any((folder / n).is_file() for n, _ in spec.file(name).candidates) for name in names
        )
        for split, names in spec.split_files.items()
    }


def is_available(spec: DatasetSpec | str, data_dir: str | Path | None = None) -> bool:
    """Whether every file of every split is present (checksums are checked when loading)."""
    return all(split_availability(spec, data_dir).values())


def load_split(
    name: str, split: str, *, data_dir: str | Path | None = None, **options: Any
) -> Split:
    """Loads one split of a registered dataset, after checking its files' sha256.

    Args:
        name: a registered dataset name (see `list_datasets`); or "pairs:FOLDER" (or "pairs"
            with `data_dir`), your own pairs.
        split: one of the dataset's splits.
        data_dir: the dataset folder or its parent; default: see `find_dataset_dir`.
        **options: dataset options (`DatasetSpec.options`), e.g. WikiQA's `filtered=True`.

    Raises:
        ValueError: unknown dataset, split, option or option value (naming the valid ones).
        DatasetNotFoundError: the folder or a file is missing.
        ChecksumError: a file differs from the spec's sha256.
        DatasetFormatError: a file does not parse.
    """
    if _is_pairs(name):  # the user's own folder of <split>.tsv files
        return _pairs_split(pairs.load_pairs(_pairs_folder(name, data_dir), split, options), split)
    spec = get_dataset(name)
    spec.check_split(split)
    resolved = spec.resolve_options(options)
    folder = find_dataset_dir(spec, data_dir)
    paths = verified_paths(spec, folder, spec.split_files[split])
    protocol = spec.make_protocol(split, resolved)
    return Split(
        dataset=spec.name,
        split=split,
        task=spec.task if protocol is None else Task.of(protocol),
        examples=spec.loader(paths, split, resolved),
        protocol=protocol,
        options=resolved,
    )


def _pairs_split(loaded: pairs.PairsSplit, split: str) -> Split:
    return Split(
        dataset=pairs.NAME,
        split=split,
        task=Task.of(loaded.protocol),
        examples=loaded.examples,
        protocol=loaded.protocol,
        options=loaded.options,
        notes=loaded.notes,
    )


def load_train_dev_test(
    name: str,
    train: str = "train",
    dev: str = "dev",
    test: str | None = "test",
    *,
    data_dir: str | Path | None = None,
    **options: Any,
) -> tuple[Split, Split, Split | None]:
    """The training, selection and (optional) test splits of a dataset, as `load_split` loads
    them.

    Your own pairs ("pairs:FOLDER") need only a train file: without a dev file, the dev split is
    `pairs.HOLDOUT_FRACTION` of train's groups (queries, or left texts), held out with the
    option `holdout_seed` and removed from train; without a test file, test is None. Each says
    so in its `Split.notes`.

    Args:
        name: as in `load_split`.
        train, dev, test: the split names (test None: none).
        data_dir, **options: as in `load_split`.
    """
    if not _is_pairs(name):
        return (
            load_split(name, train, data_dir=data_dir, **options),
            load_split(name, dev, data_dir=data_dir, **options),
            load_split(name, test, data_dir=data_dir, **options) if test else None,
        )
    folder = _pairs_folder(name, data_dir)

    def load(split: str) -> Split:
        return _pairs_split(pairs.load_pairs(folder, split, options, reference=train), split)

    train_split = load(train)
    if folder is not None and pairs.split_path(folder, dev) is None:
        train_split, dev_split = _held_out_dev(train_split, dev)
    else:
        dev_split = load(dev)
    test_split = None
    if test and folder is not None and pairs.split_path(folder, test) is None:
        note = f"test: no {test}.tsv in {folder}: no test evaluation"
        train_split = replace(train_split, notes=(*train_split.notes, note))
    elif test:
        test_split = load(test)
    return train_split, dev_split, test_split


def _held_out_dev(train: Split, dev: str) -> tuple[Split, Split]:
    seed = train.options["holdout_seed"]
    try:
        rest, held, n = pairs.hold_out(train.examples, seed=seed)
    except ValueError as e:
        raise ValueError(f"pairs: no {dev}.tsv, and {e}") from None
    unit = "queries" if train.task.kind == "ranking" else "groups"
    k = len(dict.fromkeys(ex.group for ex in held))
    if train.task.kind == "ranking" and not any(ex.label > 0 for ex in held):
        raise ValueError(
            f"pairs: no {dev}.tsv, and the {k} {unit} held out of {train.split}.tsv (seed {seed}) "
            "have no relevant pair (label > 0); add a dev file or change the option holdout_seed"
        )
    note = f"{dev}: no {dev}.tsv; held out {k} of {n} {unit} of {train.split}.tsv (seed {seed})"
    expanded: tuple[str, ...] = ()
    if train.task.kind == "ranking":
        held, expanded = pairs.expand_positive_only(held, dev, seed=seed)
    reason = train.notes[:1]  # the task's reason
    dev_split = replace(train, split=dev, examples=held, notes=(*reason, note, *expanded))
    return replace(train, examples=rest), dev_split


def verify_dataset(name: str, data_dir: str | Path | None = None) -> list[FileCheck]:
    """Checks every file of dataset `name`: one `FileCheck` ("ok", "missing", "mismatch") each."""
    return verify_files(get_dataset(name), data_dir)


def fetch_dataset(name: str, dest: str | Path | None = None) -> Path:
    """Downloads dataset `name` from its official URL into `dest/<folder>` and verifies it.

    Args:
        name: a registered dataset name.
        dest: a data root, default `~/.cache/attnmatch` (where `load_split` looks last).

    Returns:
        The dataset folder.

    Raises:
        DownloadError: no connection, or the server failed (one line: what to do instead).
    """
    if name == pairs.NAME:
        raise ValueError(
            "pairs is your own folder of <split>.tsv files: nothing to fetch; see "
            "`attnmatch datasets info pairs`"
        )
    return download_dataset(get_dataset(name), dest)
