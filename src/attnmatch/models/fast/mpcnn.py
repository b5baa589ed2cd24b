"""MP-CNN whole-input inference on the CPU (`Matcher.predict`, float32).

The pairs are taken in length-sorted windows (`attnmatch.models.fast._windows`); the word vectors
of each distinct text of a window are looked up (and, with the attention layer, normalised for
its cosines) once. Without the attention layer the whole sentence model depends on one text only,
so each distinct text's block A and B poolings are computed once and gathered for its pairs; with
it, the attention weights are computed `batch_size` pairs at a time and each pair's two inputs
[S; A S] go through the sentence model. Either way the sentence model runs on texts of one exact
length at a time (`_sentence_exact`), with no padding and no masks: the holistic convolutions are
one matrix product (a column block per filter tap) plus shifted sums, block B's products run along
the input dimensions, and poolings reduce the time axis. The similarity layer then runs on all
poolings at once (`features_exact`) and the MLP follows, `FEATURE_CHUNK` pairs at a time (the
results do not depend on the chunks). The outputs equal `MPCNN.forward`'s on the same pairs up to
float rounding (tests/models/test_mpcnn_inference.py).

Dims: N pairs, W pairs in a window, U distinct texts of one side, L / R lengths, d word vector
size, I = 2d (attention) or d input size, F holistic filters, G per-dimension filters, W widths,
P poolings, N similarity features.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.data.encoding import EncodedPairs
from attnmatch.models.fast._registry import register_inference
from attnmatch.models.fast._windows import (
    WindowTexts,
    batch_rows,
    inference_windows,
    run_windows,
    window_texts,
)
from attnmatch.models.mpcnn import MPCNN, POOLS_A, POOLS_B, attention_weights, cos_l2_l1

# Texts (or pairs) of one exact length are run through the sentence model in chunks of about
# this many tokens, so that their window maps stay in cache.
EXACT_CHUNK_TOKENS = 512
# Pairs per run of the similarity layer and the MLP (its tensors stay in cache).
FEATURE_CHUNK = 32


@register_inference(MPCNN)
def predict_mpcnn(model: MPCNN, data: EncodedPairs, batch_size: int) -> torch.Tensor:
    """Outputs for every pair of `data`, in its order: (N, num_outputs) float32. Run it in eval
    mode under `torch.inference_mode`."""
    weights = _exact_weights(model)
    outputs = torch.empty(len(data), model.config.num_outputs)  # (N, num_outputs)

    def window(pairs: np.ndarray) -> None:  # (W,) pair indices
        left = window_texts(data, data.left[pairs])  # U_l texts
        right = window_texts(data, data.right[pairs])  # U_r texts
        left_x = model.token_encoder(left.ids, left.mask)  # (U_l, L, d)
        right_x = model.token_encoder(right.ids, right.mask)  # (U_r, R, d)
        if model.config.attention:
            a0, a1 = _window_attention(model, left, left_x, right, right_x, batch_size)
            s0 = _side_poolings(model, left, left_x, a0, weights)  # (W, ...) per pair
            s1 = _side_poolings(model, right, right_x, a1, weights)
        else:
            s0 = _side_poolings(model, left, left_x, None, weights)  # (U_l, ...) per text
            s1 = _side_poolings(model, right, right_x, None, weights)  # (U_r, ...)
        for first in range(0, len(pairs), FEATURE_CHUNK):
            stop = min(first + FEATURE_CHUNK, len(pairs))
            if model.config.attention:  # per pair: the chunk is a slice
                u0 = _Pooled(*(v[first:stop] for v in s0))
                u1 = _Pooled(*(v[first:stop] for v in s1))
            else:
                i0 = torch.from_numpy(left.rows[first:stop])  # (b,)
                i1 = torch.from_numpy(right.rows[first:stop])  # (b,)
                u0 = _Pooled(*(v.index_select(0, i0) for v in s0))
                u1 = _Pooled(*(v.index_select(0, i1) for v in s1))
            features = features_exact(u0, u1)  # (b, N)
            outputs[torch.from_numpy(pairs[first:stop])] = model.mlp(model.dropout(features))

    run_windows(window, inference_windows(data, batch_size))
    return outputs


def _window_attention(
    model: MPCNN,
    left: WindowTexts,
    left_x: torch.Tensor,
    right: WindowTexts,
    right_x: torch.Tensor,
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A0, A1 of every pair of a window, `batch_size` pairs at a time, from each distinct
    text's normalised word vectors. Shape: -> (W, L), (W, R), zero beyond each text."""
    left_n = F.normalize(left_x, dim=-1, eps=1e-8)  # (U_l, L, d)
    right_n = F.normalize(right_x, dim=-1, eps=1e-8)  # (U_r, R, d)
    count = len(left.rows)
    a0 = left_x.new_zeros(count, left_x.shape[1])  # (W, L)
    a1 = right_x.new_zeros(count, right_x.shape[1])  # (W, R)
    for rows in batch_rows(count, batch_size):  # (b,)
        u, u_mask = left.gather(left_n, rows)  # (b, L', d), (b, L')
        v, v_mask = right.gather(right_n, rows)  # (b, R', d), (b, R')
        w0, w1 = attention_weights(u, u_mask, v, v_mask)  # (b, L'), (b, R')
        a0[rows[0] : rows[-1] + 1, : w0.shape[1]] = w0
        a1[rows[0] : rows[-1] + 1, : w1.shape[1]] = w1
    return a0, a1


