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
- `Matcher.predict` on the CPU runs `models/fast/damm.py` instead (the same outputs up to float
  rounding).

Dims: B batch, L / R lengths, E word vector size, d model size, h heads, C outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.coattention import enhance
from attnmatch.nn.exporting import exporting, window_padding
from attnmatch.nn.masking import masked_max


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

    A row whose keys are all padding (an empty text) attends uniformly instead of giving NaN;
    exported (`nn.exporting`), to its first position only, as `forward` on its pair alone and
    the whole-input path (`models/fast/damm.py`) have it, whatever the batch's padding.

    Shape:
        q: (B, h, L, d/h), k, v: (B, h, R, d/h), key_mask: (B, R) -> (B, L, d)
    """
    empty = ~key_mask.any(dim=-1, keepdim=True)  # (B, 1)
    if exporting():
        first = torch.arange(key_mask.shape[-1], device=key_mask.device) == 0  # (R,)
        key_mask = key_mask | (empty & first)  # (B, R)
    else:
        key_mask = key_mask | empty  # (B, R)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=key_mask[:, None, None, :], dropout_p=dropout
    )  # (B, h, L, d/h)
    return out.transpose(1, 2).flatten(2)  # (B, L, d)


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


class SubLayers(nn.Module):
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


class Block(nn.Module):
    """Self-attention encoder, cross-attention encoder and alignment (§3.2-3.4).

    Shape: a (B, L, d), b (B, R, d) -> (B, L, 4d), (B, R, 4d) (or (B, ., d) without
    cross-attention)
    """

    def __init__(self, config: DAMMConfig) -> None:
        super().__init__()
        self.self_attention = SubLayers(config)
        self.cross = SubLayers(config) if config.cross_attention else None

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
        x = window_padding(x, max(self.widths))  # (B, D, T'): every text keeps one window
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
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_blocks))
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
