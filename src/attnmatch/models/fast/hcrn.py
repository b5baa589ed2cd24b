"""HCRN whole-input inference on the CPU (`Matcher.predict`, float32).

The pairs are taken in length-sorted windows of at least `_WINDOW` pairs (with more than one
thread: of `INFERENCE_WINDOW`, run side by side; `attnmatch.models.fast._windows`), and each
distinct text of a window is encoded once: token vectors, projection and BiLSTM states (by exact
length, `bilstm_by_length`; the right texts in length-sorted chunks of `_RIGHT_CHUNK`, each
padded to its longest), intra-attention (eq. 9 is within one text) and its side's factor of the
affinity (`affinity_factor`: the complexified states, times the kernel K on the left). The left
texts' factors are computed for the window at once; the pairs then run in the order of their
right texts, at most min(`batch_size`, `_MATCH_CHUNK`) at a time, so that a batch's right texts
are consecutive rows, encoded there (in pieces [x'; h; p(x)], never concatenated) and still in
cache when matched. Per pair only the affinity (batched matmuls of the factors, padding masked by
adding `_PADDED`), the pooling and the head remain. Alignment pooling sums the softmax weights
over the real tokens before multiplying by the states (sum_i beta_i = (sum_i softmax_j(s_ij)) b).
Deviation: a `batch_size` above `_MATCH_CHUNK` changes nothing (each pair's output is its own).
The outputs equal `HCRN.forward`'s on the same pairs up to float rounding
(tests/models/test_hcrn_inference.py).

Dims: N pairs, W pairs in a window, U distinct texts of one side, L / R lengths, d = 2n BiLSTM
state size, D co-attention input size (d, or 2d with intra-attention), F the width of one side's
affinity factor, C outputs.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

import attnmatch.models.fast._windows as _windows
from attnmatch.data.encoding import EncodedPairs
from attnmatch.models.fast._registry import register_inference
from attnmatch.models.fast._windows import (
    WindowTexts,
    batch_rows,
    inference_windows,
    run_windows,
    window_texts,
)
from attnmatch.models.hcrn import HCRN, Affinity
from attnmatch.nn.coattention import extractive_pool
from attnmatch.nn.masking import masked_softmax
from attnmatch.nn.recurrent import bilstm_by_length

# Added to the affinity of a cell per padded token of it, so that a softmax gives the cell
# exactly zero weight next to a real one; twice it stays finite in float32.
_PADDED = -1e30
# Pairs matched at a time, at most (fewer with a smaller batch size): a batch's right-text
# encodings then stay in cache (at 512 pairs they take ~10 MB and the throughput drops by a
# third).
_MATCH_CHUNK = 64
# Pairs encoded together, at least. Larger than the shared default: a left text (with its costly
# product by the kernel K) is encoded once per window, and a question's candidates are spread
# over the length-sorted windows (WikiQA test: 1,673 left texts encoded with windows of 2,048
# pairs, 633 with 8,192).
_WINDOW = 8192
# The window's distinct left texts pass intra-attention and the affinity factor in chunks of
# this many, each cut to its longest text.
_TEXT_CHUNK = 64
# The window's distinct right texts go through the token encoder and the BiLSTM in chunks of
# this many (sorted by length), each padded to its longest text.
_RIGHT_CHUNK = 256


def affinity_factor(
    affinity: Affinity, x: torch.Tensor, side: Literal["left", "right"]
) -> torch.Tensor:
    """One text's factor of the affinity: s(a, b) = factor(a, "left") @ factor(b, "right")^T.
    Left: p(a) (real), [a; p(a)] (hermitian) or [a; p(a)] K; right: p(b) or [b; p(b)].

    Shape:
        x: (..., T, D) -> (..., T, F)
    """
    if affinity.kind == "real":
        return torch.relu(affinity.proj(x))  # (..., T, D)
    c = affinity.complexify(x)  # (..., T, 2D)
    if side == "right" or affinity.kind == "hermitian":
        return c
    if affinity.kind == "complex_diagonal":  # the product by K, elementwise
        p = c[..., affinity.dim :]  # (..., T, D)
        return torch.cat(
            [x * affinity.w_real - p * affinity.w_imag, x * affinity.w_imag + p * affinity.w_real],
            dim=-1,
        )  # (..., T, 2D)
    k = affinity.kernel()
    assert k is not None
    return c @ k  # (..., T, 2D)


@register_inference(HCRN)
def predict_hcrn(model: HCRN, data: EncodedPairs, batch_size: int) -> torch.Tensor:
    """Outputs for every pair of `data`, in its order: (N, num_outputs) float32. Run it in eval
    mode under `torch.inference_mode`."""
    outputs = torch.empty(len(data), model.config.num_outputs)  # (N, num_outputs)
    # One thread: windows of `_WINDOW`; more: windows of the shared default, which run side by
    # side (`run_windows`; 2 threads: ~1.1x over one window of 8,192 on WikiQA test).
    size = _WINDOW if torch.get_num_threads() <= 1 else min(_WINDOW, _windows.INFERENCE_WINDOW)
    run_windows(
        lambda pairs: _predict_window(model, data, pairs, batch_size, outputs),
        inference_windows(data, batch_size, size),
    )
    return outputs


def _predict_window(
    model: HCRN, data: EncodedPairs, pairs: np.ndarray, batch_size: int, outputs: torch.Tensor
) -> None:
    """Scores one window's pairs into their rows of `outputs`.

    Shape:
        pairs: (W,) pair indices, outputs: (N, num_outputs)
    """
    left = window_texts(data, data.left[pairs])  # U_l texts
    right = window_texts(data, data.right[pairs])  # U_r texts
    # The right texts in chunks of `_RIGHT_CHUNK`, each padded to its longest.
    bounds = [*range(0, len(right.lengths), _RIGHT_CHUNK), len(right.lengths)]
    spans = list(zip(bounds[:-1], bounds[1:], strict=True))
    states = bilstm_by_length(
        model.rnn,
        [(_projected(model, left, 0, len(left.lengths)), left.lengths)]
        + [(_projected(model, right, lo, hi), right.lengths[lo:hi]) for lo, hi in spans],
    )  # (U_l, L, d), then (c, R_c, d) per chunk
    left_enc, left_at = _encode_left(model, states[0], left)  # (U_l, L, W_l)
    order = np.lexsort((left.rows, right.rows))  # (W,) by right text, then left
    by_right = right.rows[order]  # (W,) ascending
    for (lo, hi), right_states in zip(spans, states[1:], strict=True):
        start, end = np.searchsorted(by_right, [lo, hi])  # the chunk's pairs
        for rows in batch_rows(int(end - start), min(batch_size, _MATCH_CHUNK)):
            positions = order[start + rows]  # (b,) positions in `pairs`
            a, left_mask = _gather(left, left_enc, positions)  # (b, L', W_l), (b, L')
            texts = right.rows[positions] - lo  # (b,) ascending, in the chunk
            first, last = int(texts[0]), int(texts[-1]) + 1  # the batch's right texts
            steps = max(int(right.lengths[lo + last - 1]), 1)  # R', their longest
            right_mask = right.mask[lo + first : lo + last, :steps]  # (u, R')
            xs, factor = _encode_right(model, right_states[first:last, :steps], right_mask)
            if last - first < len(texts):  # a right text in several pairs
                index = torch.from_numpy(texts - first)  # (b,)
                xs = [x.index_select(0, index) for x in xs]  # (b, R', *)
                factor = [f.index_select(0, index) for f in factor]  # (b, R', *)
                right_mask = right_mask.index_select(0, index)  # (b, R')
            scores = _match(model, a, left_mask, left_at, xs, factor, right_mask)
            outputs[torch.from_numpy(pairs[positions])] = scores  # (b, C)


def _match(
    model: HCRN,
    a: torch.Tensor,
    left_mask: torch.Tensor,
    left_at: int,
    right: list[torch.Tensor],
    factor: list[torch.Tensor],
    right_mask: torch.Tensor,
) -> torch.Tensor:
    """Affinity, pooling and head of a batch of pairs: the left texts as `_encode_texts` gives
    them (states from column `left_at`), the right texts as `_encode_right` does.

    Shape:
        a: (b, L, W_l), left_mask: (b, L), right: pieces (b, R, *) of (b, R, D),
        factor: pieces (b, R, *) of (b, R, F), right_mask: (b, R) -> (b, C)
    """
    hl = a[..., left_at : left_at + _head_dim(model)]  # (b, L, D)
    padded_l = (~left_mask).to(a.dtype) * _PADDED  # (b, L)
    padded_r = (~right_mask).to(a.dtype) * _PADDED  # (b, R)
    s = padded_l.unsqueeze(-1) + padded_r.unsqueeze(-2)  # (b, L, R)
    column = 0
    for piece in factor:  # s += a[:, :, piece's columns] @ piece^T
        width = piece.shape[-1]
        s = s.baddbmm_(a[..., column : column + width], piece.transpose(1, 2))  # (b, L, R)
        column += width
    if model.config.pooling == "alignment":
        # Padded rows (columns) get weights too, then no share in the sums.
        over_right = torch.softmax(s, dim=-1)  # (b, L, R), exact on real rows
        over_left = torch.softmax(s, dim=-2)  # (b, L, R), exact on real columns
        lm = left_mask.to(s.dtype).unsqueeze(1)  # (b, 1, L)
        rm = right_mask.to(s.dtype).unsqueeze(1)  # (b, 1, R)
        weights = lm @ over_right  # (b, 1, R), sum_i softmax_j(s_ij)
        left_vec = torch.cat([(weights @ x).squeeze(1) for x in right], dim=-1)  # (b, D)
        right_vec = ((rm @ over_left.transpose(1, 2)) @ hl).squeeze(1)  # (b, D)
    else:
        hr = torch.cat(right, dim=-1)  # (b, R, D)
        pooled = extractive_pool(s, hl, left_mask, hr, right_mask)
        left_vec, right_vec = pooled["left_pooled"], pooled["right_pooled"]  # (b, D)
    return model.head(left_vec, right_vec)  # (b, C)


def _head_dim(model: HCRN) -> int:
    """D, the size of the states the co-attention pools."""
    return 2 * model.config.hidden_size * (2 if model.intra is not None else 1)


def _encode_texts(
    model: HCRN, states: torch.Tensor, mask: torch.Tensor, side: Literal["left", "right"]
) -> tuple[torch.Tensor, int]:
    """Texts of one side as `_match` reads them: their affinity factor, then their co-attention
    states x unless the factor starts with them ([x; p(x)]); and the column where x starts.

    Shape:
        states: (U, T, d) BiLSTM states, mask: (U, T) -> (U, T, F [+ D]), int
    """
    x = states
    if model.intra is not None:
        x, _ = model.intra(x, mask)  # (U, T, D)
    kind = model.affinity.kind
    factor = affinity_factor(model.affinity, x, side)  # (U, T, F)
    if kind == "real" or (side == "left" and kind != "hermitian"):
        return torch.cat([factor, x], dim=-1), factor.shape[-1]  # (U, T, F + D)
    return factor, 0


def _projected(model: HCRN, texts: WindowTexts, first: int, end: int) -> torch.Tensor:
    """u = ReLU(W_p w + b) (eq. 1) of a window's texts first..end-1, cut to their longest (at
    least 1 step); padding is not zeroed (the BiLSTM reads real tokens only).

    Shape:
        -> (c, T', n)
    """
    cut = max(int(texts.lengths[end - 1]), 1)  # the longest text (sorted by length)
    ids, mask = texts.ids[first:end, :cut], texts.mask[first:end, :cut]  # (c, T')
    return torch.relu(model.projection(model.token_encoder(ids, mask)))  # (c, T', n)


def _encode_right(
    model: HCRN, states: torch.Tensor, mask: torch.Tensor
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Right texts as `_match` reads them: their co-attention states x = [x'; h] (intra) or h,
    and their affinity factor p(x) (real) or [x; p(x)], both as pieces along the feature axis,
    never concatenated (p(x) as a sum of products with W's column blocks).

    Shape:
        states: (U, T, d) BiLSTM states h, mask: (U, T) -> pieces of (U, T, D) and of (U, T, F)
    """
    h = states.contiguous()  # (U, T, d)
    xs = [h]
    if model.intra is not None:
        q = torch.relu(model.intra.complexify.proj(h))  # (U, T, d)
        scores = torch.baddbmm(h @ h.transpose(1, 2), q, q.transpose(1, 2))  # (U, T, T)
        cells = mask.unsqueeze(-1) & mask.unsqueeze(-2)  # (U, T, T)
        xs = [masked_softmax(scores, cells, dim=-1) @ h, h]  # [x'; h], zero on padding
    if model.affinity.kind == "real":
        proj = model.affinity.proj
    else:
        proj = model.affinity.complexify.proj
    p = F.linear(xs[0], proj.weight[:, : xs[0].shape[-1]], proj.bias)  # (U, T, D)
    if len(xs) > 1:
        p.view(-1, p.shape[-1]).addmm_(
            xs[1].view(-1, xs[1].shape[-1]), proj.weight[:, xs[0].shape[-1] :].t()
        )  # (U*T, D)
    p = p.relu_()  # (U, T, D)
    return xs, ([p] if model.affinity.kind == "real" else [*xs, p])


def _encode_left(model: HCRN, states: torch.Tensor, texts: WindowTexts) -> tuple[torch.Tensor, int]:
    """`_encode_texts` of a window's left texts, in chunks of `_TEXT_CHUNK` (sorted by length)
    each cut to its longest text; zero beyond.

    Shape:
        states: (U, T, d) -> (U, T, F [+ D]), int
    """
    count, steps = texts.mask.shape
    encoded: torch.Tensor | None = None
    at = 0
    for start in range(0, count, _TEXT_CHUNK):
        end = min(start + _TEXT_CHUNK, count)
        cut = max(int(texts.lengths[end - 1]), 1)  # the chunk's longest text
        chunk, at = _encode_texts(
            model, states[start:end, :cut], texts.mask[start:end, :cut], "left"
        )  # (n, T', W)
        if encoded is None:
            encoded = chunk.new_zeros(count, steps, chunk.shape[-1])  # (U, T, W)
        encoded[start:end, :cut] = chunk
    assert encoded is not None  # a window has a pair, so a left text
    return encoded, at


def _gather(
    texts: WindowTexts, encoded: torch.Tensor, positions: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    """`texts.gather`, with whole rows copied (a contiguous `index_select`, several times faster
    than one of a cut view) and then cut.

    Shape:
        encoded: (U, T, W), positions: (b,) -> (b, T', W) view, (b, T') bool
    """
    index = torch.from_numpy(texts.rows[positions])  # (b,)
    steps = max(int(texts.lengths[texts.rows[positions]].max(initial=0)), 1)
    out = encoded.index_select(0, index)[:, :steps]  # (b, T', W)
    return out, texts.mask.index_select(0, index)[:, :steps]
