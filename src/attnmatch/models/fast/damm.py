"""DAMM whole-input inference on the CPU (`Matcher.predict`, float32).

The pairs are taken in length-sorted windows (`attnmatch.models.fast._windows`). What depends on
one text only is computed once per distinct text of a window, in groups of similar length
(`_TEXT_GROUP`): the token vectors and input projection, then with cross-attention the first
block's self-attention encoder and the cross-attention queries, keys and values of its output;
without cross-attention every block and the pooling. The rest runs `min(batch_size, 64)` pairs at
a time (`_PAIR_GROUP`: the tensors of more pairs leave the cache; the outputs do not depend on
it). Every query, key and value comes from one product; the alignment [h; c; h - c; h * c] is
never built for a product: the projection between blocks and the TextCNN read [h; c; h * c] with
their weights rearranged, every kernel offset of the TextCNN in one product whose shifted sums are
max-pooled before the bias and ReLU (both monotone). The outputs equal `DAMM.forward`'s on each
pair alone up to float rounding (tests/models/test_damm_inference.py). An empty text attends to
its one padded position, as `forward` on its pair alone has it (in a padded batch `forward`
spreads it over the batch's padding).

Dims: N pairs, W pairs in a window, U distinct texts of one side, L / R lengths, d model size,
h heads, P pooled size of one text, C outputs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.data.encoding import EncodedPairs
from attnmatch.models.damm import DAMM, Block, SubLayers
from attnmatch.models.fast._registry import register_inference
from attnmatch.models.fast._windows import (
    WindowTexts,
    batch_rows,
    inference_windows,
    run_windows,
    window_texts,
)
from attnmatch.nn.coattention import enhance
from attnmatch.nn.masking import masked_max

# Distinct texts of a window encoded together, each group cut to its longest text.
_TEXT_GROUP = 256
# Pairs matched together at most, whatever the batch size: the intermediate tensors of more
# pairs leave the cache.
_PAIR_GROUP = 64


class _InferenceWeights(NamedTuple):
    """The weights of `predict_damm`, rearranged once per call.

    Attributes:
        projections: per block boundary, the 4d -> d projection over [h; c; h * c]: weight
            (d, 3d) and bias (d,).
        cnn: every TextCNN kernel offset as one product: (D, sum(widths) * filters), columns
            (width, offset, filter); D = 3d over [h; c; h * c], or d without cross-attention.
        cnn_biases: per kernel size, (filters,).
    """

    projections: list[tuple[torch.Tensor, torch.Tensor | None]]
    cnn: torch.Tensor
    cnn_biases: list[torch.Tensor]


@register_inference(DAMM)
def predict_damm(model: DAMM, data: EncodedPairs, batch_size: int) -> torch.Tensor:
    """Outputs for every pair of `data`, in its order: (N, num_outputs) float32. Run it in eval
    mode under `torch.inference_mode`."""
    weights = inference_weights(model)
    outputs = torch.empty(len(data), model.config.num_outputs)  # (N, C)

    def window(pairs: np.ndarray) -> None:  # (W,) pair indices
        left = window_texts(data, data.left[pairs])  # U_l texts
        right = window_texts(data, data.right[pairs])  # U_r texts
        states_l = encode_texts(model, left, weights)  # (U_l, L, 4d) or (U_l, P)
        states_r = encode_texts(model, right, weights)  # (U_r, R, 4d) or (U_r, P)
        for rows in batch_rows(len(pairs), min(batch_size, _PAIR_GROUP)):  # (b,)
            if model.config.cross_attention:
                s_a, a_mask = left.gather(states_l, rows)  # (b, L', 4d), (b, L')
                s_b, b_mask = right.gather(states_r, rows)  # (b, R', 4d), (b, R')
                v_a, v_b = match(model, s_a, a_mask, s_b, b_mask, weights)  # (b, P) each
            else:
                v_a = states_l.index_select(0, torch.from_numpy(left.rows[rows]))  # (b, P)
                v_b = states_r.index_select(0, torch.from_numpy(right.rows[rows]))  # (b, P)
            outputs[torch.from_numpy(pairs[rows])] = model.mlp(enhance(v_a, v_b))  # (b, C)

    run_windows(window, inference_windows(data, batch_size))
    return outputs


def key_bias(mask: torch.Tensor) -> torch.Tensor:
    """Additive attention mask: 0 on real keys, -inf on padding. An empty text keeps its first
    position, as `forward` on that pair alone attends to its single padded position.

    Shape: mask (B, T) -> (B, 1, 1, T)
    """
    keep = mask.clone()
    keep[:, 0] = True
    bias = torch.zeros(keep.shape).masked_fill_(~keep, float("-inf"))  # (B, T)
    return bias[:, None, None, :]


def project(layer: SubLayers, x: torch.Tensor) -> torch.Tensor:
    """[query; key; value] of x in one product.

    Shape: x (B, T, d) -> (B, T, 3d)
    """
    weight = torch.cat([layer.query.weight, layer.key_value.weight])  # (3d, d)
    bias = torch.cat([layer.query.bias, layer.key_value.bias])  # (3d,)
    return F.linear(x, weight, bias)  # (B, T, 3d)


def attend(
    layer: SubLayers, x: torch.Tensor, q: torch.Tensor, kv: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """`layer.forward` in eval mode from projections: queries `q` of x, [key; value] `kv` of
    the memory, `bias` 0 on the keys attended to and -inf elsewhere (`key_bias`).

    Shape: x (B, L, d), q (B, L, d), kv (B, R, 2d), bias (B, 1, 1, R) -> (B, L, d)
    """
    k, v = kv.chunk(2, dim=-1)  # (B, R, d) each
    att = F.scaled_dot_product_attention(
        layer._split(q), layer._split(k), layer._split(v), attn_mask=bias
    )  # (B, h, L, d/h)
    if not layer.residual:
        return layer.ffn(att.transpose(1, 2).flatten(2))
    # The residual sums read the heads in place and the second layer's product adds into
    # m + b2: no copy of either.
    m = torch.empty(x.shape)  # (B, L, d)
    heads = att.transpose(1, 2)  # (B, L, h, d/h)
    torch.add(x.view(heads.shape), heads, out=m.view(heads.shape))  # x + att
    m = layer.norm_attention(m)  # (B, L, d)
    first, act, second = layer.ffn[0], layer.ffn[1], layer.ffn[2]
    assert isinstance(second, nn.Linear)
    g = act(first(m))  # (B, L, d')
    out = m + second.bias  # (B, L, d)
    out.view(-1, out.shape[-1]).addmm_(g.view(-1, g.shape[-1]), second.weight.T)
    return layer.norm_ffn(out)  # (B, L, d)


def _aligned_rows(weight: torch.Tensor, d: int) -> torch.Tensor:
    """Weights over the alignment [h; c; h - c; h * c] as weights over [h; c; h * c].

    Shape: weight (..., 4d) -> (..., 3d)
    """
    w_h, w_c, w_diff, w_prod = weight.split(d, dim=-1)  # (..., d) each
    return torch.cat([w_h + w_diff, w_c - w_diff, w_prod], dim=-1)  # (..., 3d)


def _blocks(model: DAMM) -> list[Block]:
    return [block for block in model.blocks if isinstance(block, Block)]


def inference_weights(model: DAMM) -> _InferenceWeights:
    """The projections' and the TextCNN's weights in the layouts `match` and `_pool` read."""
    d = model.config.hidden_size
    projections: list[tuple[torch.Tensor, torch.Tensor | None]] = [
        (_aligned_rows(p.weight, d), p.bias) for p in model.projections if isinstance(p, nn.Linear)
    ]
    columns, biases = [], []
    for conv in model.text_cnn.convs:
        assert isinstance(conv, nn.Conv1d) and conv.bias is not None
        biases.append(conv.bias)
        weight = conv.weight  # (F, D, w)
        if model.config.cross_attention:
            weight = _aligned_rows(weight.transpose(1, 2), d).transpose(1, 2)  # (F, 3d, w)
        columns += [weight[:, :, j].T for j in range(weight.shape[-1])]  # (3d, F) each
    return _InferenceWeights(projections, torch.cat(columns, dim=1), biases)


def encode_texts(model: DAMM, texts: WindowTexts, weights: _InferenceWeights) -> torch.Tensor:
    """The one-text part of a window's distinct texts: with cross-attention the first block's
    self-attention output h and its cross-attention [q; k; v] (padding left at zero), without
    it the pooled vector.

    Shape: -> (U, T, 4d) or (U, P)
    """
    d, cross = model.config.hidden_size, model.config.cross_attention
    count, steps = texts.mask.shape
    out = torch.empty(count, steps, 4 * d) if cross else None
    pooled = []
    for first in range(0, count, _TEXT_GROUP):
        group = slice(first, first + _TEXT_GROUP)
        t = max(int(texts.lengths[group].max()), 1)  # the group's longest text
        mask = texts.mask[group, :t]  # (u, t)
        x = model._input(texts.ids[group, :t], mask)  # (u, t, d)
        bias = key_bias(mask)  # (u, 1, 1, t)
        if out is not None:
            block = _blocks(model)[0]
            assert block.cross is not None
            h = _self_attend(block.self_attention, x, bias)  # (u, t, d)
            out[group, :t] = torch.cat([h, project(block.cross, h)], dim=-1)  # (u, t, 4d)
            out[group, t:] = 0.0  # padding
            continue
        for block in _blocks(model):
            x = _self_attend(block.self_attention, x, bias)  # (u, t, d)
        pooled.append(_pool(model, x, x, mask, weights))  # (u, P)
    return out if out is not None else torch.cat(pooled)


def _self_attend(layer: SubLayers, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The self-attention encoder in eval mode. Shape: x (B, T, d) -> (B, T, d)"""
    d = x.shape[-1]
    qkv = project(layer, x)  # (B, T, 3d)
    return attend(layer, x, qkv[..., :d], qkv[..., d:], bias)


