"""`ClassificationTask`: one logit per class, over every pair."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, cast

import numpy as np
from numpy.typing import ArrayLike

from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import Example
from attnmatch.tasks.base import Predictions, Task, have_labels
from attnmatch.tasks.ranking import RankingTask, log_softmax, softmax
from attnmatch.zero_shot import ScoreHead, fit_threshold

CLASSIFICATION_METRICS = ("accuracy", "f1")
MULTICLASS_METRICS = ("accuracy", "macro_f1")


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

    LOSSES: ClassVar[tuple[str, ...]] = ("cross_entropy",)
    has_labels: ClassVar[bool] = True

    def __post_init__(self) -> None:
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

    def to_dict(self) -> dict[str, Any]:
        saved: dict[str, Any] = {"class_names": list(self.class_names)}
        return super().to_dict() | saved | ({"threshold": self.threshold} if self.threshold else {})

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

    def shifted(self, outputs: np.ndarray) -> np.ndarray:
        """The logits the decision reads: the last class's lowered by `threshold`; (N, C)."""
        if not self.threshold:
            return outputs
        out = np.array(outputs, dtype=np.float32)  # (N, C)
        out[:, -1] -= self.threshold
        return out

    def num_outputs(self, loss: str) -> int:
        return len(self.class_names)

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

    def decode(self, outputs: np.ndarray) -> Predictions:
        """Scores log P(last class) (e.g. "duplicate", "entailment"), labels, probabilities
        and, as relevance, P(last class): all of the logits shifted by the threshold."""
        logits = np.asarray(self.shifted(outputs), dtype=np.float32)  # (N, C)
        probabilities = softmax(logits)  # (N, C)
        return Predictions(
            scores=log_softmax(logits)[:, -1],  # (N,)
            relevance=probabilities[:, -1].astype(np.float64),  # P(last class)
            labels=[self.class_names[int(i)] for i in logits.argmax(axis=-1)],
            probabilities=probabilities,
            class_names=self.class_names,
        )

    @property
    def relevance_scale(self) -> str:
        return "probability"

    def measure(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        from attnmatch.metrics import classification_metrics  # on first evaluation

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
        if not have_labels(similarities, labels):
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
