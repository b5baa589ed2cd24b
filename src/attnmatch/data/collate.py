"""Dynamic padding, boolean masks and length bucketing (the batching in numpy: `pad_arrays`,
`bucketed_batches`, `token_budget_batches` need no torch; `pad_ids` and `collate` give
tensors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import PairBatch
from attnmatch.data.vocab import PAD_ID

if TYPE_CHECKING:  # pragma: no cover
    import torch


def pad_ids(seqs: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """`pad_arrays` as tensors: ids (B, T) or (B, T, K) long, mask (B, T) bool."""
    import torch

    ids, mask = pad_arrays(seqs)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def pad_arrays(seqs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Right-pads id arrays to the longest one (at least 1 column), in numpy.

    Arrays are (n,) token ids, or (n, K) ids per token (letter trigrams), padded in both
    dimensions (K to the most of the batch, at least 1).

    Returns:
        ids (B, T) or (B, T, K) long with PAD_ID on padding, mask (B, T) bool, True on real
        tokens.
    """
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    width = max(int(lengths.max(initial=0)), 1)
    inner = seqs[0].shape[1:] if len(seqs) else ()
    if inner:  # per-token id lists: pad their depth too
        inner = (max(max((int(s.shape[1]) for s in seqs), default=1), 1),)
    ids = np.full((len(seqs), width, *inner), PAD_ID, dtype=np.int64)
    for row, seq in enumerate(seqs):
        if inner:
            ids[row, : seq.shape[0], : seq.shape[1]] = seq
        else:
            ids[row, : len(seq)] = seq
    mask = np.arange(width)[None, :] < lengths[:, None]  # (B, T)
    return ids, mask


def collate(
    data: EncodedPairs, indices: np.ndarray, *, group_index: np.ndarray | None = None
) -> PairBatch:
    """Builds a PairBatch of the pairs `indices` of `data`.

    Args:
        group_index: (B,) group of each pair within the batch; by default the pairs' dataset
            groups renumbered 0..G-1 in order of appearance.
    """
    import torch

    indices = np.asarray(indices, dtype=np.int64)
    left_ids, left_mask = pad_ids([data.texts[t] for t in data.left[indices]])
    right_ids, right_mask = pad_ids([data.texts[t] for t in data.right[indices]])
    if group_index is None:
        _, group_index = np.unique(data.group_ids[indices], return_inverse=True)
    return PairBatch(
        left_ids=left_ids,
        left_mask=left_mask,
        right_ids=right_ids,
        right_mask=right_mask,
        labels=torch.from_numpy(data.labels[indices].copy()),
        group_index=torch.from_numpy(np.asarray(group_index, dtype=np.int64)),
        teacher=None if data.teacher is None else torch.from_numpy(data.teacher[indices].copy()),
    )


def pair_lengths(data: EncodedPairs, indices: np.ndarray | None = None) -> np.ndarray:
    """(N,) padded cost proxy of each pair: max(left length, right length)."""
    lengths = data.text_lengths
    idx = np.arange(len(data)) if indices is None else indices
    return np.maximum(lengths[data.left[idx]], lengths[data.right[idx]])


def token_budget_batches(lengths: np.ndarray, max_items: int, max_tokens: int) -> list[np.ndarray]:
    """Batches of indices into `lengths` taken in order of length (stable), each with at most
    `max_items` texts and at most `max_tokens` tokens once padded to its longest (a text
    longer than the budget goes alone): short texts share large batches, long ones small,
    so that no batch pads many short texts to a long one's length."""
    order = np.argsort(lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    for end in range(1, len(order) + 1):
        full = end - start == max_items or end == len(order)
        longer = not full and (end - start + 1) * max(int(lengths[order[end]]), 1) > max_tokens
        if full or longer:
            batches.append(order[start:end])
            start = end
    return batches


def bucketed_batches(
    data: EncodedPairs, batch_size: int, *, indices: np.ndarray | None = None
) -> list[np.ndarray]:
    """Inference batches of pairs with similar lengths (less padding); order is deterministic."""
    idx = np.arange(len(data)) if indices is None else np.asarray(indices)
    lengths = data.text_lengths
    order = np.lexsort((lengths[data.left[idx]], lengths[data.right[idx]]))
    idx = idx[order]
    return [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]
