"""Tasks: what a model's outputs mean, how they are decoded, evaluated and served.

Three kinds, one frozen class each:

- `RankingTask`: one relevance score per pair (or a match / no-match head, scored by
  log P(match)); losses rank_hinge (default), listwise, cross_entropy (pointwise).
- `ClassificationTask`: one logit per class (`class_names`); loss cross_entropy.
- `RegressionTask`: a similarity score in [min_score, max_score] (STS 0-5, SICK 1-5), predicted
  as a distribution over the integer levels (loss kl, the default, Tai et al. 2015) or as one
  value (loss mse, the default when a bound is not an integer, e.g. 0.5..2.5).

A task is also an evaluation protocol: its name (e.g. "wikiqa-official"), metrics, primary metric
and which groups count. A dataset spec declares one per split; `Task.of(protocol)` is the task
without them, what a model trained on the split predicts and saves (config.json "task": its
kind, class names, score range and, for ranking, its calibration). `Task(kind=...)` builds the
kind's class, as that dict does.

Everything that differs between the kinds is a method here: losses and head sizes, decoding
outputs into `Predictions` (scores, labels, probabilities, the relevance a service returns),
metrics and per-item results, label checks, zero-shot heads, the no-training floors and the
fine-tuning recipes. Code elsewhere asks the task and never compares kinds (a test counts).

Relevance (`Predictions.relevance`, what `/rerank` returns): classification, P(last class) from
the softmax; regression, the prediction mapped linearly onto [0, 1] from the score range (a
similarity, not a probability); ranking, a probability only when the model carries a Platt
calibration fitted on dev (`attnmatch.calibration`), otherwise none: the raw score stands.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Self, TypeVar, cast

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import ArrayLike, NDArray

from attnmatch.calibration import PlattScaling, fit_platt
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import Example
from attnmatch.zero_shot import ScoreHead, fit_line, fit_threshold

RANKING_METRICS = ("map", "mrr", "ndcg@3", "ndcg@5", "p@1")
CLASSIFICATION_METRICS = ("accuracy", "f1")
MULTICLASS_METRICS = ("accuracy", "macro_f1")
REGRESSION_METRICS = ("pearson", "spearman", "mse")
# The losses each task accepts; the first is the default ("auto").
TASK_LOSSES: dict[str, tuple[str, ...]] = {
    "ranking": ("rank_hinge", "listwise", "cross_entropy"),
    "classification": ("cross_entropy",),
    "regression": ("kl", "mse"),
}
GROUP_LOSSES = ("rank_hinge", "listwise")  # losses over ranking groups (positive + negatives)
# The distillation losses each task accepts (`attnmatch.losses.distill_loss`); the first is
# the default ("auto"). Ranking: Margin-MSE over (positive, negative) pairs (Hofstaetter et
# al. 2020) or listwise KL over a group's candidates; regression: squared error to the
# teacher's score; classification: KL to the teacher's class probabilities (Hinton et al. 2015).
DISTILL_LOSSES: dict[str, tuple[str, ...]] = {
    "ranking": ("margin_mse", "listwise_kl"),
    "classification": ("soft_kl",),
    "regression": ("score_mse",),
}
# The student `attnmatch distill` trains when none is named: attention MP-CNN learns a
# similarity score where aMV-LSTM (Q) does not (results/distill.md: STS Benchmark, own pairs).
DISTILL_STUDENTS: dict[str, str] = {
    "ranking": "amvlstm_q",
    "classification": "amvlstm_q",
    "regression": "mpcnn_attention",
}
# The keys of a saved task (config.json "task").
SAVED_KEYS = ("kind", "class_names", "min_score", "max_score", "calibration", "threshold")
# A cosine read by a listwise softmax: 20 x cosine, sentence-transformers' scale.
COSINE_RANKING_SCALE = 20.0


def ranking_scores(outputs: torch.Tensor) -> torch.Tensor:
    """One relevance score per pair from model outputs.

    (B, 1) -> the score; (B, C>=2) -> log P(match), the log-probability of the last class
    (ranks exactly like P(match)).
    """
    if outputs.shape[-1] == 1:
        return outputs[:, 0]
    return F.log_softmax(outputs, dim=-1)[:, -1]


def regression_predictions(outputs: torch.Tensor, min_score: float) -> torch.Tensor:
    """Predicted scores: (B, 1) -> the value; (B, K) -> sum_i softmax_i (min_score + i).

    Shape:
        outputs: (B, 1) or (B, K) -> (B,)
    """
    if outputs.shape[-1] == 1:
        return outputs[:, 0]
    levels = min_score + torch.arange(outputs.shape[-1], device=outputs.device)  # (K,)
    return F.softmax(outputs.float(), dim=-1) @ levels.float()


def integral(value: float) -> float:
    """`value` as an int when it is integral (5.0 -> 5), else unchanged; bools are refused.

    Raises:
        ValueError: `value` is a bool, or not a finite real number.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"a score bound must be a finite number, got {value!r}")
    number = float(value)
    return int(number) if number.is_integer() else number


