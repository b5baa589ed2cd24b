"""Tasks: what a model's outputs mean, and which losses and evaluations fit them.

- ranking: one relevance score per pair (or a match / no-match head, scored by log P(match));
  losses rank_hinge (default), listwise, cross_entropy (pointwise).
- classification: one logit per class (`class_names`); loss cross_entropy.
- regression: a similarity score in [min_score, max_score] (STS 0-5, SICK 1-5), predicted as a
  distribution over the integer levels (loss kl, the default, Tai et al. 2015) or as one value
  (loss mse, the default when a bound is not an integer, e.g. 0.5..2.5).

A `Task` is saved with the model (config.json "task") and decides how outputs become scores
(`Task.scores`), class names (`Task.labels`), and on which splits a model may be evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F

from attnmatch.data.protocol import (
    ClassificationProtocol,
    Protocol,
    RegressionProtocol,
    integral,
)

TaskKind = Literal["ranking", "classification", "regression"]
# The losses each task accepts; the first is the default ("auto").
TASK_LOSSES: dict[str, tuple[str, ...]] = {
    "ranking": ("rank_hinge", "listwise", "cross_entropy"),
    "classification": ("cross_entropy",),
    "regression": ("kl", "mse"),
}


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


@dataclass(frozen=True, kw_only=True)
class Task:
    """What a model's outputs mean.

    Args:
        kind: "ranking", "classification" or "regression".
        class_names: classification: the name of each class index.
        min_score, max_score: regression: the gold score range, real numbers kept as ints when
            integral (only integer bounds allow the KL head: one output per integer level).
    """

    kind: TaskKind
    class_names: tuple[str, ...] = ()
    min_score: float = 0
    max_score: float = 1

    def __post_init__(self) -> None:
        if self.kind not in TASK_LOSSES:
            raise ValueError(f"unknown task {self.kind!r}; choose one of {', '.join(TASK_LOSSES)}")
        # 5.0 is stored as 5: equal tasks compare equal and save alike (config.json "max_score": 5).
        object.__setattr__(self, "min_score", integral(self.min_score))
        object.__setattr__(self, "max_score", integral(self.max_score))
        if self.kind == "classification" and len(self.class_names) < 2:
            raise ValueError("a classification task needs at least 2 class names")
        for name in self.class_names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"class names are non-empty strings, got {name!r}")
        twice = sorted({n for n in self.class_names if self.class_names.count(n) > 1})
        if twice:
            raise ValueError(f"class name(s) {twice} given twice; each class needs its own name")
        if self.kind == "regression" and not self.min_score < self.max_score:
            raise ValueError(f"min_score ({self.min_score}) must be < max_score ({self.max_score})")

    @classmethod
    def of(cls, protocol: Protocol) -> Task:
        """The task a split's evaluation protocol implies."""
        if isinstance(protocol, ClassificationProtocol):
            names = protocol.class_names or tuple(str(i) for i in range(protocol.num_classes))
            return cls(kind="classification", class_names=tuple(names))
        if isinstance(protocol, RegressionProtocol):
            return cls(
                kind="regression", min_score=protocol.min_score, max_score=protocol.max_score
            )
        return cls(kind="ranking")

    @property
    def integer_bounds(self) -> bool:
        """Regression: whether both score bounds are integers (what a KL head needs)."""
        return isinstance(self.min_score, int) and isinstance(self.max_score, int)

    @property
    def num_levels(self) -> int:
        """Regression: the integer score levels (the output size of a KL head)."""
        if not self.integer_bounds:
            raise ValueError(
                f"the score range {self.min_score}..{self.max_score} has no integer levels"
            )
        return int(self.max_score - self.min_score) + 1

    def default_loss(self) -> str:
        """The loss "auto" stands for: rank_hinge, cross_entropy, or kl (mse when a regression
        bound is not an integer)."""
        if self.kind == "regression" and not self.integer_bounds:
            return "mse"
        return TASK_LOSSES[self.kind][0]

    def resolve_loss(self, loss: str) -> str:
        """`loss` ("auto" resolved); ValueError when it cannot train this task."""
        resolved = self.default_loss() if loss == "auto" else loss
        if resolved not in TASK_LOSSES[self.kind]:
            raise ValueError(
                f"loss {resolved!r} cannot train a {self.kind} task; use one of "
                f"{', '.join(TASK_LOSSES[self.kind])}"
            )
        if resolved == "kl" and not self.integer_bounds:
            raise ValueError(
                f"loss 'kl' needs integer score bounds (one output per integer level), but the "
                f"range is {self.min_score}..{self.max_score}; use loss mse, or set integer "
                "min_score and max_score"
            )
        return resolved

    def num_outputs(self, loss: str) -> int:
        """The head size the task trained with `loss` needs."""
        if self.kind == "classification":
            return len(self.class_names)
        if self.kind == "regression":
            return self.num_levels if loss == "kl" else 1
        return 2 if loss == "cross_entropy" else 1  # pointwise ranking: match / no match

    def scores(self, outputs: torch.Tensor) -> torch.Tensor:
        """One score per pair, higher = better match: a ranking score, log P(last class) (e.g.
        "duplicate", "entailment"), or the predicted similarity on the task's scale.

        Shape: (B, num_outputs) -> (B,)
        """
        if self.kind == "regression":
            return regression_predictions(outputs, self.min_score)
        return ranking_scores(outputs)

    def labels(self, outputs: torch.Tensor) -> list[str]:
        """Classification: the predicted class name of each pair."""
        if self.kind != "classification":
            raise ValueError(f"class labels need a classification model; this one is {self.kind}")
        return [self.class_names[int(i)] for i in outputs.argmax(dim=-1)]

    def check_evaluable(self, split_kind: str, where: str, protocol: Any = None) -> None:
        """ValueError unless a model of this task can be evaluated on a `split_kind` split
        (its own kind; a classification head also ranks, by P(last class)) whose protocol
        has as many classes as the model (a regression model may be evaluated on another
        score range: its predictions stay on its own)."""
        if split_kind != self.kind and not (
            self.kind == "classification" and split_kind == "ranking"
        ):
            raise ValueError(
                f"a {self.kind} model cannot be evaluated on {where}, a {split_kind} split"
            )
        classes = getattr(protocol, "num_classes", None) if split_kind == self.kind else None
        if self.kind == "classification" and classes is not None:
            if classes != len(self.class_names):
                raise ValueError(
                    f"a model of {len(self.class_names)} classes "
                    f"({', '.join(self.class_names)}) cannot be evaluated on {where}, which "
                    f"has {classes}"
                )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == "classification":
            out["class_names"] = list(self.class_names)
        if self.kind == "regression":
            out.update(min_score=self.min_score, max_score=self.max_score)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        if not isinstance(data, dict) or "kind" not in data:
            raise ValueError(f"a task needs an object with a 'kind', got {data!r}")
        unknown = set(data) - {"kind", "class_names", "min_score", "max_score"}
        if unknown:
            raise ValueError(f"unknown task keys {sorted(unknown)}")
        names = data.get("class_names", ())
        if not isinstance(names, list | tuple):  # a string would become one class per letter
            raise ValueError(f"task class_names must be a list of names, got {names!r}")
        return cls(
            kind=data["kind"],
            class_names=tuple(names),
            min_score=data.get("min_score", 0),
            max_score=data.get("max_score", 1),
        )
