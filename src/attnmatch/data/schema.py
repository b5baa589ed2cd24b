"""The two data contracts every module shares: `Example` and `PairBatch`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

Label = int | float


@dataclass(frozen=True, slots=True)
class Example:
    """One text pair.

    Args:
        left: the query / question / first sentence.
        right: the candidate / answer / second sentence.
        label: relevance (0/1) for ranking, class index for classification, score for regression.
        group: query id for ranking datasets (evaluation groups by it); None otherwise.
        id: an optional stable identifier of the pair (e.g. WikiQA's SentenceID).
    """

    left: str
    right: str
    label: Label
    group: str | None = None
    id: str | None = None


@dataclass
class PairBatch:
    """A padded batch of pairs.

    Shape:
        left_ids: (B, L) long, left_mask: (B, L) bool (True on real tokens),
        right_ids: (B, R) long, right_mask: (B, R) bool,
        labels: (B,) float (ranking relevance / regression) or long (classification),
        group_index: (B,) long, the group (query) each pair belongs to within the batch.
        teacher: (B, K) float, a teacher's targets (distillation), or None.
        With letter-trigram inputs the ids carry one more dimension, (B, L, K) and (B, R, K):
        K trigram ids per word, 0 on padding (`attnmatch.inputs.trigrams`).
    """

    left_ids: torch.Tensor
    left_mask: torch.Tensor
    right_ids: torch.Tensor
    right_mask: torch.Tensor
    labels: torch.Tensor
    group_index: torch.Tensor
    teacher: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.left_ids.shape[0])

    def to(self, device: torch.device | str) -> PairBatch:
        moved: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            moved[f.name] = value if value is None else value.to(device)
        return PairBatch(**moved)
