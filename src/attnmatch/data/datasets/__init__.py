"""The dataset registry: one spec per corpus module, listed explicitly below.

    split = load_split("wikiqa", "test")  # or load_split(*parse_dataset_ref("wikiqa:test"))
    len(split.examples), split.protocol.name  # (6165, 'wikiqa-official')

Files are found by `find_dataset_dir` (explicit path, `$ATTNMATCH_DATA`, `./data`,
`~/.cache/attnmatch`) and their sha256 checked before parsing.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    FileCheck,
    FileSpec,
    Protocol,
    download_dataset,
    find_dataset_dir,
    open_text,
    verified_paths,
    verify_files,
)
from attnmatch.data.schema import Example

__all__ = [
    "ChecksumError",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "DatasetSpec",
    "FileCheck",
    "FileSpec",
    "Split",
    "fetch_dataset",
    "find_dataset_dir",
    "get_dataset",
    "is_available",
    "list_datasets",
    "load_split",
    "open_text",
    "parse_dataset_ref",
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
        task: "ranking", "classification" or "regression".
        examples: the pairs, in file order.
        protocol: the official evaluation protocol for these options (None if the dataset has
            none).
        options: every loader option, defaults filled in.
    """

    dataset: str
    split: str
    task: str
    examples: list[Example]
    protocol: Protocol | None
    options: dict[str, Any]


def get_dataset(name: str) -> DatasetSpec:
    """The spec registered as `name`; an unknown name raises ValueError listing the known ones."""
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown dataset {name!r}; known datasets: {known}")
    return _REGISTRY[name]


def list_datasets() -> list[DatasetSpec]:
    """Every registered spec, sorted by name."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def parse_dataset_ref(ref: str, *, default_split: str | None = None) -> tuple[str, str]:
    """Splits `"name:split"` (e.g. `"wikiqa:test"`) and checks both parts.

    Args:
        ref: `"name:split"`, or `"name"` when `default_split` is given.
        default_split: the split used when `ref` names none.

    Raises:
        ValueError: unknown dataset, or no or unknown split.
    """
    name, sep, split = ref.partition(":")
    if not sep:
        if default_split is None:
            raise ValueError(f"expected 'dataset:split', got {ref!r}")
        split = default_split
    if name != pairs.NAME:  # a user's folder may name any split
        get_dataset(name).check_split(split)
    return name, split


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
        name: a registered dataset name (see `list_datasets`).
        split: one of the dataset's splits.
        data_dir: the dataset folder or its parent; default: see `find_dataset_dir`.
        **options: dataset options (`DatasetSpec.options`), e.g. WikiQA's `filtered=True`.

    Raises:
        ValueError: unknown dataset, split, option or option value (naming the valid ones).
        DatasetNotFoundError: the folder or a file is missing.
        ChecksumError: a file differs from the spec's sha256.
        DatasetFormatError: a file does not parse.
    """
    if name == pairs.NAME:  # the user's own folder of <split>.tsv files
        examples, protocol, resolved = pairs.load_pairs(data_dir, split, options)
        return Split(name, split, protocol.task, examples, protocol, resolved)
    spec = get_dataset(name)
    spec.check_split(split)
    resolved = spec.resolve_options(options)
    folder = find_dataset_dir(spec, data_dir)
    paths = verified_paths(spec, folder, spec.split_files[split])
    return Split(
        dataset=spec.name,
        split=split,
        task=spec.task,
        examples=spec.loader(paths, split, resolved),
        protocol=spec.make_protocol(split, resolved),
        options=resolved,
    )


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
    """
    return download_dataset(get_dataset(name), dest)
