"""Labels of your own pairs: read as numbers or class names, and the one rule that picks a task.

The `pairs` dataset (your files) and `attnmatch.training.fit` (pairs in memory) both call `read_labels` and
`choose_task`. With `task="auto"` the training labels decide:

- labels that are not numbers ("duplicate", "entailment"): classification; the classes are the
  sorted distinct labels of train;
- every label 1 (positive pairs only): ranking (the trainer draws the negatives);
- labels 0/1 with a `group` column where some group holds several candidates: ranking (a left
  text that recurs is no group: paraphrase and NLI sets repeat sentences);
- labels 0/1 otherwise: classification;
- integer labels of more than 2 levels, or any non-integer number: regression, the score range
  taken from train (see `choose_task`).

A few labels outside the 0/1 scheme of all the others (at least 95% of train is 0/1: one stray
-1 or 2) are an error naming their lines rather than a switch to regression or a 2-class task;
an explicit task reads them as they are.

"1.0" is the integer 1, for classification too (class "1"). An explicit task wins. The choice
comes with its reason as a sentence, e.g. "task: ranking (labels 0/1, 873 queries with several
candidates; set task= to change)", which training prints.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from attnmatch.tasks import (
    MULTICLASS_METRICS,
    ClassificationTask,
    RankingTask,
    RegressionTask,
    Task,
    integral,
)

TASKS = ("ranking", "classification", "regression")
TASK_CHOICES = ("auto", *TASKS)
# Classification selects on accuracy when the smallest class of train has at least this share;
# below it, accuracy rewards the majority class and F1 (macro F1 for 3+ classes) is the primary.
BALANCED_SHARE = 0.35

Labels = list[float | str]  # all numbers, or all class names (`read_labels`)
# The rule of this module in one line (`attnmatch datasets info pairs`).
RULE = (
    "labels that are not numbers -> classification (classes: train's sorted labels); every "
    "label 1 -> ranking; 0/1 with a group column holding groups of several candidates -> "
    "ranking; other 0/1 -> classification; integers of 3+ levels or real numbers -> regression "
    "(a few labels outside an otherwise 0/1 train are an error naming their lines)"
)


def label_name(value: float | str) -> str:
    """A label as a class name: 1.0 -> "1", 0.5 -> "0.5", text unchanged."""
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def read_label(raw: object, where: str) -> float | str:
    """One label: a number (or text that is one, "1.0") as a float, other text as a class name.

    Args:
        raw: a number or a string (surrounding spaces are dropped).
        where: the label's place for messages, e.g. "train.tsv:12" or "train: row 3".

    Raises:
        ValueError: empty text, NaN or infinity, a bool, or another type.
    """
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise ValueError(f"{where}: the label is empty")
        try:
            number = float(text)
        except ValueError:
            return text
        raw = number
    if isinstance(raw, numbers.Real) and not isinstance(raw, bool):
        number = float(raw)
        if math.isnan(number):
            raise ValueError(f"{where}: the label is NaN")
        if math.isinf(number):
            raise ValueError(f"{where}: the label is infinite")
        return number
    if hasattr(raw, "item") and not isinstance(raw, bool):  # a numpy scalar (np.bool_ too)
        item = raw.item()
        if not isinstance(item, bool):
            return read_label(item, where)
    raise ValueError(f"{where}: the label must be a number, got {raw!r}")


def read_labels(raws: Sequence[object], where: Sequence[str]) -> Labels:
    """Every label read by `read_label`: all numbers, or all class names.

    Args:
        raws: the labels in order.
        where: each label's place for messages.

    Raises:
        ValueError: a label that cannot be read, or numbers mixed with class names (the message
            names the first label of the other kind).
    """
    values = [read_label(raw, at) for raw, at in zip(raws, where, strict=True)]
    if not values:
        return []
    numeric = not isinstance(values[0], str)
    for value, raw, at in zip(values, raws, where, strict=True):
        if isinstance(value, str) == numeric:
            if numeric:
                raise ValueError(f"{at}: the label must be a number, got {raw!r}")
            raise ValueError(
                f"{at}: the label {raw!r} is a number but those before it are class names "
                f"(such as {values[0]!r}); use one kind"
            )
    return values


@dataclass(frozen=True, kw_only=True)
class LabelScheme:
    """What the labels of a folder (or of `fit`'s pairs) mean: its task and its classes
    or score range, all taken from train.

    Args:
        task: "ranking", "classification" or "regression": the kind the labels were read as
            (`protocol` is the task object every other part of the code receives).
        reason: the sentence that says why, e.g. "task: ranking (labels 0/1, ...)".
        class_names: classification: the classes, in index order.
        min_score, max_score: regression: the score range, which every label must respect
            (given as options, or train's lowest and highest label).
        given_min, given_max: regression: the bounds given as options (None: from train).
        grades: ranking: train's distinct relevance labels. Every label must be >= 0; when
            train's are 0/1 (binary relevance) every label must be 0 or 1, otherwise at most
            train's highest grade.
        primary: the primary metric.
        description: one sentence for results tables (the protocol's description).
    """

    task: str
    reason: str
    class_names: tuple[str, ...] = ()
    min_score: float = 0
    max_score: float = 1
    given_min: float | None = None
    given_max: float | None = None
    grades: tuple[float, ...] = ()
    primary: str = ""
    description: str = ""

    def label(self, value: float | str, where: str) -> float:
        """`value` (from `read_labels`) as an `Example` label: a class index, or the number.

        Raises:
            ValueError: an unknown class, a class name where the task needs a number, a score
                outside the range, or a relevance label that train's grades do not allow.
        """
        if self.task == "classification":
            name = label_name(value)
            if name not in self.class_names:
                known = ", ".join(self.class_names)
                raise ValueError(f"{where}: label {name!r} is not a class of train ({known})")
            return self.class_names.index(name)
        if isinstance(value, str):
            raise ValueError(f"{where}: a {self.task} label must be a number, got {value!r}")
        if self.task == "ranking":
            self._check_grade(value, where)
        elif not self.min_score <= value <= self.max_score:
            raise ValueError(
                f"{where}: score {label_name(value)} outside {self.min_score}..{self.max_score} "
                "(the options min_score and max_score; by default train's lowest and highest "
                "label)"
            )
        return value

    def _check_grade(self, value: float, where: str) -> None:
        name = label_name(value)
        if value < 0:
            raise ValueError(
                f"{where}: relevance label {name} is negative; a ranking label is 0 (not "
                "relevant) or more (relevant)"
            )
        if not self.grades:
            return
        if set(self.grades) <= {0.0, 1.0}:
            if value not in (0.0, 1.0):
                raise ValueError(
                    f"{where}: relevance label {name} where train's labels are binary (0/1); "
                    "use 0 or 1, or graded labels in train too"
                )
        elif value > self.grades[-1]:
            raise ValueError(
                f"{where}: relevance label {name} above train's highest grade "
                f"{label_name(self.grades[-1])}"
            )

    def protocol(self) -> Task:
        """The evaluation protocol of every split of these pairs (a task)."""
        if self.task == "classification":
            return ClassificationTask(
                name="pairs-classification",
                class_names=self.class_names,
                metrics=MULTICLASS_METRICS if len(self.class_names) > 2 else ("accuracy", "f1"),
                primary=self.primary,
                description=self.description,
            )
        if self.task == "regression":
            return RegressionTask(
                name="pairs-regression",
                min_score=self.min_score,
                max_score=self.max_score,
                description=self.description,
            )
        return RankingTask(name="pairs-ranking", description=self.description)


def _several(groups: Sequence[str | None] | None) -> int:
    """How many groups hold 2+ pairs (0 without a group column)."""
    if groups is None:
        return 0
    return sum(1 for n in Counter(groups).values() if n > 1)


BINARY_SHARE = 0.95  # train this much 0/1 or more: the other labels are strays


def check_strays(labels: Labels, where: Sequence[str]) -> None:
    """Refuses a few numeric labels outside the 0/1 scheme of all the others (module docstring).

    Raises:
        ValueError: naming every stray label's place, and the way out (an explicit task).
    """
    if not labels or isinstance(labels[0], str):
        return
    values = [float(v) for v in labels]
    outside = [i for i, v in enumerate(values) if v not in (0.0, 1.0)]
    binary = len(values) - len(outside)
    if not outside or binary < BINARY_SHARE * len(values):
        return
    shown = ", ".join(f"{where[i]} ({label_name(labels[i])})" for i in outside)
    raise ValueError(
        f"{where[outside[0]]}: label {label_name(labels[outside[0]])} is outside the 0/1 labels "
        f"of the other {binary} pairs; {len(outside)} such label(s): {shown}. Fix them, or give "
        "the task (--task, or the option task=) to read every label as it is"
    )


def infer_task(labels: Labels, groups: Sequence[str | None] | None) -> tuple[str, str]:
    """The task the rule of this module gives training labels, and the reason as a sentence.

    Args:
        labels: train's labels, from `read_labels`.
        groups: each pair's group, from a `group` column; None: no such column (recurring
            left texts are not groups).

    Raises:
        ValueError: no labels, or a single value that is not 1 (nothing to learn).
    """
    change = "set task= to change"
    if not labels:
        raise ValueError("no labels to infer a task from")
    if isinstance(labels[0], str):
        distinct = sorted({str(v) for v in labels})
        shown = ", ".join(distinct[:10]) + (", ..." if len(distinct) > 10 else "")
        return "classification", (
            f"task: classification (labels are not numbers: {len(distinct)} classes {shown}; "
            f"{change})"
        )
    values = [float(v) for v in labels]
    levels = sorted(set(values))
    integers = all(v.is_integer() for v in levels)
    if levels == [1.0]:
        return "ranking", f"task: ranking (every label is 1: positive pairs only; {change})"
    if len(levels) == 1:
        raise ValueError(
            f"every label is {label_name(levels[0])}: nothing to learn; give task= explicitly "
            "or check the label column"
        )
    if levels == [0.0, 1.0]:
        several = _several(groups)
        if several:
            return "ranking", (
                f"task: ranking (labels 0/1, {several} quer{'ies' if several > 1 else 'y'} with "
                f"several candidates; {change})"
            )
        why_not = "no group column" if groups is None else "no group with several candidates"
        return "classification", (f"task: classification (labels 0/1, {why_not}; {change})")
    if integers and len(levels) == 2:
        names = "/".join(label_name(v) for v in levels)
        return "classification", f"task: classification (labels {names}; {change})"
    low, high = label_name(levels[0]), label_name(levels[-1])
    if integers:
        return "regression", (
            f"task: regression (integer labels {low}..{high}, {len(levels)} levels; {change})"
        )
    return "regression", f"task: regression (real-valued labels {low}..{high}; {change})"


def choose_task(
    labels: Labels,
    groups: Sequence[str | None] | None,
    *,
    task: str = "auto",
    min_score: float | None = None,
    max_score: float | None = None,
    source: str = "train",
    where: Sequence[str] | None = None,
) -> LabelScheme:
    """The `LabelScheme` of training labels: `task` ("auto": `infer_task`), classes, score range
    and primary metric.

    Args:
        labels: train's labels, from `read_labels`.
        groups: each pair's group (a `group` column); None: no such column.
        task: "auto", "ranking", "classification" or "regression".
        min_score, max_score: regression: the score range; None: train's (the lowest and highest
            label).
        source: what `labels` are, for messages ("train.tsv").
        where: each label's place for messages ("train.tsv:7"; default "SOURCE: row I").

    Raises:
        ValueError: an unknown task, labels the task cannot read, or an empty range.
    """
    if task not in TASK_CHOICES:
        raise ValueError(f"task must be one of {', '.join(TASK_CHOICES)}, got {task!r}")
    if not labels:
        raise ValueError(f"{source}: no labels")
    if task == "auto":
        check_strays(labels, where or [f"{source}: row {i}" for i in range(len(labels))])
        try:
            task, reason = infer_task(labels, groups)
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None
    else:
        reason = f"task: {task} (given by task=)"
    if isinstance(labels[0], str) and task != "classification":
        raise ValueError(
            f"{source}: a {task} task needs numeric labels, got class names such as "
            f"{labels[0]!r} (task=classification reads them)"
        )
    if task == "classification":
        return _classification(labels, reason, source)
    if task == "regression":
        return _regression([float(v) for v in labels], reason, min_score, max_score, source)
    grades = tuple(sorted({float(v) for v in labels}))
    if grades[-1] <= 0:
        raise ValueError(
            f"{source}: no label is above 0: a ranking task needs relevant pairs (label > 0)"
        )
    return LabelScheme(
        task="ranking",
        reason=reason,
        grades=grades,
        primary="map",
        description="your pairs, ranked per query (queries with a relevant candidate)",
    )


def _classification(labels: Labels, reason: str, source: str) -> LabelScheme:
    counts = Counter(label_name(v) for v in labels)
    if isinstance(labels[0], str):
        names = tuple(sorted(counts))
    else:
        names = tuple(label_name(v) for v in sorted({float(v) for v in labels}))
    if len(names) < 2:
        raise ValueError(f"{source}: classification needs 2+ classes, every label is {names[0]!r}")
    share = min(counts.values()) / len(labels)
    if share >= BALANCED_SHARE:
        primary = "accuracy"
        why = f"smallest class {share:.0%} of train >= {BALANCED_SHARE:.0%}: primary accuracy"
    elif len(names) == 2:
        primary = "f1"
        why = (
            f"smallest class {share:.0%} of train < {BALANCED_SHARE:.0%}: primary F1 of class "
            f"{names[1]!r}"
        )
    else:
        primary = "macro_f1"
        why = f"smallest class {share:.0%} of train < {BALANCED_SHARE:.0%}: primary macro F1"
    description = f"your pairs: {len(names)} classes ({', '.join(names)}); {why}"
    return LabelScheme(
        task="classification",
        reason=reason,
        class_names=names,
        primary=primary,
        description=description,
    )


def _regression(
    values: list[float],
    reason: str,
    min_score: float | None,
    max_score: float | None,
    source: str,
) -> LabelScheme:
    low = integral(min(values) if min_score is None else min_score)
    high = integral(max(values) if max_score is None else max_score)
    if not low < high:
        raise ValueError(
            f"{source}: the score range {low}..{high} is empty; set min_score < max_score"
        )
    inferred = [
        name for name, v in (("min_score", min_score), ("max_score", max_score)) if v is None
    ]
    origin = f"; {' and '.join(inferred)} from train" if inferred else ""
    return LabelScheme(
        task="regression",
        reason=reason,
        min_score=low,
        max_score=high,
        given_min=None if min_score is None else low,
        given_max=None if max_score is None else high,
        primary="pearson",
        description=f"your pairs: scores in {low}..{high}{origin}",
    )