@dataclass(frozen=True)
class Predictions:
    """A model's predictions for pairs, decoded by its task (`Task.decode`).

    Args:
        scores: (N,) float32, higher = better match (`Matcher.score`): a ranking score,
            log P(last class), or the predicted similarity on the task's scale.
        relevance: (N,) in [0, 1], the task's relevance scale (module docstring); None for a
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
    """What a model's outputs mean, and a split's evaluation protocol (module docstring).

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

    KIND: ClassVar[str] = ""
    # Whether predictions carry class labels (`classify`, a label column).
    has_labels: ClassVar[bool] = False
    # Whether a similarity (a cosine, a lexical score) is this task's output as it is; other
    # tasks read it through a head calibrated on labelled pairs (`zero_shot_head`).
    similarity_is_output: ClassVar[bool] = False

    def __new__(cls, **fields: Any) -> Self:
        if cls is not Task:
            return super().__new__(cls)
        kind = fields.get("kind")
        if kind not in TASKS:
            raise ValueError(f"unknown task {kind!r}; choose one of {', '.join(TASKS)}")
        return cast(Self, super().__new__(TASKS[kind]))

    def __post_init__(self) -> None:
        if self.kind != self.KIND:
            raise ValueError(f"a {type(self).__name__} is of kind {self.KIND!r}, not {self.kind!r}")

    # ------------------------------------------------------------- what a model saves

    @classmethod
    def of(cls, protocol: Task) -> Task:
        """The task a split's evaluation protocol implies: the protocol without its name,
        metrics and groups (what a model trained on the split saves)."""
        return Task.from_dict(protocol.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """config.json's "task": the kind and what the kind needs (JSON-ready)."""
        return {"kind": self.kind, **self._saved()}

    def _saved(self) -> dict[str, Any]:
        return {}

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

    @classmethod
    def v1_fields(cls, label_space: dict[str, Any], num_outputs: Any) -> dict[str, Any]:
        """The saved fields of a first-format model's task: its label space (a dict) read for
        a model of `num_outputs` outputs (config.json "config.num_outputs")."""
        return {}

    def same_kind(self, other: Task) -> bool:
        """Whether `other` is a task of this kind."""
        return type(other) is type(self)

    def among(self, kinds: Iterable[str]) -> bool:
        """Whether this task's kind is one of `kinds` (e.g. a model's supported tasks)."""
        return self.kind in tuple(kinds)

    # ------------------------------------------------------------- training

    def default_loss(self) -> str:
        """The loss "auto" stands for: rank_hinge, cross_entropy, or kl (mse when a regression
        bound is not an integer)."""
        return TASK_LOSSES[self.kind][0]

    def resolve_loss(self, loss: str) -> str:
        """`loss` ("auto" resolved); ValueError when it cannot train this task."""
        resolved = self.default_loss() if loss == "auto" else loss
        if resolved not in TASK_LOSSES[self.kind]:
            raise ValueError(
                f"loss {resolved!r} cannot train a {self.kind} task; use one of "
                f"{', '.join(TASK_LOSSES[self.kind])}"
            )
        return resolved

    @abstractmethod
    def num_outputs(self, loss: str) -> int:
        """The head size the task trained with `loss` needs."""

    def trains_on_groups(self, loss: str) -> bool:
        """Whether `loss` trains on ranking groups (a positive and its negatives)."""
        return False

    def resolve_distill_loss(self, loss: str) -> str:
        """The distillation loss `loss` names ("auto": the task's first); ValueError when it
        cannot distil this task."""
        accepted = DISTILL_LOSSES[self.kind]
        resolved = accepted[0] if loss == "auto" else loss
        if resolved not in accepted:
            raise ValueError(
                f"distillation loss {resolved!r} cannot train a {self.kind} task; use one of "
                f"{', '.join(accepted)}"
            )
        return resolved

    @property
    def distill_student(self) -> str:
        """The student preset distillation trains when none is named (`DISTILL_STUDENTS`)."""
        return DISTILL_STUDENTS[self.kind]

    def teacher_targets(self, outputs: np.ndarray) -> np.ndarray:
        """What a student learns from a teacher's outputs (N, C): (N, 1) scores (ranking:
        the relevance score; regression: the predicted similarity); classification
        overrides it with the (N, C) class probabilities."""
        scores = self.scores(torch.from_numpy(np.ascontiguousarray(outputs)))  # (N,)
        return scores.numpy().astype(np.float32)[:, None]

    def labels_candidates(self) -> bool:
        """Whether the extra pairs a teacher labels are each query against more candidates
        of the split (ranking), rather than pairs formed across groups."""
        return False

    def loss_options(self) -> dict[str, float]:
        """Keyword arguments of `attnmatch.losses.compute_loss` for this task."""
        return {}

    def calibrated_on(
        self, outputs: np.ndarray, labels: np.ndarray, *, metric: str | None = None
    ) -> Task:
        """This task with what it calibrates on labelled outputs (the dev split's, when a
        model is selected): a ranking task's Platt scaling; the others are unchanged."""
        return self

    def fine_tuning_train(self) -> dict[str, Any]:
        """`[train]` settings a pretrained encoder fine-tunes this task with, beyond the
        shared recipe (`attnmatch.models.pretrained.fine_tuning_recipe`)."""
        return {}

    def selection_notes(self) -> tuple[str, ...]:
        """What selecting a model on dev calibrates besides choosing the epoch
        (`calibrated_on`), said when a run starts."""
        return ()

    def cosine_head(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(`[train]` settings, model overrides) that train a bi-encoder's cosine as this
        task's output (`attnmatch.models.pretrained.bi_encoder_recipe`)."""
        return {}, {}

    def cross_attention(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(`[train]` settings, model overrides) of the attention between the two texts in the
        MiniLM cross-encoder's recipe (`attnmatch.models.pretrained.cross_encoder_recipe`):
        the plain joint pass, unless a task measured better (docs/training.md)."""
        return {}, {}

    # ------------------------------------------------------------- decoding

    @abstractmethod
    def scores(self, outputs: torch.Tensor) -> torch.Tensor:
        """One score per pair, higher = better match.

        Shape: (B, num_outputs) -> (B,)
        """

    def labels(self, outputs: torch.Tensor) -> list[str]:
        """Classification: the predicted class name of each pair."""
        raise ValueError(f"class labels need a classification model; this one is {self.kind}")

    def decode(self, outputs: np.ndarray) -> Predictions:
        """Model outputs (N, num_outputs) as `Predictions`: the one decoding path."""
        scores = self.scores(torch.from_numpy(np.ascontiguousarray(outputs))).numpy()  # (N,)
        return Predictions(scores=scores, relevance=self.relevance(scores))

    def relevance(self, scores: np.ndarray) -> NDArray[np.float64] | None:
        """The scores on the task's relevance scale in [0, 1] (module docstring); None where
        the task has none."""
        return None

    @property
    def relevance_scale(self) -> str:
        """What `Predictions.relevance` is: "probability", "similarity" or "score" (none: a
        service returns the raw score)."""
        return "score"

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
        the split's order): "kind", "protocol" and the kind's own fields."""

    @classmethod
    def item_values(cls, items: dict[str, Any], metric: str) -> tuple[list[str], np.ndarray]:
        """(item keys, each item's value of `metric`) of `items`, for metrics that are means
        over items."""
        raise ValueError(f"{metric} on {items['kind']} items is not a mean over items")

    def check_evaluable(self, protocol: Task, where: str) -> None:
        """ValueError unless a model of this task can be evaluated on `where` under
        `protocol` (its own kind; a classification head also ranks, by P(last class))."""
        if not self.same_kind(protocol):
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

    def can_read_similarity(self, have_labels: bool, similarity_range: object) -> bool:
        """Whether `zero_shot_head` succeeds with (or without) labelled pairs."""
        return True

    @abstractmethod
    def floor_outputs(self, n: int, fit_labels: np.ndarray, runs: int) -> list[np.ndarray]:
        """The outputs of the "random" floor on `n` pairs (`attnmatch.floors`): `runs` seeded
        random orderings, or one constant guess from the fitting pairs' labels (none without
        them)."""


def _have_labels(similarities: ArrayLike | None, labels: ArrayLike | None) -> bool:
    return similarities is not None and labels is not None and len(np.asarray(labels)) > 0


def _groups(data: EncodedPairs) -> list[str]:
    return [data.group_names[g] for g in data.group_ids]


@dataclass(frozen=True, kw_only=True)
class RankingTask(Task):
    """Ranking: candidates ordered per query by one relevance score.

    Args:
        require_positive: evaluate only groups with a relevant candidate (WikiQA, TrecQA).
        require_negative: evaluate only groups with a candidate that is not relevant (WikiQA
            "filtered", TrecQA raw-test).
        calibration: the Platt scaling of the score fitted on dev (`attnmatch.calibration`);
            None: the score has no probability scale.
    """

    kind: str = "ranking"
    name: str = "ranking"
    metrics: tuple[str, ...] = RANKING_METRICS
    primary: str = "map"
    require_positive: bool = True
    require_negative: bool = False
    calibration: PlattScaling | None = None

    KIND: ClassVar[str] = "ranking"
    similarity_is_output: ClassVar[bool] = True

    def keeps(self, labels: Sequence[float]) -> bool:
        """Whether a group with these candidate labels is evaluated."""
        n_pos = sum(1 for y in labels if y > 0)
        if self.require_positive and n_pos == 0:
            return False
        return not (self.require_negative and n_pos == len(labels))

    def _saved(self) -> dict[str, Any]:
        return {} if self.calibration is None else {"calibration": self.calibration.to_dict()}

    @classmethod
    def _loaded(cls, data: dict[str, Any]) -> Task:
        saved = data.get("calibration")
        return cls(calibration=None if saved is None else PlattScaling.from_dict(saved))

    def num_outputs(self, loss: str) -> int:
        return 2 if loss == "cross_entropy" else 1  # pointwise ranking: match / no match

    def trains_on_groups(self, loss: str) -> bool:
        return loss in GROUP_LOSSES

    def labels_candidates(self) -> bool:
        return True

    def calibrated_on(
        self, outputs: np.ndarray, labels: np.ndarray, *, metric: str | None = None
    ) -> Task:
        scores = self.scores(torch.from_numpy(np.ascontiguousarray(outputs))).numpy()  # (N,)
        return replace(self, calibration=fit_platt(scores, np.asarray(labels) > 0))

    def selection_notes(self) -> tuple[str, ...]:
        return ("a Platt scaling of its scores into probabilities is fitted on dev",)

    def fine_tuning_train(self) -> dict[str, Any]:
        return {"loss": "listwise"}

    def cosine_head(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return {}, {"scale": COSINE_RANKING_SCALE}

    def scores(self, outputs: torch.Tensor) -> torch.Tensor:
        return ranking_scores(outputs)

    def teacher_targets(self, outputs: np.ndarray) -> np.ndarray:
        """The relevance scores standardised over the N pairs (mean 0, std 1; only centred
        when all are equal): ranking is unchanged, and every teacher speaks on the scale of
        the student's gold loss (`attnmatch.training.distill`'s docstring says why)."""
        scores = super().teacher_targets(outputs)  # (N, 1)
        std = float(scores.std())
        centred = scores - scores.mean()
        return (centred / std if std > 0 else centred).astype(np.float32)

    def relevance(self, scores: np.ndarray) -> NDArray[np.float64] | None:
        return None if self.calibration is None else self.calibration.probability(scores)

    @property
    def relevance_scale(self) -> str:
        return "score" if self.calibration is None else "probability"

    def measure(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        # Imported on first evaluation: `attnmatch rank` and `score` start without metrics.
        from attnmatch.metrics import ranking_metrics

        scores = ranking_scores(torch.from_numpy(outputs)).numpy()
        return ranking_metrics(
            scores, data.labels, _groups(data), metrics=self.metrics, keep=self.keeps
        )

    def items(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> dict[str, Any]:
        _, rows = self.measure(outputs, data, model=model)
        return {"kind": self.kind, "protocol": self.name, "queries": rows}

    @classmethod
    def item_values(cls, items: dict[str, Any], metric: str) -> tuple[list[str], np.ndarray]:
        queries = items["queries"]
        return [str(q["group"]) for q in queries], np.array([q[metric] for q in queries], float)

    def zero_shot_head(
        self,
        similarities: ArrayLike | None,
        labels: ArrayLike | None,
        *,
        metric: str = "accuracy",
        similarity_range: tuple[float, float] | None = None,
    ) -> ScoreHead:
        return ScoreHead()  # the similarity ranks as it is

    def floor_outputs(self, n: int, fit_labels: np.ndarray, runs: int) -> list[np.ndarray]:
        """Seeded random orderings of each query's candidates."""
        return [np.random.default_rng(seed).random((n, 1)) for seed in range(runs)]


@dataclass(frozen=True, kw_only=True)
class ClassificationTask(Task):
    """Classification over every pair; labels are class indices 0 .. C-1.

    Args:
        class_names: the label of each class index, e.g. ("neutral", "entailment", ...).
        num_classes: C, instead of class_names: the classes are then named "0" .. "C-1".
        metrics: "accuracy", "f1" (binary F1 of class 1 when C = 2, macro F1 otherwise) and
            "macro_f1".
        threshold: 2 classes: the last class is predicted when its logit exceeds the first's
            by more than this (0: the argmax); fitted on dev to the primary metric when a
            model is selected (`calibrated_on`). Every decoding and metric reads the logits
            shifted by it, so probabilities agree with the labels.
    """

    kind: str = "classification"
    name: str = "classification"
    metrics: tuple[str, ...] = CLASSIFICATION_METRICS
    primary: str = "accuracy"
    class_names: tuple[str, ...] = ()
    num_classes: int = 0
    threshold: float = 0.0

    KIND: ClassVar[str] = "classification"
    has_labels: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        names, n = tuple(self.class_names), self.num_classes
        if n:
            if n < 2:
                raise ValueError(f"{self.name}: num_classes must be >= 2, got {n}")
            if names and len(names) != n:
                raise ValueError(f"{self.name}: {len(names)} class_names for {n} classes")
            names = names or tuple(str(i) for i in range(n))
        if len(names) < 2:
            raise ValueError("a classification task needs at least 2 class names")
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"class names are non-empty strings, got {name!r}")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"class name(s) {twice} given twice; each class needs its own name")
        object.__setattr__(self, "class_names", names)
        object.__setattr__(self, "num_classes", len(names))
        if not math.isfinite(self.threshold) or (self.threshold and len(names) != 2):
            raise ValueError(f"a threshold is a finite number for 2 classes, got {self.threshold}")

    def _saved(self) -> dict[str, Any]:
        saved: dict[str, Any] = {"class_names": list(self.class_names)}
        return saved | ({"threshold": self.threshold} if self.threshold else {})

    def shifted(self, outputs: np.ndarray) -> np.ndarray:
        """The logits the decision reads: the last class's lowered by `threshold`; (N, C)."""
        if not self.threshold:
            return outputs
        out = np.array(outputs, dtype=np.float32)  # (N, C)
        out[:, -1] -= self.threshold
        return out

    def selection_notes(self) -> tuple[str, ...]:
        if len(self.class_names) != 2:
            return ()
        return (
            "its decision threshold is fitted on dev to maximise that metric (accuracy where "
            "it is not accuracy or F1)",
        )

    def calibrated_on(
        self, outputs: np.ndarray, labels: np.ndarray, *, metric: str | None = None
    ) -> Task:
        """2 classes: the threshold of the logit margin that maximises `metric` (default: the
        primary; accuracy for a metric no threshold serves) on these labelled outputs
        (`zero_shot.fit_threshold`); more classes: unchanged."""
        if len(self.class_names) != 2 or len(outputs) == 0:
            return self
        metric = metric or self.primary
        metric = metric if metric in ("accuracy", "f1", "macro_f1") else "accuracy"
        margins = np.asarray(outputs, dtype=np.float64)[:, -1] - outputs[:, 0]  # (N,)
        if not np.isfinite(margins).all():
            return self
        positive = np.asarray(labels) > 0
        threshold = fit_threshold(margins, positive, metric=metric)

        def value(t: float, name: str) -> float:
            return _threshold_metric(margins, positive, t, name)

        def balance(t: float) -> float:
            return value(t, "accuracy") + value(t, "f1")

        # Moved only when it beats the argmax on the metric without losing more accuracy than
        # it gains F1 (or the reverse): never, e.g., "every pair positive" for a little F1.
        if value(threshold, metric) <= value(0.0, metric) or balance(threshold) < balance(0.0):
            threshold = 0.0
        return replace(self, threshold=float(threshold))

    @classmethod
    def _loaded(cls, data: dict[str, Any]) -> Task:
        if "calibration" in data:
            raise ValueError("a calibration belongs to a ranking task, not a classification one")
        names = data.get("class_names", ())
        if not isinstance(names, list | tuple):  # a string would become one class per letter
            raise ValueError(f"task class_names must be a list of names, got {names!r}")
        threshold = data.get("threshold", 0.0)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise ValueError(f"task threshold must be a number, got {threshold!r}")
        return cls(class_names=tuple(names), threshold=float(threshold))

    @classmethod
    def v1_fields(cls, label_space: dict[str, Any], num_outputs: Any) -> dict[str, Any]:
        """The space's class names, or "0" .. "C-1" for the model's C outputs."""
        names = label_space.get("class_names") or [str(i) for i in range(int(num_outputs))]
        return {"class_names": list(names)}

    def num_outputs(self, loss: str) -> int:
        return len(self.class_names)

    def scores(self, outputs: torch.Tensor) -> torch.Tensor:
        if self.threshold:
            outputs = outputs.clone()
            outputs[:, -1] -= self.threshold
        return ranking_scores(outputs)  # log P(last class), e.g. "duplicate", "entailment"

    def labels(self, outputs: torch.Tensor) -> list[str]:
        if self.threshold:
            outputs = outputs.clone()
            outputs[:, -1] -= self.threshold
        return [self.class_names[int(i)] for i in outputs.argmax(dim=-1)]

    def teacher_targets(self, outputs: np.ndarray) -> np.ndarray:
        logits = torch.from_numpy(np.ascontiguousarray(outputs))  # (N, C)
        return F.softmax(logits.float(), dim=-1).numpy()  # (N, C)

    def decode(self, outputs: np.ndarray) -> Predictions:
        outputs = self.shifted(outputs)
        logits = torch.from_numpy(np.ascontiguousarray(outputs))  # (N, C)
        probabilities = torch.softmax(logits.float(), dim=-1).numpy()  # (N, C)
        plain = replace(self, threshold=0.0)  # the logits are shifted already
        return Predictions(
            scores=plain.scores(logits).numpy(),
            relevance=probabilities[:, -1].astype(np.float64),  # P(last class)
            labels=plain.labels(logits),
            probabilities=probabilities,
            class_names=self.class_names,
        )

    @property
    def relevance_scale(self) -> str:
        return "probability"

    def measure(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        from attnmatch.metrics import classification_metrics  # on first evaluation (above)

        gold = data.labels.astype(np.int64)
        outputs = _decided(outputs, model)
        return classification_metrics(outputs, gold, metrics=self.metrics), []

    def items(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "protocol": self.name,
            "labels": data.labels.astype(np.int64).tolist(),
            "predicted": np.asarray(_decided(outputs, model)).argmax(axis=1).tolist(),
        }

    @classmethod
    def item_values(cls, items: dict[str, Any], metric: str) -> tuple[list[str], np.ndarray]:
        if metric != "accuracy":
            raise ValueError(f"{metric}: only accuracy is a mean over pairs")
        labels = np.asarray(items["labels"])
        correct = (np.asarray(items["predicted"]) == labels).astype(np.float64)
        return [str(i) for i in range(len(labels))], correct

    def check_evaluable(self, protocol: Task, where: str) -> None:
        if isinstance(protocol, RankingTask):
            return  # a classification head also ranks, by P(last class)
        super().check_evaluable(protocol, where)
        classes = cast(ClassificationTask, protocol).num_classes
        if classes != len(self.class_names):
            raise ValueError(
                f"a model of {len(self.class_names)} classes ({', '.join(self.class_names)}) "
                f"cannot be evaluated on {where}, which has {classes}"
            )

    def protocol_for(self, protocol: Task, examples: Sequence[Example], where: str) -> Task:
        """A ranking split's relevance labels read as this classifier's classes (accuracy, F1),
        not by MAP; other splits as they are."""
        if not isinstance(protocol, RankingTask):
            return protocol
        n = len(self.class_names)
        labels = {float(e.label) for e in examples}
        if not labels <= {float(i) for i in range(n)}:
            raise ValueError(
                f"a classification model of {n} classes cannot be evaluated on {where}: its "
                f"labels {sorted(labels)[:5]} are not class indices 0..{n - 1}; rank with a "
                "ranking model, or evaluate on a classification split"
            )
        metrics = ("accuracy", "f1", "macro_f1") if n == 2 else MULTICLASS_METRICS
        return ClassificationTask(
            name=f"{protocol.name} read as classification",
            class_names=self.class_names,
            metrics=metrics,
            primary=metrics[1],
            description=f"{where}'s relevance labels scored as classes of this classifier",
        )

    def check_label(self, label: float) -> None:
        if float(label) not in (0.0, 1.0):
            raise ValueError(
                f"the label must be a class index, 0 ({self.class_names[0]}) or 1 "
                f"({self.class_names[-1]}), got {label!r}"
            )

    def check_num_outputs(self, num_outputs: int) -> None:
        if num_outputs != len(self.class_names):
            raise ValueError(
                f"task.class_names names {len(self.class_names)} classes, but the model has "
                f"{num_outputs} outputs (config.num_outputs)"
            )

    def zero_shot_head(
        self,
        similarities: ArrayLike | None,
        labels: ArrayLike | None,
        *,
        metric: str = "accuracy",
        similarity_range: tuple[float, float] | None = None,
    ) -> ScoreHead:
        """The last class when s > t, t fitted on the labelled pairs; logits [0, k (s - t)]."""
        if len(self.class_names) != 2:
            raise ValueError(
                f"zero-shot classification needs 2 classes; this task has "
                f"{len(self.class_names)} ({', '.join(self.class_names)}): one similarity "
                "cannot separate more"
            )
        if not _have_labels(similarities, labels):
            raise ValueError(
                "zero-shot classification needs labelled pairs (calibration) to fit its threshold"
            )
        s = np.asarray(similarities, dtype=np.float64)
        y = np.asarray(labels)
        if not np.isin(y, (0, 1)).all():
            raise ValueError("classification labels must be the class indices 0 and 1")
        t = fit_threshold(s, y == 1, metric=metric)
        spread = float(s.std())
        k = 1.0 / spread if spread > 0 else 1.0
        return ScoreHead(num_outputs=2, scale=k, shift=-k * t)

    def can_read_similarity(self, have_labels: bool, similarity_range: object) -> bool:
        return have_labels and len(self.class_names) == 2

    def floor_outputs(self, n: int, fit_labels: np.ndarray, runs: int) -> list[np.ndarray]:
        """Always the majority class of the fitting pairs (ties: the lowest class)."""
        if len(fit_labels) == 0:
            return []
        counts = Counter(int(label) for label in fit_labels)
        majority = max(sorted(counts), key=counts.__getitem__)
        outputs = np.zeros((n, len(self.class_names)), dtype=np.float32)
        outputs[:, majority] = 1.0
        return [outputs]


@dataclass(frozen=True, kw_only=True)
class RegressionTask(Task):
    """A real-valued similarity score per pair (STS, SICK relatedness).

    Args:
        min_score, max_score: the gold score range (STS 0-5, SICK 1-5); real numbers, kept as
            ints when integral. Only integer bounds allow the KL objective of Tai et al.
            (2015), a distribution over the integer scores min_score .. max_score.
        metrics: among "pearson", "spearman", "mse".
        by_group: also report Pearson per group (the example's `group`, e.g. SemEval's
            "2015/images") as "pearson/<group>", and as "pearson" the pair-weighted mean of the
            per-group values (the SemEval year score) instead of the pooled Pearson.
    """

    kind: str = "regression"
    name: str = "regression"
    metrics: tuple[str, ...] = REGRESSION_METRICS
    primary: str = "pearson"
    min_score: float = 0
    max_score: float = 1
    by_group: bool = False

    KIND: ClassVar[str] = "regression"

    def __post_init__(self) -> None:
        super().__post_init__()
        # 5.0 is stored as 5: equal tasks compare equal and save alike (config.json "max_score": 5).
        object.__setattr__(self, "min_score", integral(self.min_score))
        object.__setattr__(self, "max_score", integral(self.max_score))
        if not self.min_score < self.max_score:
            raise ValueError(
                f"{self.name}: min_score ({self.min_score}) must be < max_score ({self.max_score})"
            )

    @property
    def integer_bounds(self) -> bool:
        """Whether both score bounds are integers (what a KL head needs)."""
        return isinstance(self.min_score, int) and isinstance(self.max_score, int)

    @property
    def num_levels(self) -> int:
        """The integer score levels (the output size of a KL head)."""
        if not self.integer_bounds:
            raise ValueError(
                f"the score range {self.min_score}..{self.max_score} has no integer levels"
            )
        return int(self.max_score - self.min_score) + 1

    def _saved(self) -> dict[str, Any]:
        return {"min_score": self.min_score, "max_score": self.max_score}

    @classmethod
    def _loaded(cls, data: dict[str, Any]) -> Task:
        if "calibration" in data:
            raise ValueError("a calibration belongs to a ranking task, not a regression one")
        return cls(min_score=data.get("min_score", 0), max_score=data.get("max_score", 1))

    @classmethod
    def v1_fields(cls, label_space: dict[str, Any], num_outputs: Any) -> dict[str, Any]:
        """The space's integer range, 0..5 by default."""
        return {
            "min_score": int(label_space.get("min_score", 0)),
            "max_score": int(label_space.get("max_score", 5)),
        }

    def default_loss(self) -> str:
        return super().default_loss() if self.integer_bounds else "mse"

    def resolve_loss(self, loss: str) -> str:
        resolved = super().resolve_loss(loss)
        if resolved == "kl" and not self.integer_bounds:
            raise ValueError(
                f"loss 'kl' needs integer score bounds (one output per integer level), but the "
                f"range is {self.min_score}..{self.max_score}; use loss mse, or set integer "
                "min_score and max_score"
            )
        return resolved

    def num_outputs(self, loss: str) -> int:
        return self.num_levels if loss == "kl" else 1

    def loss_options(self) -> dict[str, float]:
        return {"min_score": self.min_score}

    def cosine_head(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The cosine mapped onto the score range, trained by squared error."""
        span = float(self.max_score - self.min_score)
        return {"loss": "mse"}, {"scale": span, "shift": float(self.min_score)}

    def cross_attention(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Learned attention between the texts (`CrossEncoderConfig.cross_bias`), starting
        near separate (-4), its biases at 0.02: STS Benchmark dev Pearson .897 over 3 seeds,
        the plain joint pass .841 (two texts alike attend to each other and their states grow
        alike whatever the score)."""
        return {"lr": 0.02}, {"cross_bias": -4.0}

    def scores(self, outputs: torch.Tensor) -> torch.Tensor:
        return regression_predictions(outputs, self.min_score)

    def relevance(self, scores: np.ndarray) -> NDArray[np.float64] | None:
        span = self.max_score - self.min_score
        return np.clip((np.asarray(scores, dtype=np.float64) - self.min_score) / span, 0.0, 1.0)

    @property
    def relevance_scale(self) -> str:
        return "similarity"

    def _predicted(self, outputs: np.ndarray, model: Task | None) -> np.ndarray:
        """A regression model's outputs read on its own range (which may differ from this
        protocol's); any other outputs on this protocol's."""
        own = model if isinstance(model, RegressionTask) else self
        return regression_predictions(torch.from_numpy(outputs), own.min_score).numpy()

    def measure(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        from attnmatch.metrics import regression_metrics  # on first evaluation (above)

        predictions = self._predicted(outputs, model)
        groups = _groups(data) if self.by_group else None
        metrics = regression_metrics(predictions, data.labels, metrics=self.metrics, groups=groups)
        rows: list[dict[str, Any]] = []
        if groups is not None:
            rows = [
                {"group": g, "pairs": n, "pearson": metrics[f"pearson/{g}"]}
                for g, n in Counter(groups).items()
            ]
        return metrics, rows

    def items(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "protocol": self.name,
            "labels": [float(x) for x in data.labels],
            "predictions": [float(x) for x in self._predicted(outputs, model)],
            "groups": _groups(data) if self.by_group else None,
        }

    def check_label(self, label: float) -> None:
        if not self.min_score <= float(label) <= self.max_score:
            raise ValueError(
                f"the label {label!r} is outside the task's score range "
                f"{self.min_score}..{self.max_score}"
            )

    def check_num_outputs(self, num_outputs: int) -> None:
        levels = self.integer_bounds and num_outputs == self.num_levels
        if num_outputs != 1 and not levels:
            raise ValueError(
                f"a regression model over {self.min_score}..{self.max_score} has 1 output or "
                f"one per integer level, not {num_outputs} (config.num_outputs)"
            )

    def zero_shot_head(
        self,
        similarities: ArrayLike | None,
        labels: ArrayLike | None,
        *,
        metric: str = "accuracy",
        similarity_range: tuple[float, float] | None = None,
    ) -> ScoreHead:
        """The least-squares line through the labelled pairs, or the similarity range mapped
        linearly onto the score range."""
        if _have_labels(similarities, labels):
            slope, intercept = fit_line(np.asarray(similarities), np.asarray(labels))
            return ScoreHead(scale=slope, shift=intercept)
        if similarity_range is None:
            raise ValueError(
                "this scorer's similarities have no fixed range: zero-shot regression needs "
                "labelled pairs (calibration) to fit its line"
            )
        low, high = similarity_range
        scale = (self.max_score - self.min_score) / (high - low)
        return ScoreHead(scale=scale, shift=self.min_score - scale * low)

    def can_read_similarity(self, have_labels: bool, similarity_range: object) -> bool:
        return have_labels or similarity_range is not None

    def floor_outputs(self, n: int, fit_labels: np.ndarray, runs: int) -> list[np.ndarray]:
        """Always the mean score of the fitting pairs."""
        if len(fit_labels) == 0:
            return []
        return [np.full((n, 1), np.mean(fit_labels), dtype=np.float32)]


TASKS: dict[str, type[Task]] = {
    "ranking": RankingTask,
    "classification": ClassificationTask,
    "regression": RegressionTask,
}

T = TypeVar("T", bound=Task)


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


def item_values(items: dict[str, Any], metric: str) -> tuple[list[str], np.ndarray]:
    """(item keys, each item's value of `metric`) of a run's per-item results (`Task.items`),
    for metrics that are means over items (`attnmatch.research.claims`).

    Raises:
        ValueError: `metric` is not a mean over the items of their kind.
    """
    kind = TASKS.get(items["kind"])
    if kind is None:
        raise ValueError(f"{metric} on {items['kind']} items is not a mean over items")
    return kind.item_values(items, metric)


def migrate_v1_task(name: str, label_space: dict[str, Any], num_outputs: Any) -> dict[str, Any]:
    """A first-format model's task (a kind name plus a label space) as config.json's "task"
    (`Task.v1_fields`); an unknown name is kept for the loader to refuse."""
    kind = TASKS.get(name)
    return {"kind": name, **({} if kind is None else kind.v1_fields(label_space, num_outputs))}


def _decided(outputs: np.ndarray, model: Task | None) -> np.ndarray:
    """A classifier's outputs as its decision reads them (its threshold applied)."""
    return model.shifted(outputs) if isinstance(model, ClassificationTask) else outputs


def _threshold_metric(
    margins: np.ndarray, positive: np.ndarray, threshold: float, metric: str
) -> float:
    """`metric` of the rule "the last class when margin > threshold" (`fit_threshold`'s)."""
    predicted = margins > threshold
    tp = int((predicted & positive).sum())
    fp, fn = int((predicted & ~positive).sum()), int((~predicted & positive).sum())
    if metric == "accuracy":
        return float((predicted == positive).mean())
    f1 = 2 * tp / max(2 * tp + fp + fn, 1)
    if metric == "f1":
        return f1
    tn = len(positive) - tp - fp - fn
    return (f1 + 2 * tn / max(2 * tn + fn + fp, 1)) / 2
