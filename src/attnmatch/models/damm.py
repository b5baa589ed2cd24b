"""DAMM: deep attention matching model (stacked self-attention and cross-attention blocks).

Paper:
    "Sentence Matching With Deep Self-Attention and Co-Attention Features", a draft without
    experiments; the decisions where it is silent are listed below (docs/models.md, DAMM).

Summary: fixed word vectors -> linear projection to d -> N blocks, each (shared by both texts):
- self-attention encoder (§3.2): multi-head scaled dot-product attention of a text over itself
  (heads concatenated), then the feed-forward gelu(M W1) W2 -> H_A;
- cross-attention encoder (§3.3): queries from H_A, keys and values from the other text's H_B
  (its self-attention output in the same block), heads concatenated, gelu feed-forward -> H_B2A;
- alignment (§3.4): [H_A; H_B2A; H_A - H_B2A; H_A * H_B2A] (4d);
-> pooling (§3.5) of the last block's alignment: [masked max over time; TextCNN] per text ->
prediction (§3.6): v = [v_a; v_b; v_a - v_b; v_a * v_b] -> linear -> gelu -> linear -> logits
(the losses apply softmax; a ranking score is one output, or P(match) of two).

Decisions (the draft is silent):
- Blocks stack through a linear 4d -> d projection of the alignment (between blocks only: the
  last block's 4d alignment is pooled, as §3.5 pools H_A in R^{la x 4d}).
- Each attention and feed-forward sub-layer has a residual connection and a LayerNorm after it
  (`residual=True`, post-LN as in Vaswani et al.); `residual=False` is the draft literally. The
  heads are concatenated without an output projection (the draft has none; W1 follows).
- Input: a linear projection E -> d (no bias) so d and the head count are free of the word-vector
  size; positional information none (the draft) or sinusoidal (`positional`).
- Both texts share every weight (the draft gives B's formulas as "similar").
- TextCNN (Kim 2014): kernel sizes `cnn_widths`, `cnn_filters` each, ReLU, masked max over time
  (a window counts when it starts within max(n - k + 1, 1) of a text's n tokens).
- `cross_attention=False` (the ablation) drops the cross-attention encoder and the alignment:
  blocks are self-attention encoders and H_A is pooled.
- Dropout (`dropout`) on the input, each sub-layer's output, the attention weights and the
  prediction MLP; default 0, the best on SICK entailment dev (with 0.1 the model underfits).
- `Matcher.predict` on the CPU in float32 runs `predict_encoded` instead of `forward` per batch:
  the pairs sorted by length, what depends on one text only (token vectors, the first block's
  self-attention encoder and its cross-attention projections; without cross-attention every
  block and the pooling) computed once per distinct text of a window of pairs, and the rest
  per batch with the same weights rearranged (see `predict_encoded`); equal to `forward` up to
  float rounding (`encoded_inference = False` switches it off).

Dims: B batch, L / R lengths, E word vector size, d model size, h heads, C outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.models._windows import (
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
# pairs leave the cache (see `predict_encoded`).
_PAIR_GROUP = 64


@dataclass(frozen=True, kw_only=True)
class DAMMConfig:
    """Args:
    encoder: the token encoder (input layer; fixed GloVe in the draft).
    hidden_size: d, the model size of every block.
    num_heads: h (d must be divisible by h).
    ffn_size: d', the feed-forward inner size.
    num_blocks: N stacked blocks.
    cross_attention: the cross-attention encoder and alignment layer (False: the ablation).
    residual: residual connection + LayerNorm around each sub-layer (ours; False: the draft).
    positional: "none" (the draft) or "sinusoidal" position encodings added to the input.
    cnn_widths: TextCNN kernel sizes.
    cnn_filters: TextCNN filters per kernel size.
    mlp_hidden: units of the prediction MLP's gelu layer.
    dropout: see the module docstring.
    num_outputs: classes, score levels, or 1 (a ranking score).
    """

    encoder: TokenEncoderConfig
    hidden_size: int = 128
    num_heads: int = 4
    ffn_size: int = 256
    num_blocks: int = 2
    cross_attention: bool = True
    residual: bool = True
    positional: Literal["none", "sinusoidal"] = "none"
    cnn_widths: tuple[int, ...] = (1, 2, 3)
    cnn_filters: int = 64
    mlp_hidden: int = 128
    dropout: float = 0.0
    num_outputs: int = 1

    def __post_init__(self) -> None:
        check_positive(
            self,
            "hidden_size",
            "num_heads",
            "ffn_size",
            "num_blocks",
            "cnn_filters",
            "mlp_hidden",
            "num_outputs",
        )
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_heads "
                f"({self.num_heads})"
            )
        if not self.cnn_widths or any(w < 1 for w in self.cnn_widths):
            raise ValueError(f"cnn_widths must be sizes >= 1, got {self.cnn_widths}")
        if self.positional not in ("none", "sinusoidal"):
            raise ValueError(f"positional must be 'none' or 'sinusoidal', got {self.positional!r}")
        check_dropout(self.dropout)


def multi_head_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor, dropout: float = 0.0
) -> torch.Tensor:
    """Scaled dot-product attention per head (heads concatenated), padding keys masked.

    A row whose keys are all padding (an empty text) attends uniformly instead of giving NaN.

    Shape:
        q: (B, h, L, d/h), k, v: (B, h, R, d/h), key_mask: (B, R) -> (B, L, d)
    """
    key_mask = key_mask | ~key_mask.any(dim=-1, keepdim=True)  # (B, R)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=key_mask[:, None, None, :], dropout_p=dropout
    )  # (B, h, L, d/h)
    return out.transpose(1, 2).flatten(2)  # (B, L, d)


def _key_bias(mask: torch.Tensor) -> torch.Tensor:
    """Additive attention mask: 0 on real keys, -inf on padding. An empty text keeps its first
    position, as `forward` on that pair alone attends to its single padded position.

    Shape: mask (B, T) -> (B, 1, 1, T)
    """
    keep = mask.clone()
    keep[:, 0] = True
    bias = torch.zeros(keep.shape).masked_fill_(~keep, float("-inf"))  # (B, T)
    return bias[:, None, None, :]


def _aligned_rows(weight: torch.Tensor, d: int) -> torch.Tensor:
    """Weights over the alignment [h; c; h - c; h * c] as weights over [h; c; h * c].

    Shape: weight (..., 4d) -> (..., 3d)
    """
    w_h, w_c, w_diff, w_prod = weight.split(d, dim=-1)  # (..., d) each
    return torch.cat([w_h + w_diff, w_c - w_diff, w_prod], dim=-1)  # (..., 3d)


class _InferenceWeights(NamedTuple):
    """The weights of `DAMM.predict_encoded`, rearranged once per call.

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


