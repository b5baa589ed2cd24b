"""Distinct rows of a batch of token ids, to encode each distinct text once per batch.

In ranking one question is paired with 5-30 candidates, so a batch of pairs repeats its left
texts. An encoder whose output for a row depends on that row alone (token vectors, a gate, a
BiLSTM) can run on the distinct rows only, and its outputs be broadcast back to the pairs:

    rows = distinct_rows(ids, mask)
    states = rows.expand(encoder(rows.select(x), rows.select(mask)))  # (U, T, D) -> (B, T, D)

Two rows are the same text when their masks are equal and their ids are equal on real tokens
(what padding positions hold does not matter). On the CPU each row gets one int64 hash and the
distinct hashes are found with numpy; the grouping is then checked row by row, so a hash
collision costs a slower exact sort, never a wrong answer. One call takes ~0.05 ms for 32 rows
and ~0.2-0.3 ms for 512 rows of 30-60 ids on one thread (`torch.unique(dim=0)`, which sorts
whole rows, took 0.4 and 1.5 ms), against the ~4 and ~50 ms forward passes of MV-LSTM it saves
work in. Other devices use `torch.unique(dim=0)`; the models share encodings on the CPU only
(`distinct_sides`).

Dims: B rows, T padded length, U distinct rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from attnmatch.nn.exporting import exporting

# Sharing is used only where it removes enough rows: index copies cost more than they save when
# nearly every text is distinct (a batch of 32 pairs in `Matcher.predict`'s length order holds
# ~27 distinct questions, and sharing them was 2-10% slower than the plain path; see
# docs/speed.md).
SHARE_AT_MOST = 0.75  # distinct texts / rows
# Below this many pairs a batch runs the plain path without looking for repeats: at 32 pairs
# sharing gained nothing even with a question's candidates together (1.00-1.03x), and the search
# costs ~3% of such a batch.
SHARE_MIN_ROWS = 64

# What `encode_distinct_pairs` broadcasts: one tensor per side, or named tensors.
_Out = TypeVar("_Out", torch.Tensor, dict[str, torch.Tensor])


class DistinctRows(NamedTuple):
    """Indices of a batch's distinct rows.

    Attributes:
        first: (U,) long, the first row of each distinct text, in increasing order.
        inverse: (B,) long, for each row, the position in `first` of its text:
            `first[inverse[b]]` is a row equal to row b.
    """

    first: torch.Tensor
    inverse: torch.Tensor

    @property
    def repeats(self) -> bool:
        """Whether some text occurs more than once (U < B); if not, `first` is 0..B-1."""
        return len(self.first) < len(self.inverse)

    @property
    def worth_sharing(self) -> bool:
        """Whether encoding the distinct texts only saves enough work: U <= SHARE_AT_MOST * B."""
        return len(self.first) <= SHARE_AT_MOST * len(self.inverse)

    def select(self, x: torch.Tensor) -> torch.Tensor:
        """The distinct rows of `x` (B, ...) -> (U, ...); `x` itself when nothing repeats."""
        return x.index_select(0, self.first) if self.repeats else x

    def expand(self, x: torch.Tensor) -> torch.Tensor:
        """Per-text rows `x` (U, ...) back to every row of the batch -> (B, ...). In training
        the gradient of each text is the sum of its rows' (`_ExpandRows`)."""
        if not self.repeats:
            return x
        if x.requires_grad and torch.is_grad_enabled():
            return _ExpandRows.apply(x, self.inverse)  # type: ignore[no-any-return]
        return x.index_select(0, self.inverse)

    @staticmethod
    def every_row(batch: int, device: torch.device) -> DistinctRows:
        """Every row its own text (no sharing): `select` and `expand` return their input."""
        rows = torch.arange(batch, device=device)
        return DistinctRows(rows, rows)


