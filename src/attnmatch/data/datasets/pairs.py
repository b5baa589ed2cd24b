"""Your own pairs: a folder of `<split>.tsv` files (or `.csv`, `.jsonl`, `.parquet`, and
`.tsv.gz`, `.csv.gz`, `.jsonl.gz`); only train is required, one file per split.

TSV: UTF-8, tab-separated, quoting off (a field may hold quotes, never a tab or a newline).
CSV (with a header), JSONL (an object per line) and parquet are read by `attnmatch.data.tabular`.
The columns (a CSV, TSV or parquet header; a JSONL object's keys) are `left`, `right`, `label`
and optionally `group` (the query id; without it the left text groups the pairs), in any order;
any other column, or one named twice, is an error. Blank lines are skipped; a UTF-8 byte order
mark is dropped; every error names the file and line (a parquet row is numbered as in a
spreadsheet, the header being row 1) and, for a value, the column. A JSONL or parquet label may
be a number or text, a group an integer or text; the texts are text.

A pair is its group and its two texts (spaces normalised). The same pair twice with the same
label is read once (the later lines are dropped, and `Split.notes` says which). The same pair
with different labels is a conflict, settled by the option `on_conflict` (`attnmatch train
--on-conflict`): "error" (the default) lists every conflicting pair with its lines and labels;
"drop" removes every line of a conflicting pair; "max" keeps the first line of the highest label
(numbers only). `Split.notes` says what was dropped. In a ranking folder a group is one query: a
group id given to two different left texts is an error naming both lines. Without a `group`
column the left text groups a ranking task's pairs, but never makes the task ranking (see
`attnmatch.data.labels`).

The task comes from train's labels by the rule of `attnmatch.data.labels` (option `task`,
default "auto"); so do the classes (the sorted distinct labels of train) and the score range of
regression (options `min_score`, `max_score`, default: train's lowest and highest label). Every
split is read with train's classes and range; the reason is said in `Split.notes`. Labels are
finite numbers or class names; a ranking label is a relevance grade >= 0 (0 or 1 when train's
are binary), a regression label lies in the score range (see `LabelScheme.label`).

Evaluation splits (every split but train) of a ranking folder whose labels are all positive
(questions with their answers only) are expanded: each question is ranked against every answer of
the split, the others labelled 0 (`expand_positive_only`). A missing dev split is held out of
train by `load_train_dev_test` (`hold_out`).

    attnmatch train --dataset pairs:my_faq -o runs/faq
    attnmatch evaluate runs/faq/model --dataset pairs:my_faq:test

User files have no published checksums, so none are checked.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetNotFoundError,
    open_text,
    tsv_fields,
)
from attnmatch.data.labels import (
    TASK_CHOICES,
    Labels,
    LabelScheme,
    choose_task,
    label_name,
    read_labels,
)
from attnmatch.data.schema import Example
from attnmatch.data.tabular import SUFFIXES, read_table, table_kind, text_value
from attnmatch.data.textfile import check_file
from attnmatch.tasks import Task

NAME = "pairs"
TITLE = "your own pairs: a folder of <split>.tsv (.csv, .jsonl, .parquet) files"
COLUMNS = ("left", "right", "label")
OPTIONAL_COLUMNS = ("group",)
OPTIONS: dict[str, Any] = {
    "task": "auto",
    "min_score": None,
    "max_score": None,
    "holdout_seed": 0,
    "on_conflict": "error",
}
ON_CONFLICT = ("error", "drop", "max")
OPTION_HELP = {
    "task": f"{' | '.join(TASK_CHOICES)} (default auto: inferred from train's labels)",
    "min_score": "regression: the lowest score (default: train's lowest label)",
    "max_score": "regression: the highest score (default: train's highest label)",
    "holdout_seed": "seeds the dev split held out of train when there is no dev file, and the "
    "answers sampled for large evaluation splits (default 0)",
    "on_conflict": "one pair given two labels: error (default: list them all) | drop (every "
    "line of the pair) | max (the highest label)",
}
TRAIN = "train"
HOLDOUT_FRACTION = 0.15  # of train's groups, when no dev file exists
MAX_EXPANDED_PAIRS = 2_000_000  # above: each question gets SAMPLED_ANSWERS others, not all
SAMPLED_ANSWERS = 1000


@dataclass(frozen=True)
class PairsFile:
    """The rows of one pairs file, labels as read (numbers or class names).

    Args:
        path: the file.
        lefts, rights, groups: each row's texts and query (the group column, else the left).
        labels: each row's label (`read_labels`).
        lines: each row's line number.
        has_group: whether the file has a group column.
        repeated: `(line, earlier line)` of each row dropped as a repeat of an earlier one
            (same pair, same label).
        conflicts: lines dropped by `on_conflict` (drop, max).
    """

    path: Path
    lefts: list[str]
    rights: list[str]
    groups: list[str]
    labels: Labels
    lines: list[int]
    has_group: bool
    repeated: tuple[tuple[int, int], ...] = ()
    conflicts: tuple[int, ...] = ()

    def where(self, i: int) -> str:
        """Row `i`'s place, "path:line"."""
        return f"{self.path}:{self.lines[i]}"


