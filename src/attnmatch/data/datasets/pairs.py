"""Your own pairs: a folder of `<split>.tsv` files (train.tsv, dev.tsv, test.tsv, ...).

Format: UTF-8, tab-separated, a header line naming the columns `left`, `right`, `label` and,
optionally, `group` (the query id; ranking groups by it, and by the left text when absent).
Quoting is off: a field may contain quotes but no tabs or newlines. Labels: 0/1 (or graded
integers) for ranking, class indices 0..C-1 for classification, real scores in
[min_score, max_score] for regression (options `min_score`, `max_score`, default 0 and 5).

    attnmatch train --dataset pairs --set data.data_dir=my_pairs --set data.options.task=ranking

User files have no published checksums, so none are checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnmatch.data.datasets._spec import DatasetFormatError, DatasetNotFoundError, open_text
from attnmatch.data.protocol import (
    ClassificationProtocol,
    Protocol,
    RankingProtocol,
    RegressionProtocol,
)
from attnmatch.data.schema import Example

NAME = "pairs"
OPTIONS: dict[str, Any] = {"task": "ranking", "num_classes": 2, "min_score": 0, "max_score": 5}


def read_pairs_tsv(path: Path, *, task: str) -> list[Example]:
    """Parses one pairs file; errors name the file, line and column."""
    examples: list[Example] = []
    with open_text(path) as f:
        header = f.readline().rstrip("\r\n").split("\t")
        missing = [c for c in ("left", "right", "label") if c not in header]
        if missing:
            raise DatasetFormatError(
                f"{path}: line 1: header must name columns left, right, label (and optionally "
                f"group), tab-separated; missing {missing}, got {header}"
            )
        col = {name: i for i, name in enumerate(header)}
        for lineno, line in enumerate(f, start=2):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != len(header):
                raise DatasetFormatError(
                    f"{path}: line {lineno}: expected {len(header)} tab-separated fields, got {len(fields)}"
                )
            raw = fields[col["label"]]
            try:
                label: int | float = int(raw) if task == "classification" else float(raw)
            except ValueError:
                raise DatasetFormatError(
                    f"{path}: line {lineno}: column 'label': not a number: {raw!r}"
                ) from None
            left, right = fields[col["left"]], fields[col["right"]]
            if not left.strip() or not right.strip():
                raise DatasetFormatError(f"{path}: line {lineno}: empty left or right text")
            group = fields[col["group"]] if "group" in col else left
            examples.append(
                Example(
                    left=left, right=right, label=label, group=group, id=f"{path.name}:{lineno}"
                )
            )
    if not examples:
        raise DatasetFormatError(f"{path}: no pairs")
    return examples


def load_pairs(
    folder: str | Path | None, split: str, options: dict[str, Any]
) -> tuple[list[Example], Protocol, dict[str, Any]]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"pairs: unknown option(s) {unknown}; valid options: {', '.join(OPTIONS)}")
    resolved = {**OPTIONS, **options}
    task = resolved["task"]
    if task not in ("ranking", "classification", "regression"):
        raise ValueError(
            f"pairs: option task={task!r} is not one of ('ranking', 'classification', 'regression')"
        )
    if folder is None:
        raise ValueError("the 'pairs' dataset needs a folder: set data.data_dir (or --data-dir)")
    path = Path(folder) / f"{split}.tsv"
    if not path.is_file():
        raise DatasetNotFoundError(f"pairs: split file not found: {path}")
    examples = read_pairs_tsv(path, task=task)
    protocol: Protocol
    if task == "ranking":
        protocol = RankingProtocol(
            name="pairs-ranking", description="groups with at least one relevant candidate"
        )
    elif task == "regression":
        lo, hi = int(resolved["min_score"]), int(resolved["max_score"])
        protocol = RegressionProtocol(name="pairs-regression", min_score=lo, max_score=hi)
        bad = [ex for ex in examples if not lo <= float(ex.label) <= hi]
        if bad:
            raise DatasetFormatError(
                f"{path}: {bad[0].id}: score {bad[0].label} outside {lo}..{hi}"
            )
    else:
        protocol = ClassificationProtocol(
            name="pairs-classification", num_classes=int(resolved["num_classes"])
        )
        bad = [ex for ex in examples if not 0 <= int(ex.label) < protocol.num_classes]
        if bad:
            raise DatasetFormatError(
                f"{path}: {bad[0].id}: label {bad[0].label} outside 0..{protocol.num_classes - 1}"
            )
    return examples, protocol, resolved