class _ExpandRows(torch.autograd.Function):
    """`x.index_select(0, inverse)` with a backward that sums each text's row gradients from a
    contiguous copy: `index_add_` on a strided gradient (what a bmm's backward hands back) runs
    ~15x slower on the CPU than on a contiguous one.

    Shape:
        x: (U, ...), inverse: (B,) -> (B, ...)
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(inverse)
        ctx.rows = x.shape[0]
        return x.index_select(0, inverse)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (inverse,) = ctx.saved_tensors
        out = grad.new_zeros(ctx.rows, *grad.shape[1:])  # (U, ...)
        return out.index_add_(0, inverse, grad.contiguous()), None


def distinct_rows(ids: torch.Tensor, mask: torch.Tensor) -> DistinctRows:
    """The distinct texts of a padded batch of ids and where each row's text is.

    Args:
        ids: (B, T) integer token ids.
        mask: (B, T) bool, True on real tokens.

    Returns:
        `DistinctRows(first, inverse)`; U = B when no text repeats. B = 0 gives two empty
        index tensors.

    Example:
        >>> ids = torch.tensor([[5, 6, 0], [7, 0, 0], [5, 6, 9]])
        >>> mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 0]]).bool()
        >>> distinct_rows(ids, mask)
        DistinctRows(first=tensor([0, 1]), inverse=tensor([0, 1, 0]))
    """
    if ids.shape != mask.shape or ids.dim() != 2:
        raise ValueError(
            f"ids and mask must be (B, T) of one shape, got {tuple(ids.shape)} and "
            f"{tuple(mask.shape)}"
        )
    batch = ids.shape[0]
    device = ids.device
    if batch == 0:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return DistinctRows(empty, empty)
    if device.type == "cpu":
        first, inverse = _distinct_rows_numpy(ids.numpy(), mask.numpy())
        return DistinctRows(torch.from_numpy(first), torch.from_numpy(inverse))
    return _distinct_rows_torch(ids, mask)


def _distinct_rows_torch(ids: torch.Tensor, mask: torch.Tensor) -> DistinctRows:
    """`distinct_rows` on any device: sort the rows themselves."""
    real_ids = ids.long().masked_fill(~mask, 0)  # (B, T): padding's ids do not count
    key = torch.cat([real_ids, mask.long()], dim=1)  # (B, 2T)
    _, inverse = torch.unique(key, dim=0, return_inverse=True)  # (B,)
    first = _first_rows(inverse)
    # Number the texts by first appearance, so `first` is increasing (a stable, readable order).
    order = torch.argsort(first)  # (U,)
    rank = torch.empty_like(order).scatter_(0, order, torch.arange(len(first), device=ids.device))
    return DistinctRows(first[order], rank[inverse])


def _distinct_rows_numpy(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`distinct_rows` on the CPU: one int64 hash per row, then distinct hashes (5-8x cheaper
    than sorting whole rows). A collision would merge two texts, so the grouping is checked,
    and on a collision (odds ~B^2 / 2^64) the rows themselves are sorted."""
    real_ids = np.where(mask, ids, 0).astype(np.int64)  # (B, T): padding's ids do not count
    real = mask.astype(np.int64)  # (B, T)
    with np.errstate(over="ignore"):  # the hash wraps around
        hashes = real_ids @ _hash_weights(ids.shape[1], 0) + real @ _hash_weights(ids.shape[1], 1)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)  # (U,), (B,)
    same = first[inverse]  # (B,) a row with the same hash
    if not (np.array_equal(real_ids[same], real_ids) and np.array_equal(real[same], real)):
        key = np.concatenate([real_ids, real], axis=1)  # (B, 2T)
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)  # numpy 2 keeps the input's dims for axis=0
    # Number the texts by first appearance, so `first` is increasing (a stable, readable order).
    order = np.argsort(first, kind="stable")  # (U,)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order].astype(np.int64), rank[inverse].astype(np.int64)


def _first_rows(inverse: torch.Tensor) -> torch.Tensor:
    """(U,) the first row of each group, for (B,) group numbers 0..U-1 (every one used)."""
    batch = len(inverse)
    rows = torch.arange(batch, device=inverse.device)  # (B,)
    first = torch.full((int(inverse.max()) + 1,), batch, dtype=torch.long, device=inverse.device)
    return first.scatter_reduce(0, inverse, rows, reduce="amin")  # (U,)


@functools.lru_cache(maxsize=64)
def _hash_weights(width: int, which: int) -> np.ndarray:
    """(width,) random int64 weights of the row hash, from a fixed seed (the same every run)."""
    weights = np.random.default_rng(0x5EED + which).integers(-(2**62), 2**62, width, np.int64)
    weights.flags.writeable = False  # cached: shared by every call
    return weights


def encode_distinct_pairs(
    encode: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple[_Out, _Out]],
    left_ids: torch.Tensor,
    left_mask: torch.Tensor,
    right_ids: torch.Tensor,
    right_mask: torch.Tensor,
) -> tuple[_Out, _Out]:
    """`encode` over each side's distinct texts, its outputs broadcast back to the pairs.

    `encode(left_ids, left_mask, right_ids, right_mask) -> (left_out, right_out)` must compute
    each row's output from that row alone; the two sides may then have different row counts.
    Each side's output is a tensor or a dict of tensors (each broadcast, in the dict's order).

    Shape:
        left_ids, left_mask: (B, L); right_ids, right_mask: (B, R)
        -> encode's outputs with B rows each, e.g. (B, D), (B, D)
    """
    left, right = distinct_sides(left_ids, left_mask, right_ids, right_mask)  # U_l, U_r texts
    left_out, right_out = encode(
        left.select(left_ids),
        left.select(left_mask),
        right.select(right_ids),
        right.select(right_mask),
    )  # (U_l, ...), (U_r, ...)
    return _expand(left, left_out), _expand(right, right_out)


def _expand(rows: DistinctRows, out: _Out) -> _Out:
    """`rows.expand` of a tensor or of each tensor of a dict: (U, ...) -> (B, ...)."""
    if isinstance(out, dict):
        return {key: rows.expand(value) for key, value in out.items()}
    return rows.expand(out)


def distinct_sides(
    left_ids: torch.Tensor,
    left_mask: torch.Tensor,
    right_ids: torch.Tensor,
    right_mask: torch.Tensor,
) -> tuple[DistinctRows, DistinctRows]:
    """The distinct rows of each side of a batch of pairs when sharing pays on one side at
    least (`DistinctRows.worth_sharing`), else every row of each (the plain path). A batch of
    fewer than `SHARE_MIN_ROWS` pairs takes the plain path at once, and so does a batch on any
    other device than the CPU: on a GPU the encoders are bound by their kernel launches, not by
    the rows, so the search and the index copies only add time (MV-LSTM on an H100, batches of
    512: 0.72x the plain path; docs/speed.md, "On a GPU"). Export (`nn.exporting`): every row.

    Shape:
        left_ids, left_mask: (B, L); right_ids, right_mask: (B, R) -> indices over B rows
    """
    if left_ids.device.type == "cpu" and len(left_ids) >= SHARE_MIN_ROWS and not exporting():
        left, right = distinct_rows(left_ids, left_mask), distinct_rows(right_ids, right_mask)
        if left.worth_sharing or right.worth_sharing:
            return left, right
    every = DistinctRows.every_row(len(left_ids), left_ids.device)
    return every, every