@dataclass(frozen=True)
class PairsSplit:
    """One loaded split of a pairs folder (`load_split` wraps it in a `Split`)."""

    examples: list[Example]
    protocol: Task
    options: dict[str, Any]
    notes: tuple[str, ...]


def split_path(folder: str | Path, split: str) -> Path | None:
    """`folder/<split>.tsv` (or one of the other `tabular.SUFFIXES`: `.tsv.gz`, `.csv`,
    `.jsonl`, `.parquet`, ...), whichever exists (None: none).

    Raises:
        DatasetFormatError: two exist (which one is meant is unclear).
        IsADirectoryError: one of them is a folder.
    """
    root = Path(folder).expanduser()
    candidates = [root / f"{split}{suffix}" for suffix in SUFFIXES]
    for path in candidates:
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a folder; expected the {split} file")
    found = [path for path in candidates if path.is_file()]
    if len(found) > 1:
        both = "both" if len(found) == 2 else "all"
        raise DatasetFormatError(f"{' and '.join(map(str, found))} {both} exist; keep one")
    return found[0] if found else None


def read_pairs_file(path: str | Path, on_conflict: str = "error") -> PairsFile:
    """Parses one pairs file (`.gz` read transparently); a file unchanged on disk is parsed once.

    Raises:
        FileNotFoundError, IsADirectoryError: no such file.
        DatasetFormatError: a wrong header, field count, empty text or label, text that is not
            UTF-8, a broken `.gz`, or (`on_conflict="error"`) pairs with two labels, naming
            file:line.
    """
    path = Path(path)
    check_file(path, "pairs file")
    stat = path.stat()
    resolved = str(path.resolve())
    return _read_pairs_file(str(path), resolved, stat.st_size, stat.st_mtime_ns, on_conflict)


@functools.lru_cache(maxsize=4)  # train is read by every split of a folder
def _read_pairs_file(
    name: str, resolved: str, size: int, mtime_ns: int, on_conflict: str
) -> PairsFile:
    path = Path(name)
    lefts: list[str] = []
    rights: list[str] = []
    groups: list[str] = []
    raw_labels: list[object] = []
    lines: list[int] = []
    header, rows = _rows(path)
    for lineno, row in rows:
        left = text_value(path, lineno, "left", row["left"])
        right = text_value(path, lineno, "right", row["right"])
        if not left.strip() or not right.strip():
            raise DatasetFormatError(f"{path}:{lineno}: empty left or right text")
        group = text_value(path, lineno, "group", row["group"]) if "group" in row else left
        if not group.strip():
            raise DatasetFormatError(f"{path}:{lineno}: empty group")
        lefts.append(left)
        rights.append(right)
        groups.append(group)
        raw_labels.append(row["label"])
        lines.append(lineno)
    if not lines:
        raise DatasetFormatError(f"{path}: no pairs after the header")
    try:
        labels = read_labels(raw_labels, [f"{path}:{n}" for n in lines])
    except ValueError as e:
        raise DatasetFormatError(str(e)) from None
    keep, repeated, dropped = _distinct_pairs(
        path, (groups, lefts, rights), labels, lines, on_conflict
    )
    if repeated or dropped:
        lefts, rights, groups = _pick(lefts, keep), _pick(rights, keep), _pick(groups, keep)
        labels, lines = _pick(labels, keep), _pick(lines, keep)
    return PairsFile(
        path, lefts, rights, groups, labels, lines, "group" in header, repeated, dropped
    )


