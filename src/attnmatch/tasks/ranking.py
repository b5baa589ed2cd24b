"""`RankingTask`: candidates ordered per query by one relevance score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from attnmatch.calibration import PlattScaling, fit_platt
from attnmatch.data.encoding import EncodedPairs
from attnmatch.tasks.base import Predictions, Task, group_names
from attnmatch.zero_shot import ScoreHead

if TYPE_CHECKING:  # pragma: no cover
    import torch

RANKING_METRICS = ("map", "mrr", "ndcg@3", "ndcg@5", "p@1")
GROUP_LOSSES = ("rank_hinge", "listwise")  # losses over ranking groups (positive + negatives)


def ranking_scores(outputs: torch.Tensor) -> torch.Tensor:
    """One relevance score per pair from model outputs, in torch (the losses' path, with
    gradients; `output_scores` is the numpy one every prediction decodes with).

    (B, 1) -> the score; (B, C>=2) -> log P(match), the log-probability of the last class
    (ranks exactly like P(match)).
    """
    import torch.nn.functional as F

    if outputs.shape[-1] == 1:
        return outputs[:, 0]
    return F.log_softmax(outputs, dim=-1)[:, -1]


def output_scores(outputs: np.ndarray) -> np.ndarray:
    """`ranking_scores` in numpy (float32), what decoding and evaluation read: (N, 1) -> the
    score; (N, C>=2) -> log P(last class). Needs no torch (`attnmatch.runtime`)."""
    outputs = np.asarray(outputs, dtype=np.float32)  # (N, C)
    if outputs.shape[-1] == 1:
        return outputs[:, 0].copy()  # (N,)
    return log_softmax(outputs)[:, -1]  # (N,)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis in float32, as torch computes it (the maximum
    subtracted first): (N, C) -> (N, C)."""
    logits = np.asarray(logits, dtype=np.float32)  # (N, C)
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (N, C)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (N, C)


def softmax(logits: np.ndarray) -> np.ndarray:
    """softmax over the last axis in float32, as torch computes it: (N, C) -> (N, C)."""
    logits = np.asarray(logits, dtype=np.float32)  # (N, C)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))  # (N, C)
    return e / e.sum(axis=-1, keepdims=True)  # (N, C)


@dataclass(frozen=True, kw_only=True)
class RankingTask(Task):
    """Ranking: candidates ordered per query by one relevance score (or a match / no-match
    head, scored by log P(match)).

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

    LOSSES: ClassVar[tuple[str, ...]] = ("rank_hinge", "listwise", "cross_entropy")
    similarity_is_output: ClassVar[bool] = True

    def keeps(self, labels: Sequence[float]) -> bool:
        """Whether a group with these candidate labels is evaluated."""
        n_pos = sum(1 for y in labels if y > 0)
        if self.require_positive and n_pos == 0:
            return False
        return not (self.require_negative and n_pos == len(labels))

    def to_dict(self) -> dict[str, Any]:
        saved = {} if self.calibration is None else {"calibration": self.calibration.to_dict()}
        return super().to_dict() | saved

    @classmethod
    def _loaded(cls, data: dict[str, Any]) -> Task:
        saved = data.get("calibration")
        return cls(calibration=None if saved is None else PlattScaling.from_dict(saved))

    def num_outputs(self, loss: str) -> int:
        return 2 if loss == "cross_entropy" else 1  # pointwise ranking: match / no match

    def calibrated_on(
        self, outputs: np.ndarray, labels: np.ndarray, *, metric: str | None = None
    ) -> Task:
        scores = output_scores(outputs)  # (N,)
        return replace(self, calibration=fit_platt(scores, np.asarray(labels) > 0))

    def decode(self, outputs: np.ndarray) -> Predictions:
        """Scores; a probability of relevance only when the model carries a calibration."""
        scores = output_scores(outputs)  # (N,)
        relevance = None if self.calibration is None else self.calibration.probability(scores)
        return Predictions(scores=scores, relevance=relevance)

    @property
    def relevance_scale(self) -> str:
        return "score" if self.calibration is None else "probability"

    def measure(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        # Imported on first evaluation: `attnmatch rank` and `score` start without metrics.
        from attnmatch.metrics import ranking_metrics

        scores = output_scores(outputs)  # (N,)
        return ranking_metrics(
            scores, data.labels, group_names(data), metrics=self.metrics, keep=self.keeps
        )

    def items(
        self, outputs: np.ndarray, data: EncodedPairs, *, model: Task | None = None
    ) -> dict[str, Any]:
        _, rows = self.measure(outputs, data, model=model)
        return {"kind": self.kind, "protocol": self.name, "queries": rows}

    def zero_shot_head(
        self,
        similarities: ArrayLike | None,
        labels: ArrayLike | None,
        *,
        metric: str = "accuracy",
        similarity_range: tuple[float, float] | None = None,
    ) -> ScoreHead:
        return ScoreHead()  # the similarity ranks as it is