def _exact_weights(model: MPCNN) -> _ExactWeights:
    """The convolution weights in the layouts of `_sentence_exact`."""
    cfg = model.config
    taps, biases = [], []
    for conv in model.holistic:
        assert isinstance(conv, nn.Conv1d) and conv.bias is not None
        width = conv.weight.shape[-1]
        taps += [conv.weight[:, :, k].t() for k in range(width)]  # (I, F) each
        biases += [conv.bias] + [torch.zeros_like(conv.bias)] * (width - 1)  # (F,) each
    dim = model.config.encoder.output_dim * (2 if cfg.attention else 1)  # I
    per_dim = []
    for conv in model.per_dim:
        assert isinstance(conv, nn.Conv1d) and conv.bias is not None
        per_dim.append(
            (
                conv.weight.view(dim, cfg.per_dim_filters, -1).permute(2, 1, 0).contiguous(),
                conv.bias.view(dim, cfg.per_dim_filters).t().contiguous(),
            )  # (ws, G, I), (G, I)
        )
    return _ExactWeights(torch.cat(taps, dim=1), torch.cat(biases), per_dim)


def _side_poolings(
    model: MPCNN,
    texts: WindowTexts,
    x: torch.Tensor,
    weights: torch.Tensor | None,
    conv: _ExactWeights,
) -> _Pooled:
    """`_sentence_exact`'s poolings for one side of a window: per distinct text (`weights`
    None, no attention layer) or per pair (`weights` the pairs' attention weights, the input
    [S; A S]), computed on runs of one exact length.

    Shape:
        x: (U, T, d), weights: (W, T) -> per text (U, ...) or per pair (W, ...)
    """
    if weights is None:
        lengths = texts.lengths  # (U,) ascending
        order = np.arange(len(lengths))
    else:
        lengths = texts.lengths[texts.rows]  # (W,)
        order = np.argsort(lengths, kind="stable")
        lengths = lengths[order]
    in_order = bool((order == np.arange(len(order))).all())
    out: list[torch.Tensor] = []
    for start, stop in _exact_runs(lengths, EXACT_CHUNK_TOKENS):
        n = int(lengths[start])
        units = order[start:stop]  # (m,) texts or pairs
        if weights is None:
            inputs = x[start:stop, :n]  # (m, n, d)
        else:
            index = torch.from_numpy(units)  # (m,)
            s = x.index_select(0, torch.from_numpy(texts.rows[units]))[:, :n]  # (m, n, d)
            a = weights.index_select(0, index)[:, :n, None]  # (m, n, 1)
            inputs = torch.cat([s, a * s], dim=-1)  # (m, n, 2d)
        pooled = _sentence_exact(model, inputs, conv)
        if not out:
            out = [v.new_empty(len(lengths), *v.shape[1:]) for v in pooled]
        for stored, v in zip(out, pooled, strict=True):
            if in_order:
                stored[start:stop] = v
            else:
                stored.index_copy_(0, index, v)
    return _Pooled(*out)