def match(
    model: DAMM,
    s_a: torch.Tensor,
    a_mask: torch.Tensor,
    s_b: torch.Tensor,
    b_mask: torch.Tensor,
    weights: _InferenceWeights,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The blocks from the first cross-attention on, then the pooling, for a batch of pairs.

    Shape: s_a (B, L, 4d), s_b (B, R, 4d) from `encode_texts` -> (B, P), (B, P)
    """
    d = model.config.hidden_size
    bias_a, bias_b = key_bias(a_mask), key_bias(b_mask)  # (B, 1, 1, L), (B, 1, 1, R)
    h_a, p_a = s_a[..., :d], s_a[..., d:]  # (B, L, d), (B, L, 3d)
    h_b, p_b = s_b[..., :d], s_b[..., d:]  # (B, R, d), (B, R, 3d)
    c_a, c_b = h_a, h_b  # the cross-attention outputs, from block 0 on
    for k, block in enumerate(_blocks(model)):
        assert block.cross is not None
        if k:  # the previous alignment projected to d, then this block's self-attention
            weight, bias = weights.projections[k - 1]  # (d, 3d), (d,)
            x_a = F.linear(torch.cat([h_a, c_a, h_a * c_a], -1), weight, bias)  # (B, L, d)
            x_b = F.linear(torch.cat([h_b, c_b, h_b * c_b], -1), weight, bias)  # (B, R, d)
            h_a = _self_attend(block.self_attention, x_a, bias_a)  # (B, L, d)
            h_b = _self_attend(block.self_attention, x_b, bias_b)  # (B, R, d)
            p_a, p_b = project(block.cross, h_a), project(block.cross, h_b)  # (B, ., 3d)
        c_a = attend(block.cross, h_a, p_a[..., :d], p_b[..., d:], bias_b)  # (B, L, d)
        c_b = attend(block.cross, h_b, p_b[..., :d], p_a[..., d:], bias_a)  # (B, R, d)
    return _pool(model, h_a, c_a, a_mask, weights), _pool(model, h_b, c_b, b_mask, weights)


def _pool(
    model: DAMM, h: torch.Tensor, c: torch.Tensor, mask: torch.Tensor, weights: _InferenceWeights
) -> torch.Tensor:
    """`DAMM._pool` of the alignment [h; c; h - c; h * c] (of h alone without cross-attention).

    Shape: h, c (B, T, d), mask (B, T) -> (B, P)
    """
    real = mask.unsqueeze(-1)  # (B, T, 1)
    if model.config.cross_attention:
        prod = h * c  # (B, T, d)
        parts = [h, c, h - c, prod]
        y = torch.cat([h, c, prod], dim=-1) @ weights.cnn  # (B, T, sum(w) F)
    else:
        parts = [h]
        y = h @ weights.cnn  # (B, T, sum(w) F)
    pooled = [masked_max(part, real, dim=1) for part in parts]  # (B, d) each
    y = y.masked_fill_(~real, 0.0)  # padding reads as zeros, as `TextCNN` has it
    steps, filters = y.shape[1], model.config.cnn_filters
    lengths = mask.sum(dim=1, keepdim=True)  # (B, 1)
    column = 0
    for width, bias in zip(model.text_cnn.widths, weights.cnn_biases, strict=True):
        window = y[..., column : column + filters]  # (B, T, F): offset 0
        if width > 1:
            window = window.clone()
        for j in range(1, min(width, steps)):  # window t sums offset j at position t + j
            start = column + j * filters
            window[:, : steps - j] += y[:, j:, start : start + filters]
        column += width * filters
        valid = torch.arange(steps) < (lengths - width + 1).clamp(min=1)  # (B, T)
        top = masked_max(window, valid.unsqueeze(-1), dim=1)  # (B, F)
        pooled.append(F.relu(top + bias))  # (B, F)
    return torch.cat(pooled, dim=-1)  # (B, P)
