"""Whole-input inference: windows of pairs and each window's distinct texts.

A whole-input inference path (`attnmatch.models.fast`, the CPU path of `Matcher.predict`)
sorts every pair of `data` by (right length, left length), as `bucketed_batches` does, takes
them in windows of `max(batch_size, INFERENCE_WINDOW)` pairs, encodes each distinct text of a
window once (known by its index in `data.texts`: no hashing, no search) and then matches the
window's pairs `batch_size` at a time from those encodings:

    for pairs in inference_windows(data, batch_size):               # (W,) pair indices
        left = window_texts(data, data.left[pairs])                   # U_l distinct texts
        right = window_texts(data, data.right[pairs])
        states_l = encode(left.ids, left.mask)                        # (U_l, T_l, D)
        for rows in batch_rows(len(pairs), batch_size):               # (b,) positions in pairs
            u, u_mask = left.gather(states_l, rows)                   # (b, L', D), (b, L')
            ...

Dims: N pairs, W pairs in a window, U distinct texts of one side, T padded length.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from typing import NamedTuple

import numpy as np
import torch

from attnmatch.data.collate import pad_ids
from attnmatch.data.encoding import EncodedPairs

# Pairs encoded together: 512 gained 1.3x, 2,048 1.6x and 8,192 1.35x over `forward` per batch
# for MV-LSTM (beyond ~2,048 the window's states no longer stay in cache; docs/speed.md).
INFERENCE_WINDOW = 2048


class WindowTexts(NamedTuple):
    """The distinct texts of one side of a window, shortest first.

    Attributes:
        ids: (U, T) long token ids (or (U, T, K) per-token ids), right-padded.
        mask: (U, T) bool, True on real tokens.
        lengths: (U,) int64 token counts, ascending.
        rows: (W,) int64, for each pair of the window, the row of its text in `ids`.
    """

    ids: torch.Tensor
    mask: torch.Tensor
    lengths: np.ndarray
    rows: np.ndarray

    def gather(
        self, encoded: torch.Tensor, positions: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of `encoded` for the window's pairs at `positions`, cut to their longest
        text (at least 1 step), and the matching mask.

        Shape:
            encoded: (U, T, ...), positions: (b,) -> (b, T', ...), (b, T') bool
        """
        rows = self.rows[positions]  # (b,)
        steps = max(int(self.lengths[rows].max(initial=0)), 1)
        first = int(rows[0]) if len(rows) else 0
        if len(rows) and np.array_equal(rows, np.arange(first, first + len(rows))):
            # Consecutive rows (every text distinct, as answers mostly are): a view, no copy.
            out = encoded[first : first + len(rows), :steps]  # (b, T', ...)
        else:
            out = encoded[:, :steps].index_select(0, torch.from_numpy(rows))  # (b, T', ...)
        lengths = torch.from_numpy(self.lengths[rows])  # (b,)
        mask = torch.arange(steps).unsqueeze(0) < lengths.unsqueeze(1)  # (b, T')
        return out, mask


def inference_windows(
    data: EncodedPairs, batch_size: int, window: int | None = None
) -> Iterator[np.ndarray]:
    """Pair indices of `data` sorted by (right length, left length), in windows of
    `max(batch_size, window)` pairs (default `INFERENCE_WINDOW`): (W,) int64 arrays that cover
    every pair once."""
    lengths = data.text_lengths  # (T_texts,)
    order = np.lexsort((lengths[data.left], lengths[data.right]))  # (N,)
    size = max(batch_size, INFERENCE_WINDOW if window is None else window)
    count = -(-len(order) // size)  # windows of at most `size` pairs, of even sizes
    size = max(batch_size, -(-len(order) // max(count, 1)))
    for first in range(0, len(order), size):
        yield order[first : first + size]


def run_windows(work: Callable[[np.ndarray], None], windows: Iterable[np.ndarray]) -> None:
    """Runs `work` (inference only) on every window of pairs.

    With torch set to T > 1 threads and more than one window, the windows run on T worker
    threads of one intra-op thread each, the last (longest texts) first: a window's matmuls are
    small (50-200 wide), so one OpenMP team splitting each of them gains little, while windows
    side by side keep every core busy (docs/speed.md). The work must write disjoint outputs.
    Otherwise they run in turn on the calling thread. Each window runs the same computation
    either way.
    """
    windows = list(windows)
    threads = torch.get_num_threads()
    if threads <= 1 or len(windows) <= 1:
        for pairs in windows:
            work(pairs)
        return

    def run(pairs: np.ndarray) -> None:
        # torch's setting is the process's: restored once below, after every window (a
        # `devices.torch_threads` block per window would restore it while others still run).
        torch.set_num_threads(1)
        with torch.inference_mode():
            work(pairs)

    futures = [_pool(threads).submit(run, pairs) for pairs in reversed(windows)]
    try:
        wait(futures)
        for future in futures:
            future.result()
    finally:
        torch.set_num_threads(threads)


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    """Worker threads for `run_windows`."""
    return ThreadPoolExecutor(threads, thread_name_prefix="attnmatch-window")


def window_texts(data: EncodedPairs, texts: np.ndarray) -> WindowTexts:
    """The distinct texts among `texts` (indices into `data.texts`), sorted by length (ties in
    order of first use) and padded, with the row of each.

    Shape:
        texts: (W,) -> WindowTexts with U distinct rows
    """
    distinct, first, inverse = np.unique(texts, return_index=True, return_inverse=True)  # (U,)
    lengths = np.fromiter(
        (len(data.texts[t]) for t in distinct), dtype=np.int64, count=len(distinct)
    )
    # By length, then by first use: pairs in length order then use consecutive rows.
    by_length = np.lexsort((first, lengths))  # (U,)
    rank = np.empty_like(by_length)
    rank[by_length] = np.arange(len(by_length))
    ids, mask = pad_ids([data.texts[t] for t in distinct[by_length]])  # (U, T)
    return WindowTexts(ids, mask, lengths[by_length], rank[inverse.reshape(-1)])


def batch_rows(count: int, batch_size: int) -> Iterator[np.ndarray]:
    """Positions 0..count-1 in consecutive slices of `batch_size`: (b,) int64 arrays."""
    for start in range(0, count, batch_size):
        yield np.arange(start, min(start + batch_size, count))