def _sentence_exact(model: MPCNN, x: torch.Tensor, conv: _ExactWeights) -> _Pooled:
    """`MPCNN._sentence`'s poolings of texts that all have exactly T real tokens (T may be 0),
    without masks, in the layouts of `_Pooled`.

    Shape:
        x: (m, T, I) -> _Pooled with leading size m
    """
    cfg = model.config
    m, n, dim = x.shape
    steps = max(n, max(cfg.widths), max(cfg.per_dim_widths))
    if steps > n:  # a text shorter than a filter keeps one zero-padded window
        x = F.pad(x, (0, 0, 0, steps - n))  # (m, T'', I)
    filters = cfg.holistic_filters
    taps = torch.addmm(conv.bias, x.reshape(m * steps, dim), conv.holistic).view(
        m, steps, -1
    )  # (m, T'', sum(widths) * F): every tap of every holistic filter at every position
    holistic = x.new_empty(m, len(POOLS_A), len(cfg.widths), filters)  # (m, P, W, F)
    first = 0
    for i, width in enumerate(cfg.widths):
        windows = max(n - width + 1, 1)
        h = taps[:, :windows, first * filters : (first + 1) * filters]  # (m, T', F)
        for k in range(1, width):
            col = (first + k) * filters
            h = h + taps[:, k : k + windows, col : col + filters]
        h = torch.tanh(h)  # (m, T', F)
        torch.amax(h, dim=1, out=holistic[:, 0, i])
        torch.amin(h, dim=1, out=holistic[:, 1, i])
        torch.mean(h, dim=1, out=holistic[:, 2, i])
        first += width
    tokens = x[:, : max(n, 1)]  # (m, T, I); an empty text is one zero vector
    inf = torch.stack([tokens.amax(dim=1), tokens.amin(dim=1), tokens.mean(dim=1)], dim=1)
    per_dim = x.new_empty(
        m, len(POOLS_B), len(cfg.per_dim_widths), cfg.per_dim_filters, dim
    )  # (m, P_B, W_B, G, I)
    for i, (width, (w, b)) in enumerate(zip(cfg.per_dim_widths, conv.per_dim, strict=True)):
        if width == 1:  # as `MPCNN._sentence`: pooled from ws = inf's max/min
            hi = w[0] * inf[:, 0].unsqueeze(1)  # (m, G, I)
            lo = w[0] * inf[:, 1].unsqueeze(1)  # (m, G, I)
            torch.add(torch.maximum(hi, lo), b, out=per_dim[:, 0, i])
            torch.add(torch.minimum(hi, lo), b, out=per_dim[:, 1, i])
        else:  # in (G, I) order: the products run along the input dimensions
            windows = max(n - width + 1, 1)
            z = torch.addcmul(b, x[:, :windows, None, :], w[0])  # (m, T', G, I)
            for k in range(1, width):
                z.addcmul_(x[:, k : k + windows, None, :], w[k])
            torch.amax(z, dim=1, out=per_dim[:, 0, i])
            torch.amin(z, dim=1, out=per_dim[:, 1, i])
    # tanh is increasing: block B pools the pre-activations, as `MPCNN._sentence`.
    return _Pooled(holistic, inf, torch.tanh_(per_dim))