def _rows(path: Path) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    """A pairs file's checked columns and its rows `(line, {column: value})`, read by the
    reader of its extension (TSV here, the others by `attnmatch.data.tabular`)."""
    if table_kind(path) in (None, "tsv"):
        return _tsv_rows(path)
    header, rows = read_table(path)
    _header(path, header, "")
    return header, rows


def _tsv_rows(path: Path) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    f = open_text(path)
    try:
        first = f.readline()
        if not first:
            raise DatasetFormatError(f"{path}: empty file; the first line must name the columns")
        header = _header(path, first.rstrip("\r\n").split("\t"), " (tab-separated)")
    except BaseException:
        f.close()
        raise

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        with f:
            for lineno, line in enumerate(f, start=2):
                if line.strip():
                    fields = tsv_fields(line, header, path=path, lineno=lineno)
                    yield lineno, dict(zip(header, fields, strict=True))

    return header, rows()


def _pick(values: list[Any], keep: list[int]) -> list[Any]:
    return [values[i] for i in keep]


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _shown(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _distinct_pairs(
    path: Path,
    texts: tuple[list[str], list[str], list[str]],
    labels: Labels,
    lines: list[int],
    on_conflict: str,
) -> tuple[list[int], tuple[tuple[int, int], ...], tuple[int, ...]]:
    """The rows to keep (each pair once), `(line, earlier line)` of the repeats dropped, and
    the lines dropped by `on_conflict` (module docstring).

    Raises:
        DatasetFormatError: (`on_conflict="error"`) pairs given two labels, every one listed
            with its lines and labels; "max" with class names.
    """
    rows: dict[tuple[str, ...], list[int]] = {}
    keys = zip(*(map(_normalised, column) for column in texts), strict=True)
    for i, key in enumerate(keys):
        rows.setdefault(key, []).append(i)
    conflicts = [r for r in rows.values() if len({label_name(labels[i]) for i in r}) > 1]
    if conflicts and on_conflict == "error":
        listed = "; ".join(
            ", ".join(f"line {lines[i]}: {label_name(labels[i])!r}" for i in r) for r in conflicts
        )
        raise DatasetFormatError(
            f"{path}: {len(conflicts)} pair(s) given different labels ({listed}); a pair has "
            "one label: fix the lines, or pass --on-conflict drop (remove those pairs) or max "
            "(keep the highest label)"
        )
    if conflicts and on_conflict == "max" and isinstance(labels[0], str):
        raise DatasetFormatError(
            f"{path}:{lines[conflicts[0][0]]}: --on-conflict max needs numeric labels, these "
            "are class names; use drop, or fix the lines"
        )
    keep: list[int] = []
    repeated: list[tuple[int, int]] = []
    dropped: list[int] = []
    conflicting = {r[0] for r in conflicts}
    for r in rows.values():
        if r[0] in conflicting:
            best = max(r, key=lambda i: float(labels[i])) if on_conflict == "max" else None
            keep += [] if best is None else [best]
            dropped += [lines[i] for i in r if i != best]
            continue
        keep.append(r[0])
        repeated += [(lines[i], lines[r[0]]) for i in r[1:]]
    return sorted(keep), tuple(sorted(repeated)), tuple(sorted(dropped))


def check_queries(file: PairsFile) -> None:
    """Checks that each group of a ranking file is one query: one left text (spaces
    normalised) for every row of the group.

    Raises:
        DatasetFormatError: a group with two left texts, naming both lines.
    """
    first: dict[str, int] = {}
    for i, group in enumerate(file.groups):
        j = first.setdefault(group, i)
        if _normalised(file.lefts[j]) != _normalised(file.lefts[i]):
            raise DatasetFormatError(
                f"{file.where(i)}: group {_shown(group)} has the left text "
                f"{_shown(file.lefts[i])} here but {_shown(file.lefts[j])} on line "
                f"{file.lines[j]}; a ranking group is one query: give each question its own "
                "group id"
            )


def _header(path: Path, header: list[str], separated: str) -> list[str]:
    """`header`, checked against the pairs columns (`separated` says how a TSV's are)."""
    allowed = f"{', '.join(COLUMNS)} and optionally {', '.join(OPTIONAL_COLUMNS)}"
    for name in header:
        if name not in COLUMNS + OPTIONAL_COLUMNS:
            raise DatasetFormatError(
                f"{path}:1: unknown column {name!r}; the columns are {allowed}{separated}"
            )
    if duplicated := sorted(c for c, n in Counter(header).items() if n > 1):
        raise DatasetFormatError(f"{path}:1: column(s) {duplicated} named twice")
    if missing := [c for c in COLUMNS if c not in header]:
        raise DatasetFormatError(
            f"{path}:1: the header lacks column(s) {missing}; the columns are {allowed}"
        )
    return header


def resolve_options(options: dict[str, Any]) -> dict[str, Any]:
    """`options` completed with defaults (`OPTIONS`) and checked.

    Raises:
        ValueError: an unknown option (listing the valid ones) or a bad value.
    """
    if unknown := sorted(set(options) - set(OPTIONS)):
        raise ValueError(f"pairs: unknown option(s) {unknown}; valid options: {', '.join(OPTIONS)}")
    resolved = {**OPTIONS, **options}
    if resolved["task"] not in TASK_CHOICES:
        raise ValueError(
            f"pairs: option task={resolved['task']!r} is not one of {', '.join(TASK_CHOICES)}"
        )
    for key in ("min_score", "max_score"):
        value = resolved[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"pairs: option {key}={value!r} must be a number")
    if resolved["on_conflict"] not in ON_CONFLICT:
        raise ValueError(
            f"pairs: option on_conflict={resolved['on_conflict']!r} is not one of "
            f"{', '.join(ON_CONFLICT)}"
        )
    seed = resolved["holdout_seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"pairs: option holdout_seed={seed!r} must be an integer >= 0")
    return resolved


def label_scheme(
    folder: str | Path, split: str, options: dict[str, Any], *, reference: str = TRAIN
) -> tuple[LabelScheme, tuple[str, ...]]:
    """The labels' meaning for every split of `folder`, from its `reference` split (train; the
    split itself when the folder has no train file), with the notes to say.

    Args:
        folder: the pairs folder.
        split: the split being loaded.
        options: resolved options (`resolve_options`).
        reference: the training split's name.
    """
    path = split_path(folder, reference)
    notes: tuple[str, ...] = ()
    if path is None:
        path = split_path(folder, split)
        if path is None:
            raise DatasetNotFoundError(_missing(folder, split))
        notes = (f"{split}: no {reference} file in {folder}: the task is read from {path.name}",)
    file = read_pairs_file(path, options["on_conflict"])
    try:
        scheme = choose_task(
            file.labels,
            file.groups if file.has_group else None,
            task=options["task"],
            min_score=options["min_score"],
            max_score=options["max_score"],
            source=str(path),
            where=[file.where(i) for i in range(len(file.labels))],
        )
    except ValueError as e:
        raise DatasetFormatError(str(e)) from None
    return scheme, (scheme.reason, *notes)


def load_pairs(
    folder: str | Path | None,
    split: str,
    options: dict[str, Any],
    *,
    reference: str = TRAIN,
    training: bool | None = None,
) -> PairsSplit:
    """Loads `split` of the pairs folder `folder`.

    Args:
        folder: the folder of `<split>.tsv` files.
        split: the split, e.g. "dev".
        options: pairs options (`OPTIONS`), unresolved.
        reference: the training split, whose labels decide the task, classes and score range.
        training: whether `split` trains (is never expanded); default: `split == reference`.

    Raises:
        ValueError: no folder, an unknown option or value.
        DatasetNotFoundError: the split's file is absent.
        DatasetFormatError: a file does not parse, or its labels do not fit train's.
    """
    resolved = resolve_options(options)
    if folder is None and Path(split).expanduser().is_file():
        raise ValueError(
            f"pairs: {split} is a file; pairs:FOLDER names the folder that holds train.tsv "
            f"(here pairs:{Path(split).parent})"
        )
    if folder is None:
        raise ValueError(
            f"pairs: no folder for split {split!r} ({split!r} is not a folder here): name one as "
            "pairs:FOLDER or pairs:FOLDER:SPLIT, or give data_dir"
        )
    path = split_path(folder, split)
    if path is None:
        raise DatasetNotFoundError(_missing(folder, split))
    scheme, notes = label_scheme(folder, split, resolved, reference=reference)
    file = read_pairs_file(path, resolved["on_conflict"])
    if scheme.task == "ranking":
        check_queries(file)
    if file.repeated:
        notes += (_repeats_note(split, file),)
    if file.conflicts:
        notes += (_conflicts_note(split, file, resolved["on_conflict"]),)
    examples = []
    for i, value in enumerate(file.labels):
        try:
            label = scheme.label(value, file.where(i))
        except ValueError as e:
            raise DatasetFormatError(str(e)) from None
        ex_id = f"{path.name}:{file.lines[i]}"
        examples.append(Example(file.lefts[i], file.rights[i], label, file.groups[i], ex_id))
    if not (split == reference if training is None else training):
        examples, expanded = evaluation_examples(
            examples, scheme, split, seed=resolved["holdout_seed"], source=path
        )
        notes += expanded
    return PairsSplit(examples, scheme.protocol(), resolved, notes)


def evaluation_examples(
    examples: Sequence[Example],
    scheme: LabelScheme,
    split: str,
    *,
    seed: int = 0,
    source: Path | None = None,
) -> tuple[list[Example], tuple[str, ...]]:
    """An evaluation split's examples as evaluated: in a ranking folder, questions with their
    answers only are ranked among all the split's answers (`expand_positive_only`); other
    tasks' splits are unchanged.

    Args:
        source: the split's file: a ranking split without a relevant pair is then refused.

    Returns:
        The examples, and the note saying what was done (none when unchanged).

    Raises:
        DatasetFormatError: `source` is given and no pair is relevant (label > 0).
    """
    if scheme.task != "ranking":
        return list(examples), ()
    if source is not None and not any(ex.label > 0 for ex in examples):
        raise DatasetFormatError(
            f"{source}: split {split!r} has no relevant pair (label > 0): no query to rank "
            "its candidates for"
        )
    return expand_positive_only(examples, split, seed=seed)


def _repeats_note(split: str, file: PairsFile) -> str:
    line, earlier = file.repeated[0]
    more = f" and {len(file.repeated) - 1} more" if len(file.repeated) > 1 else ""
    return (
        f"{split}: {len(file.repeated)} repeated pair(s) of {file.path.name} read once (line "
        f"{line} repeats line {earlier}{more}: same group, texts and label)"
    )


def _conflicts_note(split: str, file: PairsFile, policy: str) -> str:
    lines = ", ".join(map(str, file.conflicts))
    kept = "the highest label kept" if policy == "max" else "every line of those pairs dropped"
    return (
        f"{split}: pairs given different labels in {file.path.name} (on_conflict={policy}: "
        f"{kept}): lines {lines} dropped"
    )


def _missing(folder: str | Path, split: str) -> str:
    root = Path(folder).expanduser()
    if root.is_file():
        return (
            f"pairs: {folder} is a file; pairs:FOLDER names the folder that holds {split}.tsv "
            "(or .csv, .jsonl, .parquet)"
        )
    if not root.is_dir():
        return f"pairs: folder not found: {folder}"
    return (
        f"pairs: no {split}.tsv (or {split}.tsv.gz) in {folder}, nor {split}.csv, "
        f"{split}.jsonl or {split}.parquet"
    )


def hold_out(
    examples: Sequence[Example], *, fraction: float = HOLDOUT_FRACTION, seed: int = 0
) -> tuple[list[Example], list[Example], int]:
    """Splits `examples` by group: `fraction` of the groups (at least 1) held out, seeded.

    Returns:
        (the rest, the held-out pairs, the number of groups), file order kept in both.

    Raises:
        ValueError: fewer than 2 groups.
    """
    keys = list(dict.fromkeys(ex.group for ex in examples))
    if len(keys) < 2:
        raise ValueError(f"cannot hold out a dev split from {len(keys)} group(s); add a dev file")
    order = np.random.default_rng(seed).permutation(len(keys))
    held = {keys[i] for i in order[: max(1, round(fraction * len(keys)))]}
    rest = [ex for ex in examples if ex.group not in held]
    return rest, [ex for ex in examples if ex.group in held], len(keys)


def expand_positive_only(
    examples: Sequence[Example], split: str, *, seed: int = 0
) -> tuple[list[Example], tuple[str, ...]]:
    """A ranking split of questions with their answers only, as retrieval among its answers.

    When no group has a candidate labelled <= 0, each group is ranked against every distinct
    right text of the split (its own answers keep their labels, the others are labelled 0), so
    that MAP and MRR measure finding a question's answers among all of them. Beyond
    `MAX_EXPANDED_PAIRS` pairs, each group gets its own answers and `SAMPLED_ANSWERS` others
    drawn at random (seeded). A split with a non-positive candidate is returned unchanged.

    Returns:
        The examples, and the note saying what was done (none when unchanged).
    """
    if not examples or any(float(ex.label) <= 0 for ex in examples):
        return list(examples), ()
    answers = list(dict.fromkeys(ex.right for ex in examples))
    index = {text: i for i, text in enumerate(answers)}
    groups: dict[str | None, list[Example]] = {}
    for ex in examples:
        groups.setdefault(ex.group, []).append(ex)
    total = len(groups) * len(answers)
    sampled = total > MAX_EXPANDED_PAIRS
    rng = np.random.default_rng(seed)
    out: list[Example] = []
    for group, own in groups.items():
        labels = {index[ex.right]: ex for ex in reversed(own)}  # the first pair of a text wins
        if sampled:
            n = min(SAMPLED_ANSWERS + len(labels), len(answers))
            drawn = rng.choice(len(answers), size=n, replace=False)
            others = [int(i) for i in drawn if int(i) not in labels][:SAMPLED_ANSWERS]
            candidates = sorted({*labels, *others})
        else:
            candidates = list(range(len(answers)))
        left = own[0].left
        for i in candidates:
            out.append(labels[i] if i in labels else Example(left, answers[i], 0.0, group))
    if sampled:
        note = (
            f"{split}: each of {len(groups)} questions ranked against its answers and "
            f"{SAMPLED_ANSWERS} others sampled from the {len(answers)} answers of the split "
            f"(seed {seed}; all would be {total:,} pairs)"
        )
    else:
        note = (
            f"{split}: each of {len(groups)} questions ranked against all {len(answers)} "
            "answers of the split"
        )
    return out, (note,)
