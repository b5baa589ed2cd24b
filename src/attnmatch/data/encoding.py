"""Token ids computed once per dataset and kept as integer arrays.

Many pairs share a text (a question has ~10 candidate answers), so each distinct text is
encoded once, by the model's inputs (`attnmatch.inputs`); pairs refer to texts by index. Batches
are then built by indexing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from attnmatch.data.schema import Example


@dataclass(frozen=True)
class EncodedPairs:
    """A dataset split as integer arrays.

    Attributes:
        texts: id arrays (int64) of the distinct texts: (n,) token ids, or (n, K) per-token
            ids (letter trigrams).
        left, right: (N,) indices into `texts` for each pair.
        labels: (N,) float32 labels.
        group_ids: (N,) int64 index into `group_names` (pairs without a group get their own).
        group_names: the original group (query) ids, in order of first appearance.
        teacher: (N, K) float32 targets a teacher gave each pair (distillation,
            `attnmatch.training.distillation`), or None; NaN labels then mark pairs without gold.
    """

    texts: list[np.ndarray]
    left: np.ndarray
    right: np.ndarray
    labels: np.ndarray
    group_ids: np.ndarray
    group_names: list[str]
    teacher: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.left.shape[0])

    @property
    def text_lengths(self) -> np.ndarray:
        return np.fromiter((len(t) for t in self.texts), dtype=np.int64, count=len(self.texts))

    def groups(self) -> list[np.ndarray]:
        """Pair indices of each group, in group order."""
        order = np.argsort(self.group_ids, kind="stable")
        bounds = np.flatnonzero(np.diff(self.group_ids[order])) + 1
        return np.split(order, bounds)


def encode_examples(
    examples: Sequence[Example], encode: Callable[[list[str]], list[np.ndarray]]
) -> EncodedPairs:
    """Encodes each distinct text of `examples` once, with `encode` (e.g. `Inputs.encode`,
    which gets every distinct text in one call, in order of first appearance).

    Raises:
        ValueError: if `examples` is empty.
    """
    if not examples:
        raise ValueError("cannot encode an empty list of examples")
    text_index: dict[str, int] = {}

    def index_of(text: str) -> int:
        i = text_index.get(text)
        if i is None:
            i = text_index[text] = len(text_index)
        return i

    n = len(examples)
    left = np.empty(n, dtype=np.int64)
    right = np.empty(n, dtype=np.int64)
    labels = np.empty(n, dtype=np.float32)
    group_ids = np.empty(n, dtype=np.int64)
    group_index: dict[str, int] = {}
    group_names: list[str] = []
    for i, ex in enumerate(examples):
        left[i] = index_of(ex.left)
        right[i] = index_of(ex.right)
        labels[i] = float(ex.label)
        name = ex.group if ex.group is not None else f"#{i}"
        g = group_index.get(name)
        if g is None:
            g = group_index[name] = len(group_names)
            group_names.append(name)
        group_ids[i] = g
    texts = encode(list(text_index))
    if len(texts) != len(text_index):
        raise ValueError(f"encode gave {len(texts)} id arrays for {len(text_index)} texts")
    return EncodedPairs(texts, left, right, labels, group_ids, group_names)
