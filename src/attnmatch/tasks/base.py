"""`Task`, what every kind answers, and `Predictions`, what a task decodes outputs into."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Self, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import Example
from attnmatch.zero_shot import ScoreHead

# The keys of a saved task (config.json "task").
SAVED_KEYS = ("kind", "class_names", "min_score", "max_score", "calibration", "threshold")
# Each kind's class by name, in this order (filled by `attnmatch.tasks`).
TASKS: dict[str, type[Task]] = {}

T = TypeVar("T", bound="Task")
V = TypeVar("V")


@dataclass(frozen=True)
class Predictions:
    """A model's predictions for pairs, decoded by its task (`Task.decode`).

    Args:
        scores: (N,) float32, higher = better match (`Matcher.score`): a ranking score,
            log P(last class), or the predicted similarity on the task's scale.
        relevance: (N,) in [0, 1], the task's relevance scale (`attnmatch.tasks`); None for a
            ranking model without calibration.
        labels: classification: the predicted class name of each pair.
        probabilities: classification: (N, C) float32, the softmax of the logits.
        class_names: classification: the class of each column of `probabilities`.
    """

    scores: NDArray[np.float32]
    relevance: NDArray[np.float64] | None = None
    labels: list[str] | None = None
    probabilities: NDArray[np.float32] | None = None
    class_names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.scores)

    def __getitem__(self, rows: slice) -> Predictions:
        """The predictions of pairs `rows` (a slice)."""
        return Predictions(
            scores=self.scores[rows],
            relevance=None if self.relevance is None else self.relevance[rows],
            labels=None if self.labels is None else self.labels[rows],
            probabilities=None if self.probabilities is None else self.probabilities[rows],
            class_names=self.class_names,
        )

    def tei_scores(self, raw_scores: bool) -> NDArray[Any]:
        """TEI's /rerank score: the relevance, or the raw score when `raw_scores` is set or the
        task has no relevance scale. Both are non-decreasing in the score."""
        return self.scores if raw_scores or self.relevance is None else self.relevance

    def class_probabilities(self) -> list[dict[str, float]] | None:
        """Classification: {class name: probability} for each pair; None otherwise."""
        if self.probabilities is None:
            return None
        return [
            dict(zip(self.class_names, row, strict=True)) for row in self.probabilities.tolist()
        ]


@dataclass(frozen=True, kw_only=True)
class Task(ABC):
    """What a model's outputs mean, and a split's evaluation protocol (`attnmatch.tasks`).

    Args:
        kind: "ranking", "classification" or "regression" (each class has its own; `Task(kind=
            ...)` builds that class).
        name: a short id written into results (e.g. "wikiqa-official").
        metrics: metric names reported, lower case.
        primary: the metric used for model selection.
        description: one sentence for results tables.
    """

    kind: str
    name: str = ""
    metrics: tuple[str, ...] = ()
    primary: str = ""
    description: str = ""

    # The losses the task accepts; the first is the default ("auto").
    LOSSES: ClassVar[tuple[str, ...]] = ()
    # Whether predictions carry class labels (`classify`, a label column).
    has_labels: ClassVar[bool] = False
    # Whether a similarity (a cosine, a lexical score) is this task's output as it is; other
    # tasks read it through a head calibrated on labelled pairs (`zero_shot_head`).
    similarity_is_output: ClassVar[bool] = False

    def __new__(cls, **fields: Any) -> Self:
        kind = fields.get("kind")
        if cls is Task:
            if not isinstance(kind, str) or kind not in TASKS:
                raise ValueError(f"unknown task {kind!r}; choose one of {', '.join(TASKS)}")
            return cast(Self, super().__new__(TASKS[kind]))
        own = cls.__dataclass_fields__["kind"].default  # the class's kind
        if kind not in (None, own):
            raise ValueError(f"a {cls.__name__} is of kind {own!r}, not {kind!r}")
        return super().__new__(cls)

    # ------------------------------------------------------------- what a model saves

    @classmethod
    def of(cls, protocol: Task) -> Task:
        """The task a split's evaluation protocol implies: the protocol without its name,
        metrics and groups (what a model trained on the split saves)."""
        return Task.from_dict(protocol.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """config.json's "task": the kind and what the kind needs (JSON-ready)."""
        return {"kind": self.kind}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Task:
        """A saved task (`to_dict`); ValueError on an unknown kind or key."""
        if not isinstance(data, dict) or "kind" not in data:
            raise ValueError(f"a task needs an object with a 'kind', got {data!r}")
        kind = data["kind"]
        if not isinstance(kind, str) or kind not in TASKS:
            raise ValueError(f"unknown task {kind!r}; choose one of {', '.join(TASKS)}")
        unknown = set(data) - set(SAVED_KEYS)
        if unknown:
            raise ValueError(f"unknown task keys {sorted(unknown)}")
        return TASKS[kind]._loaded(data)

    @classmethod
    @abstractmethod
    def _loaded(cls, data: dict[str, Any]) -> Task:
        """The task of a saved dict whose keys are checked."""

    # ------------------------------------------------------------- training

    def resolve_loss(self, loss: str) -> str:
        """`loss`, "auto" standing for the default (the first of `LOSSES`; regression: mse when
        a bound is not an integer); ValueError when it cannot train this task."""
        resolved = self.LOSSES[0] if loss == "auto" else loss
        if resolved not in self.LOSSES:
            raise ValueError(
                f"loss {resolved!r} cannot train a {self.kind} task; use one of "
                f"{', '.join(self.LOSSES)}"
            )
        return resolved

    @abstractmethod
    def num_outputs(self, loss: str) -> int:
        """The head size the task trained with `loss` needs."""

    def calibrated_on(
        self, outputs: np.ndarray, labels: np.ndarray, *, metric: str | None = None
    ) -> Task:
        """This task with what it calibrates on labelled outputs (the dev split's, when a
        model is selected): a ranking task's Platt scaling, a binary classifier's threshold;
        a regression task is unchanged."""
        return self

    # ------------------------------------------------------------- decoding

    @abstractmethod
    def decode(self, outputs: np.ndarray) -> Predictions:
        """Model outputs (N, num_outputs) as `Predictions`: the one decoding path."""

    @property
    @abstractmethod
    def relevance_scale(self) -> str:
        """What `Predictions.relevance` is: "probability", "similarity" or "score" (none: a
        service returns the raw score)."""

    # ------------------------------------------------------------- evaluation

    @abstractmethod
    def measure(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """This protocol's metrics of `outputs` ((N, num_outputs)) on `data`, and one row per
        evaluated query (ranking) or set (grouped regression). `model`: the model's task."""

    @abstractmethod
    def items(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> dict[str, Any]:
        """One record per evaluated item, for paired significance tests (JSON-ready; items in
        the split's order): "kind", "protocol" and the kind's own fields
        (`attnmatch.tasks.item_values` reads them)."""

    def check_evaluable(self, protocol: Task, where: str) -> None:
        """ValueError unless a model of this task can be evaluated on `where` under
        `protocol` (its own kind; a classification head also ranks, by P(last class))."""
        if not same_kind(self, protocol):
            raise ValueError(
                f"a {self.kind} model cannot be evaluated on {where}, a {protocol.kind} split"
            )

    def protocol_for(self, protocol: Task, examples: Sequence[Example], where: str) -> Task:
        """The protocol a model of this task is evaluated under on a split of `protocol`."""
        return protocol

    # ------------------------------------------------------------- labels and zero-shot heads

    def check_label(self, label: float) -> None:
        """ValueError unless the finite number `label` is a label of this task (a
        calibration pair's: a class index, or a score in the range)."""
        return  # ranking: any relevance grade

    def check_num_outputs(self, num_outputs: int) -> None:
        """ValueError unless a model of `num_outputs` outputs is read by this task."""
        return  # ranking: a score (1) or match / no-match logits (2)

    @abstractmethod
    def zero_shot_head(
        self,
        similarities: ArrayLike | None,
        labels: ArrayLike | None,
        *,
        metric: str = "accuracy",
        similarity_range: tuple[float, float] | None = None,
    ) -> ScoreHead:
        """The head that reads one similarity per pair as this task's outputs, calibrated on
        labelled pairs (`attnmatch.zero_shot`).

        Args:
            similarities: (N,) the scorer's similarities of the labelled pairs (None: none).
            labels: (N,) their labels: class indices or scores.
            metric: classification: what the threshold maximises (`fit_threshold`).
            similarity_range: regression without labelled pairs: the (low, high) similarities
                that map onto (min_score, max_score); None when the scorer has no fixed range.
        """


def for_task(table: Mapping[type[Task], V], task: Task | type[Task]) -> V:
    """`table`'s entry for `task`'s class (or the nearest base class with one): how code
    outside `attnmatch.tasks` keeps what differs between the kinds, a table keyed by task
    class in the module that uses it (tests/test_task_branches.py).

    Raises:
        KeyError: the table has no entry for the task's class.
    """
    kind = task if isinstance(task, type) else type(task)
    for cls in kind.__mro__:
        if cls in table:
            return table[cls]
    names = ", ".join(cls.__name__ for cls in table)
    raise KeyError(f"no entry for {kind.__name__} in a table of {names}")


def same_kind(task: Task, other: Task) -> bool:
    """Whether `other` is a task of `task`'s kind."""
    return type(other) is type(task)


def among(task: Task, kinds: Iterable[str]) -> bool:
    """Whether `task`'s kind is one of `kinds` (e.g. a model's supported tasks)."""
    return task.kind in tuple(kinds)


def non_standard(protocol: T, name: str, description: str) -> T:
    """`protocol` (same groups and metrics) for a split outside a corpus's official protocol.

    Args:
        protocol: the official protocol it evaluates like.
        name: its name, without the " (non-standard)" that is appended.
        description: what is non-standard about it, without the "NON-STANDARD: " prefix.

    Example:
        `non_standard(SNLI, "snli-train-on-dev", "90% of dev for training, 10% for selection.")`
        is SNLI's protocol named "snli-train-on-dev (non-standard)".
    """
    return replace(
        protocol, name=f"{name} (non-standard)", description=f"NON-STANDARD: {description}"
    )


def have_labels(similarities: ArrayLike | None, labels: ArrayLike | None) -> bool:
    """Whether there are labelled pairs to fit a zero-shot head on."""
    return similarities is not None and labels is not None and len(np.asarray(labels)) > 0


def group_names(data: EncodedPairs) -> list[str]:
    """The group of each pair of `data`."""
    return [data.group_names[g] for g in data.group_ids]