def sinusoidal_positions(length: int, dim: int, device: torch.device) -> torch.Tensor:
    """Vaswani et al. (2017) position encodings. Shape: -> (length, dim)"""
    pos = torch.arange(length, device=device, dtype=torch.float32).unsqueeze(1)  # (T, 1)
    rate = torch.exp(
        torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim)
    )  # (ceil(dim/2),)
    enc = torch.zeros(length, dim, device=device)
    enc[:, 0::2] = torch.sin(pos * rate)
    enc[:, 1::2] = torch.cos(pos * rate[: dim // 2])
    return enc  # (T, d)


class _SubLayers(nn.Module):
    """One attention encoder: multi-head attention (queries from x, keys/values from `memory`)
    then the gelu feed-forward, each with dropout and, if `residual`, residual + LayerNorm.

    Shape: x (B, L, d), memory (B, R, d), memory_mask (B, R) -> (B, L, d)
    """

    def __init__(self, config: DAMMConfig) -> None:
        super().__init__()
        d = config.hidden_size
        self.heads = config.num_heads
        self.residual = config.residual
        self.p = config.dropout
        self.query = nn.Linear(d, d)
        self.key_value = nn.Linear(d, 2 * d)
        self.ffn = nn.Sequential(
            nn.Linear(d, config.ffn_size), nn.GELU(), nn.Linear(config.ffn_size, d)
        )
        self.norm_attention = nn.LayerNorm(d) if config.residual else nn.Identity()
        self.norm_ffn = nn.LayerNorm(d) if config.residual else nn.Identity()
        self.drop = nn.Dropout(config.dropout)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, steps, d = x.shape
        return x.view(batch, steps, self.heads, d // self.heads).transpose(1, 2)  # (B, h, T, d/h)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor
    ) -> torch.Tensor:
        k, v = self.key_value(memory).chunk(2, dim=-1)  # (B, R, d) each
        att = multi_head_attention(
            self._split(self.query(x)),
            self._split(k),
            self._split(v),
            memory_mask,
            self.p if self.training else 0.0,
        )  # (B, L, d)
        att = self.drop(att)
        m = self.norm_attention(x + att) if self.residual else att  # (B, L, d)
        h = self.drop(self.ffn(m))  # (B, L, d)
        return self.norm_ffn(m + h) if self.residual else h  # (B, L, d)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """[query; key; value] of x in one product (inference).

        Shape: x (B, T, d) -> (B, T, 3d)
        """
        weight = torch.cat([self.query.weight, self.key_value.weight])  # (3d, d)
        bias = torch.cat([self.query.bias, self.key_value.bias])  # (3d,)
        return F.linear(x, weight, bias)  # (B, T, 3d)

    def attend(
        self, x: torch.Tensor, q: torch.Tensor, kv: torch.Tensor, key_bias: torch.Tensor
    ) -> torch.Tensor:
        """`forward` in eval mode from projections: queries `q` of x, [key; value] `kv` of the
        memory, `key_bias` 0 on the keys attended to and -inf elsewhere (inference).

        Shape: x (B, L, d), q (B, L, d), kv (B, R, 2d), key_bias (B, 1, 1, R) -> (B, L, d)
        """
        k, v = kv.chunk(2, dim=-1)  # (B, R, d) each
        att = F.scaled_dot_product_attention(
            self._split(q), self._split(k), self._split(v), attn_mask=key_bias
        )  # (B, h, L, d/h)
        if not self.residual:
            return self.ffn(att.transpose(1, 2).flatten(2))  # (B, L, d)
        # The residual sums read the heads in place and the second layer's product adds
        # into m + b2: no copy of either.
        m = torch.empty(x.shape)  # (B, L, d)
        heads = att.transpose(1, 2)  # (B, L, h, d/h)
        torch.add(x.view(heads.shape), heads, out=m.view(heads.shape))  # x + att
        m = self.norm_attention(m)  # (B, L, d)
        first, act, second = self.ffn[0], self.ffn[1], self.ffn[2]
        assert isinstance(second, nn.Linear)
        g = act(first(m))  # (B, L, d')
        out = m + second.bias  # (B, L, d)
        out.view(-1, out.shape[-1]).addmm_(g.view(-1, g.shape[-1]), second.weight.T)
        return self.norm_ffn(out)  # (B, L, d)


class _Block(nn.Module):
    """Self-attention encoder, cross-attention encoder and alignment (§3.2-3.4).

    Shape: a (B, L, d), b (B, R, d) -> (B, L, 4d), (B, R, 4d) (or (B, ., d) without
    cross-attention)
    """

    def __init__(self, config: DAMMConfig) -> None:
        super().__init__()
        self.self_attention = _SubLayers(config)
        self.cross = _SubLayers(config) if config.cross_attention else None

    def forward(
        self, a: torch.Tensor, a_mask: torch.Tensor, b: torch.Tensor, b_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h_a = self.self_attention(a, a, a_mask)  # (B, L, d)
        h_b = self.self_attention(b, b, b_mask)  # (B, R, d)
        if self.cross is None:
            return h_a, h_b
        b2a = self.cross(h_a, h_b, b_mask)  # (B, L, d): each token of a over b
        a2b = self.cross(h_b, h_a, a_mask)  # (B, R, d)
        return enhance(h_a, b2a), enhance(h_b, a2b)  # alignment: (B, L, 4d), (B, R, 4d)


class TextCNN(nn.Module):
    """Kim (2014) over one text: per kernel size k, ReLU(conv) then masked max over time.

    Shape: x (B, T, D), mask (B, T) -> (B, len(widths) * filters)
    """

    def __init__(self, dim: int, widths: tuple[int, ...], filters: int) -> None:
        super().__init__()
        self.widths = widths
        self.convs = nn.ModuleList(nn.Conv1d(dim, filters, w) for w in widths)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = (x * mask.unsqueeze(-1)).transpose(1, 2)  # (B, D, T)
        if x.shape[-1] < max(self.widths):  # every text keeps at least one window
            x = F.pad(x, (0, max(self.widths) - x.shape[-1]))
        lengths = mask.sum(dim=1, keepdim=True)  # (B, 1)
        out = []
        for width, conv in zip(self.widths, self.convs, strict=True):
            h = F.relu(conv(x))  # (B, filters, T')
            valid = torch.arange(h.shape[-1], device=x.device) < (lengths - width + 1).clamp(min=1)
            out.append(masked_max(h, valid.unsqueeze(1), dim=-1))  # (B, filters)
        return torch.cat(out, dim=-1)  # (B, len(widths) * filters)


@register_model(
    "damm",
    config=DAMMConfig,
    tasks=("ranking", "classification", "regression"),
    paper="self- and co-attention draft (DAMM)",
)
class DAMM(nn.Module):
    """Deep attention matching model. Returns (B, num_outputs) logits / scores."""

    def __init__(self, config: DAMMConfig) -> None:
        super().__init__()
        self.config = config
        d = config.hidden_size
        self.token_encoder = build_token_encoder(config.encoder)
        self.input_projection = nn.Linear(config.encoder.output_dim, d, bias=False)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.num_blocks))
        width = 4 * d if config.cross_attention else d
        # Between blocks: the 4d alignment back to d (absent without cross-attention).
        self.projections = nn.ModuleList(
            nn.Linear(width, d) if config.cross_attention else nn.Identity()
            for _ in range(config.num_blocks - 1)
        )
        self.text_cnn = TextCNN(width, config.cnn_widths, config.cnn_filters)
        pooled = width + len(config.cnn_widths) * config.cnn_filters
        self.drop = nn.Dropout(config.dropout)
        self.mlp = nn.Sequential(
            nn.Linear(4 * pooled, config.mlp_hidden),
            nn.GELU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.mlp_hidden, config.num_outputs),
        )
        # `Matcher.predict` on the CPU runs `predict_encoded` (off: `forward` per batch).
        self.encoded_inference = True

    def _input(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.input_projection(self.token_encoder(ids, mask))  # (B, T, d)
        if self.config.positional == "sinusoidal":
            x = x + sinusoidal_positions(x.shape[1], x.shape[2], x.device)
        return self.drop(x)  # (B, T, d)

    def _pool(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[masked max; TextCNN] (§3.5). Shape: (B, T, D) -> (B, D + widths * filters)"""
        return torch.cat([masked_max(h, mask.unsqueeze(-1), dim=1), self.text_cnn(h, mask)], -1)

    def forward(self, batch: PairBatch) -> torch.Tensor:
        a_mask, b_mask = batch.left_mask, batch.right_mask
        a = self._input(batch.left_ids, a_mask)  # (B, L, d)
        b = self._input(batch.right_ids, b_mask)  # (B, R, d)
        for k, block in enumerate(self.blocks):
            if k:
                a, b = self.projections[k - 1](a), self.projections[k - 1](b)  # (B, ., d)
            a, b = block(a, a_mask, b, b_mask)  # (B, L, 4d), (B, R, 4d)
        v_a, v_b = self._pool(a, a_mask), self._pool(b, b_mask)  # (B, P) each
        v = enhance(v_a, v_b)  # (B, 4P)
        return self.mlp(self.drop(v))  # (B, C)

    def predict_encoded(self, data: EncodedPairs, batch_size: int) -> torch.Tensor:
        """Outputs for every pair of `data`, in its order: the inference path of
        `Matcher.predict` on the CPU. Run it in eval mode under `torch.inference_mode`.

        The pairs are taken in length-sorted windows (`attnmatch.models._windows`). What depends
        on one text only is computed once per distinct text of a window, in groups of similar
        length: the token vectors and input projection, then with cross-attention the first
        block's self-attention encoder and the cross-attention queries, keys and values of its
        output; without cross-attention every block and the pooling. The rest runs
        `min(batch_size, 64)` pairs at a time (`_PAIR_GROUP`: the tensors of more pairs leave
        the cache; the outputs do not depend on it). Every query, key and value comes from one product; the alignment
        [h; c; h - c; h * c] is never built for a product: the projection between blocks and the
        TextCNN read [h; c; h * c] with their weights rearranged, every kernel offset of the
        TextCNN in one product whose shifted sums are max-pooled before the bias and ReLU (both
        monotone). The outputs equal `forward`'s on each pair alone up to float rounding
        (tests/models/test_damm_inference.py). An empty text attends to its one padded position,
        as `forward` on its pair alone has it (in a padded batch `forward` spreads it over the
        batch's padding).

        Shape:
            -> (N, num_outputs) float32
        """
        weights = self._inference_weights()
        outputs = torch.empty(len(data), self.config.num_outputs)  # (N, C)

        def window(pairs: np.ndarray) -> None:  # (W,) pair indices
            left = window_texts(data, data.left[pairs])  # U_l texts
            right = window_texts(data, data.right[pairs])  # U_r texts
            states_l = self._encode_texts(left, weights)  # (U_l, L, 4d) or (U_l, P)
            states_r = self._encode_texts(right, weights)  # (U_r, R, 4d) or (U_r, P)
            for rows in batch_rows(len(pairs), min(batch_size, _PAIR_GROUP)):  # (b,)
                if self.config.cross_attention:
                    s_a, a_mask = left.gather(states_l, rows)  # (b, L', 4d), (b, L')
                    s_b, b_mask = right.gather(states_r, rows)  # (b, R', 4d), (b, R')
                    v_a, v_b = self._match(s_a, a_mask, s_b, b_mask, weights)  # (b, P) each
                else:
                    v_a = states_l.index_select(0, torch.from_numpy(left.rows[rows]))  # (b, P)
                    v_b = states_r.index_select(0, torch.from_numpy(right.rows[rows]))  # (b, P)
                outputs[torch.from_numpy(pairs[rows])] = self.mlp(enhance(v_a, v_b))  # (b, C)

        run_windows(window, inference_windows(data, batch_size))
        return outputs

    def _block_list(self) -> list[_Block]:
        return [block for block in self.blocks if isinstance(block, _Block)]

    def _inference_weights(self) -> _InferenceWeights:
        d = self.config.hidden_size
        projections: list[tuple[torch.Tensor, torch.Tensor | None]] = [
            (_aligned_rows(p.weight, d), p.bias)
            for p in self.projections
            if isinstance(p, nn.Linear)
        ]
        columns, biases = [], []
        for conv in self.text_cnn.convs:
            assert isinstance(conv, nn.Conv1d) and conv.bias is not None
            biases.append(conv.bias)
            weight = conv.weight  # (F, D, w)
            if self.config.cross_attention:
                weight = _aligned_rows(weight.transpose(1, 2), d).transpose(1, 2)  # (F, 3d, w)
            columns += [weight[:, :, j].T for j in range(weight.shape[-1])]  # (3d, F) each
        return _InferenceWeights(projections, torch.cat(columns, dim=1), biases)

    def _encode_texts(self, texts: WindowTexts, weights: _InferenceWeights) -> torch.Tensor:
        """The one-text part of a window's distinct texts: with cross-attention the first block's
        self-attention output h and its cross-attention [q; k; v] (padding left at zero),
        without it the pooled vector.

        Shape: -> (U, T, 4d) or (U, P)
        """
        d, cross = self.config.hidden_size, self.config.cross_attention
        count, steps = texts.mask.shape
        out = torch.empty(count, steps, 4 * d) if cross else None
        pooled = []
        for first in range(0, count, _TEXT_GROUP):
            group = slice(first, first + _TEXT_GROUP)
            t = max(int(texts.lengths[group].max()), 1)  # the group's longest text
            mask = texts.mask[group, :t]  # (u, t)
            x = self._input(texts.ids[group, :t], mask)  # (u, t, d)
            bias = _key_bias(mask)  # (u, 1, 1, t)
            if out is not None:
                block = self._block_list()[0]
                assert block.cross is not None
                h = self._self_attend(block.self_attention, x, bias)  # (u, t, d)
                out[group, :t] = torch.cat([h, block.cross.project(h)], dim=-1)  # (u, t, 4d)
                out[group, t:] = 0.0  # padding
                continue
            for block in self._block_list():
                x = self._self_attend(block.self_attention, x, bias)  # (u, t, d)
            pooled.append(self._pool_encoded(x, x, mask, weights))  # (u, P)
        return out if out is not None else torch.cat(pooled)

    @staticmethod
    def _self_attend(layer: _SubLayers, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """The self-attention encoder in eval mode. Shape: x (B, T, d) -> (B, T, d)"""
        d = x.shape[-1]
        qkv = layer.project(x)  # (B, T, 3d)
        return layer.attend(x, qkv[..., :d], qkv[..., d:], bias)

    def _match(
        self,
        s_a: torch.Tensor,
        a_mask: torch.Tensor,
        s_b: torch.Tensor,
        b_mask: torch.Tensor,
        weights: _InferenceWeights,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The blocks from the first cross-attention on, then the pooling, for a batch of pairs.

        Shape: s_a (B, L, 4d), s_b (B, R, 4d) from `_encode_texts` -> (B, P), (B, P)
        """
        d = self.config.hidden_size
        bias_a, bias_b = _key_bias(a_mask), _key_bias(b_mask)  # (B, 1, 1, L), (B, 1, 1, R)
        h_a, p_a = s_a[..., :d], s_a[..., d:]  # (B, L, d), (B, L, 3d)
        h_b, p_b = s_b[..., :d], s_b[..., d:]  # (B, R, d), (B, R, 3d)
        c_a, c_b = h_a, h_b  # the cross-attention outputs, from block 0 on
        for k, block in enumerate(self._block_list()):
            assert block.cross is not None
            if k:  # the previous alignment projected to d, then this block's self-attention
                weight, bias = weights.projections[k - 1]  # (d, 3d), (d,)
                x_a = F.linear(torch.cat([h_a, c_a, h_a * c_a], -1), weight, bias)  # (B, L, d)
                x_b = F.linear(torch.cat([h_b, c_b, h_b * c_b], -1), weight, bias)  # (B, R, d)
                h_a = self._self_attend(block.self_attention, x_a, bias_a)  # (B, L, d)
                h_b = self._self_attend(block.self_attention, x_b, bias_b)  # (B, R, d)
                p_a, p_b = block.cross.project(h_a), block.cross.project(h_b)  # (B, ., 3d)
            c_a = block.cross.attend(h_a, p_a[..., :d], p_b[..., d:], bias_b)  # (B, L, d)
            c_b = block.cross.attend(h_b, p_b[..., :d], p_a[..., d:], bias_a)  # (B, R, d)
        return self._pool_encoded(h_a, c_a, a_mask, weights), self._pool_encoded(
            h_b, c_b, b_mask, weights
        )

    def _pool_encoded(
        self, h: torch.Tensor, c: torch.Tensor, mask: torch.Tensor, weights: _InferenceWeights
    ) -> torch.Tensor:
        """`_pool` of the alignment [h; c; h - c; h * c] (of h alone without cross-attention).

        Shape: h, c (B, T, d), mask (B, T) -> (B, P)
        """
        real = mask.unsqueeze(-1)  # (B, T, 1)
        if self.config.cross_attention:
            prod = h * c  # (B, T, d)
            parts = [h, c, h - c, prod]
            y = torch.cat([h, c, prod], dim=-1) @ weights.cnn  # (B, T, sum(w) F)
        else:
            parts = [h]
            y = h @ weights.cnn  # (B, T, sum(w) F)
        pooled = [masked_max(part, real, dim=1) for part in parts]  # (B, d) each
        y = y.masked_fill_(~real, 0.0)  # padding reads as zeros, as `TextCNN` has it
        steps, filters = y.shape[1], self.config.cnn_filters
        lengths = mask.sum(dim=1, keepdim=True)  # (B, 1)
        column = 0
        for width, bias in zip(self.text_cnn.widths, weights.cnn_biases, strict=True):
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


register_preset(
    "damm",
    model="damm",
    overrides={},
    description="DAMM: 2 blocks of self- + cross-attention with alignment (self- and co-attention draft)",
)
for _n in (1, 3):
    register_preset(
        f"damm_{_n}block",
        model="damm",
        overrides={"num_blocks": _n},
        description=f"DAMM with {_n} block{'s' if _n > 1 else ''} (the depth ablation)",
    )
register_preset(
    "damm_no_cross",
    model="damm",
    overrides={"cross_attention": False},
    description="DAMM without the cross-attention encoder and alignment (ablation)",
)