class _Pooled(NamedTuple):
    """`MPCNN._sentence`'s poolings of a set of texts (or pairs' sides), grouped for
    `features_exact`; leading dimension U.

    Attributes:
        holistic: (U, P, W, F), block A over finite widths, P = POOLS_A.
        inf: (U, P, I), block A at ws = inf.
        per_dim: (U, P_B, W_B, G, I), block B (G before I: `MPCNN._sentence`'s (I, G) transposed).
    """

    holistic: torch.Tensor
    inf: torch.Tensor
    per_dim: torch.Tensor


def features_exact(s0: _Pooled, s1: _Pooled) -> torch.Tensor:
    """`MPCNN._features` (the same features in the same order) with every pooling at once.

    Block A's vertical comparisons take the dot products of every pair of widths in one
    batched matrix product and the distances with `torch.cdist` (direct sums, not the
    matrix-product form); block B's take the difference once for both distances.

    Shape:
        -> (B, N)
    """
    a0, a1 = s0.holistic, s1.holistic  # (B, P, W, F)
    batch, pools, widths, filters = a0.shape
    horizontal = cos_l2_l1(a0, a1, dim=2, l1=False)  # (B, P, F) x2
    u = a0.reshape(batch * pools, widths, filters)  # (B*P, W, F)
    v = a1.reshape(batch * pools, widths, filters)  # (B*P, W, F)
    norms = (
        (u.pow(2).sum(dim=-1).unsqueeze(2) * v.pow(2).sum(dim=-1).unsqueeze(1))
        .clamp(min=1e-16)
        .sqrt()
    )  # (B*P, W, W)
    l2 = torch.cdist(u, v, p=2, compute_mode="donot_use_mm_for_euclid_dist")  # (B*P, W, W)
    vertical = [
        (u @ v.transpose(1, 2)) / norms,
        (l2 * l2 + 1e-12).sqrt(),  # as `euclidean_distance`
        torch.cdist(u, v, p=1),
    ]  # (B*P, W, W) x3
    vertical = [f.view(batch, pools, widths * widths) for f in vertical]  # (B, P, W*W) x3
    inf = [f.unsqueeze(-1) for f in cos_l2_l1(s0.inf, s1.inf)]  # (B, P, 1) x3
    block_a = torch.cat(horizontal + vertical + inf, dim=-1)  # (B, P, 2F + 3W^2 + 3)
    x, y = s0.per_dim, s1.per_dim  # (B, P_B, W_B, G, I)
    diff = x - y  # (B, P_B, W_B, G, I)
    norms_b = ((x * x).sum(dim=-1) * (y * y).sum(dim=-1)).clamp(min=1e-16).sqrt()
    block_b = [
        (x * y).sum(dim=-1) / norms_b,
        ((diff * diff).sum(dim=-1) + 1e-12).sqrt(),  # as `euclidean_distance`
        diff.abs().sum(dim=-1),
    ]  # (B, P_B, W_B, G) x3
    block_b = [f.flatten(2) for f in block_b]  # (B, P_B, W_B*G) x3
    return torch.cat([block_a.flatten(1), torch.cat(block_b, dim=-1).flatten(1)], dim=1)


class _ExactWeights(NamedTuple):
    """The convolutions of `MPCNN` in the layouts of `_sentence_exact`.

    Attributes:
        holistic: (I, sum(widths) * F), one column block per (width, tap), widths in order.
        bias: (sum(widths) * F,), each width's bias on its first tap, zero on the others.
        per_dim: per block B width, its weight (ws, G, I) and bias (G, I).
    """

    holistic: torch.Tensor
    bias: torch.Tensor
    per_dim: list[tuple[torch.Tensor, torch.Tensor]]


def _exact_runs(lengths: np.ndarray, tokens: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of the runs of equal values in ascending `lengths`, each cut into chunks
    of at most max(1, tokens // length) rows."""
    bounds = np.flatnonzero(np.diff(lengths)) + 1
    for start, stop in zip(
        np.concatenate([[0], bounds]).tolist(),
        np.concatenate([bounds, [len(lengths)]]).tolist(),
        strict=True,
    ):
        step = max(1, tokens // max(int(lengths[start]), 1))
        for first in range(start, stop, step):
            yield first, min(first + step, stop)
