"""Multi-perspective CNN (MP-CNN) with the attention input interaction layer.

Papers:
    He, Gimpel, Lin, "Multi-Perspective Sentence Similarity Modeling with Convolutional Neural
    Networks", EMNLP 2015 (the base model, https://aclanthology.org/D15-1181).
    He, Wieting, Gimpel, Rao, Lin, "UMD-TTIC-UW at SemEval-2016 Task 1: Attention-Based
    Multi-Perspective Convolutional Neural Networks for Textual Similarity Measurement",
    SemEval 2016 (the attention layer, §3).

Summary: word vectors S0 (L x d), S1 (R x d) -> attention input layer (no parameters):
D[a][b] = cos(S0[a], S1[b]), E0[a] = sum_b D[a][b], E1[b] = sum_a D[a][b], A^i = masked
softmax(E^i), input^i[a] = [S^i[a]; A^i[a] S^i[a]] (2d) -> shared sentence model:
- block A, holistic filters over windows ws in `widths` (tanh), pooled by max, min and mean,
  plus ws = inf (the same three poolings straight over the input matrix);
- block B, per-dimension filters over windows ws in `per_dim_widths` (tanh; one grouped
  convolution, no loop over dimensions), pooled by max and min;
-> structured similarity layer (He et al. 2015, Algorithms 1 and 2):
- horizontal: for each block-A pooling p and filter i, the vector over window sizes
  [groupA(ws, p)[i] for ws in widths] of one text against the other's: cosine and L2 distance;
- vertical, block A: for each pooling p and each pair (ws1, ws2) of window sizes (finite with
  finite, inf with inf), groupA(ws1, p, S0) against groupA(ws2, p, S1): cosine, L2 and L1
  distance;
- vertical, block B: for each pooling p, window ws and filter i, the vector over dimensions:
  cosine, L2 and L1 distance;
-> linear -> tanh -> linear -> logits (log-softmax over score levels or classes is applied by
the losses; STS predicts the expected level).

Deviations / decisions (see docs/models.md, MP-CNN):
- Masked convolutions and pooling: the inputs are zero beyond each text's real tokens; a window
  output counts when it starts within the first max(n - ws + 1, 1) positions (a text shorter
  than ws keeps one window, zero-padded); padding never wins a max or min and is not averaged.
- comU1's third measure, written |x - y| in He et al. (2015), is taken as the L1 distance (a
  scalar), so the feature count does not grow with the embedding size.
- The model returns logits, not log-probabilities: every loss here applies log-softmax itself,
  and the two differ by a per-row constant.
- `attention=False` is the plain MP-CNN (the Table 3 ablation): the input is S itself (d).
- The paper's PARAGRAM-PHRASE XXL embeddings are not available: the input layer is GloVe.

Speed (exact rewrites, tested against a literal per-window reference, values and gradients):
block B pools pre-activations and applies tanh after (tanh is increasing); its width-1 filters
are pooled from ws = inf's max/min (max_t(w x_t + b) = w max_t x + b for w >= 0, else w min_t x
+ b); max/min pooling gathers arg-max/min found without autograd. `fast_pooling=False` runs
the plain path (full maps, masked amax/amin) for comparison. `Matcher.predict` on the CPU runs
`models/fast/mpcnn.py` instead (the same outputs up to float rounding).

Dims: B batch, L / R lengths, d word vector size, I = 2d (attention) or d input size, F
holistic filters, G per-dimension filters, W widths, P poolings, N similarity features.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.exporting import exporting, window_padding
from attnmatch.nn.masking import masked_max, masked_mean, masked_min, masked_softmax
from attnmatch.nn.similarity import euclidean_distance

POOLS_A = ("max", "min", "mean")
POOLS_B = ("max", "min")


@dataclass(frozen=True, kw_only=True)
class MPCNNConfig:
    """Args:
    encoder: the token encoder (input layer).
    attention: the attention input interaction layer (the SemEval 2016 model); False is the
        plain MP-CNN of He et al. (2015).
    widths: block A window sizes (the paper: 1, 2, 3; ws = inf is always added).
    per_dim_widths: block B window sizes (the paper: 1, 2).
    holistic_filters: F, block A filters per window size.
    per_dim_filters: G, block B filters per input dimension and window size.
    hidden_size: units of the output MLP's tanh layer.
    dropout: dropout on the similarity features.
    num_outputs: score levels (regression), classes, or 1 (a ranking score).
    fast_pooling: the exact rewrites of "Speed"; False: the reference pooling (masked amax/amin
        over full window maps, block B's width-1 map computed too) for benchmarks and tests.
    """

    encoder: TokenEncoderConfig
    attention: bool = False
    widths: tuple[int, ...] = (1, 2, 3)
    per_dim_widths: tuple[int, ...] = (1, 2)
    holistic_filters: int = 300
    per_dim_filters: int = 20
    hidden_size: int = 150
    dropout: float = 0.0
    num_outputs: int = 1
    fast_pooling: bool = True

    def __post_init__(self) -> None:
        check_positive(self, "holistic_filters", "per_dim_filters", "hidden_size", "num_outputs")
        for name in ("widths", "per_dim_widths"):
            widths = getattr(self, name)
            if not widths or any(w < 1 for w in widths) or len(set(widths)) != len(widths):
                raise ValueError(f"{name} must be distinct sizes >= 1, got {widths}")
        check_dropout(self.dropout)


def attention_input(
    left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor, right_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The attention input layer (He et al. 2016, §3): no parameters.

    Shape:
        left: (B, L, d), left_mask: (B, L), right: (B, R, d), right_mask: (B, R)
        -> [S0; A0 S0] (B, L, 2d), [S1; A1 S1] (B, R, 2d), A0 (B, L), A1 (B, R)
    """
    a0, a1 = attention_weights(
        F.normalize(left, dim=-1, eps=1e-8),
        left_mask,
        F.normalize(right, dim=-1, eps=1e-8),
        right_mask,
    )  # (B, L), (B, R)
    out0 = torch.cat([left, a0.unsqueeze(-1) * left], dim=-1)  # (B, L, 2d)
    out1 = torch.cat([right, a1.unsqueeze(-1) * right], dim=-1)  # (B, R, 2d)
    return out0, out1, a0, a1


def attention_weights(
    left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor, right_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """A0, A1 of the attention input layer from unit-length word vectors.

    Shape:
        left: (B, L, d), left_mask: (B, L), right: (B, R, d), right_mask: (B, R)
        -> (B, L), (B, R)
    """
    cos = left @ right.transpose(1, 2)  # (B, L, R)
    cells = left_mask.unsqueeze(-1) & right_mask.unsqueeze(-2)  # (B, L, R)
    cos = cos * cells
    a0 = masked_softmax(cos.sum(dim=2), left_mask, dim=-1)  # (B, L)
    a1 = masked_softmax(cos.sum(dim=1), right_mask, dim=-1)  # (B, R)
    return a0, a1


def _window_mask(mask: torch.Tensor, width: int, steps: int) -> torch.Tensor:
    """Which of `steps` window outputs count. Shape: (B, T) -> (B, steps)"""
    valid = (mask.sum(dim=1, keepdim=True) - width + 1).clamp(min=1)  # (B, 1)
    return torch.arange(steps, device=mask.device).unsqueeze(0) < valid  # (B, steps)


def _max_min(x: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Masked max and min pooling over the last axis, where position 0 always counts.

    Masked positions take position 0's value, so they never win. Without autograd one
    `aminmax` pass gives both; with it, the arg-max/min are found without autograd and the
    values gathered, so the backward pass is one scatter rather than the full-size comparisons
    of `amax`/`amin` and `masked_fill`. (A time-major layout, whose outer-axis amax is ~5x
    faster, was tried: its arg-max is slower, and training lost more than inference gained.)

    Shape: x (..., T), mask broadcastable to x -> {"max", "min"}: (...)
    """
    if exporting():  # ONNX has no aminmax; a `Where` over x is slow in ONNX Runtime: shifts
        # masked positions out of reach by the largest float on the mask's (small) shape.
        shift = torch.where(mask, 0.0, torch.finfo(x.dtype).max)  # mask's shape
        return {"max": (x - shift).amax(dim=-1), "min": (x + shift).amin(dim=-1)}
    if not (x.requires_grad and torch.is_grad_enabled()):  # inference: one fused reduction
        low, high = torch.aminmax(torch.where(mask, x, x[..., :1]), dim=-1)  # (...) each
        return {"max": high, "min": low}
    with torch.no_grad():
        filled = torch.where(mask, x, x[..., :1])  # (..., T)
        index = torch.stack([filled.argmax(dim=-1), filled.argmin(dim=-1)], dim=-1)  # (..., 2)
    picked = x.gather(-1, index)  # (..., 2)
    return {"max": picked[..., 0], "min": picked[..., 1]}


def cos_l2_l1(
    x: torch.Tensor, y: torch.Tensor, dim: int = -1, l1: bool = True
) -> list[torch.Tensor]:
    """comU1 (cos, L2, L1) or comU2 (cos, L2) over axis `dim`. Shape: (..., n, ...) -> [(...)]

    (Reducing over `dim` in place avoids the slow strided norms of a transposed view.)
    """
    norms = (x.pow(2).sum(dim=dim) * y.pow(2).sum(dim=dim)).clamp(min=1e-16).sqrt()
    feats = [(x * y).sum(dim=dim) / norms, euclidean_distance(x, y, dim=dim)]
    if l1:
        feats.append((x - y).abs().sum(dim=dim))
    return feats


def _max_min_reference(x: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """`_max_min` by masked amax/amin (the reference path). Shape: as `_max_min`."""
    return {"max": masked_max(x, mask, dim=-1), "min": masked_min(x, mask, dim=-1)}


def similarity_feature_count(config: MPCNNConfig) -> int:
    """N, the structured similarity layer's output size for `config` (tested against the model).

    horizontal: |POOLS_A| x F x 2; vertical A: |POOLS_A| x (W^2 + 1) x 3;
    vertical B: |POOLS_B| x |per_dim_widths| x G x 3.
    """
    w = len(config.widths)
    horizontal = len(POOLS_A) * config.holistic_filters * 2
    vertical_a = len(POOLS_A) * (w * w + 1) * 3
    vertical_b = len(POOLS_B) * len(config.per_dim_widths) * config.per_dim_filters * 3
    return horizontal + vertical_a + vertical_b


@register_model(
    "mpcnn",
    config=MPCNNConfig,
    paper="He et al. EMNLP 2015; attention: He et al. SemEval 2016",
    explains=True,
)
class MPCNN(nn.Module):
    """MP-CNN with the optional attention input layer. Returns (B, num_outputs) logits/scores."""

    def __init__(self, config: MPCNNConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        dim = config.encoder.output_dim * (2 if config.attention else 1)
        self.holistic = nn.ModuleList(
            nn.Conv1d(dim, config.holistic_filters, w) for w in config.widths
        )
        # Block B: one grouped convolution per width, G filters for each input dimension.
        self.per_dim = nn.ModuleList(
            nn.Conv1d(dim, dim * config.per_dim_filters, w, groups=dim)
            for w in config.per_dim_widths
        )
        self.dropout = nn.Dropout(config.dropout)
        self.mlp = nn.Sequential(
            nn.Linear(similarity_feature_count(config), config.hidden_size),
            nn.Tanh(),
            nn.Linear(config.hidden_size, config.num_outputs),
        )

    def _sentence(self, x: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Block A and B poolings of one side.

        Shape:
            x: (B, T, I), mask: (B, T) -> "A{p}" (B, W, F) for finite widths, "Ainf{p}" (B, I),
            "B{p}" (B, W_B, I, G)
        """
        cfg = self.config
        x = (x * mask.unsqueeze(-1)).transpose(1, 2)  # (B, I, T)
        longest = max(max(cfg.widths), max(cfg.per_dim_widths))
        x = window_padding(x, longest)  # (B, I, T'): every text keeps at least one window
        out: dict[str, torch.Tensor] = {}
        holistic = []
        max_min = _max_min if cfg.fast_pooling else _max_min_reference
        for width, conv in zip(cfg.widths, self.holistic, strict=True):
            h = torch.tanh(conv(x))  # (B, F, T')
            m = _window_mask(mask, width, h.shape[-1]).unsqueeze(1)  # (B, 1, T')
            pooled = max_min(h, m)
            pooled["mean"] = masked_mean(h, m, dim=-1)
            holistic.append(pooled)  # (B, F) each
        # ws = inf: the poolings straight over the input matrix.
        tokens = _window_mask(mask, 1, x.shape[-1]).unsqueeze(1)  # (B, 1, T)
        inf = max_min(x, tokens)
        inf["mean"] = masked_mean(x, tokens, dim=-1)
        for p in POOLS_A:
            out[f"A{p}"] = torch.stack([h[p] for h in holistic], dim=1)  # (B, W, F)
            out[f"Ainf{p}"] = inf[p]  # (B, I)
        per_dim = []
        batch, dim = x.shape[:2]
        for width, conv in zip(cfg.per_dim_widths, self.per_dim, strict=True):
            assert isinstance(conv, nn.Conv1d) and conv.bias is not None
            if width == 1 and cfg.fast_pooling:
                # A width-1 filter is w x_t + b per dimension: its max over t is w max_t x + b
                # when w >= 0 and w min_t x + b otherwise, so it is pooled from ws = inf's
                # max/min without computing the (B, I, G, T) map (exact, gradients included).
                w = conv.weight.view(1, dim, cfg.per_dim_filters)  # (1, I, G)
                b = conv.bias.view(1, dim, cfg.per_dim_filters)  # (1, I, G)
                hi, lo = w * inf["max"].unsqueeze(-1), w * inf["min"].unsqueeze(-1)  # (B, I, G)
                pooled = {"max": torch.maximum(hi, lo) + b, "min": torch.minimum(hi, lo) + b}
            else:
                z = conv(x).view(batch, dim, cfg.per_dim_filters, -1)  # (B, I, G, T')
                m = _window_mask(mask, width, z.shape[-1]).view(batch, 1, 1, -1)  # (B,1,1,T')
                pooled = max_min(z, m)  # (B, I, G) each
            # tanh is increasing: max/min-pool the pre-activations, then tanh the pooled
            # values; it skips tanh (and its backward) on the largest tensor of the model.
            per_dim.append({p: torch.tanh(v) for p, v in pooled.items()})  # (B, I, G)
        for p in POOLS_B:
            out[f"B{p}"] = torch.stack([h[p] for h in per_dim], dim=1)  # (B, W_B, I, G)
        return out

    def _features(self, s0: dict[str, torch.Tensor], s1: dict[str, torch.Tensor]) -> torch.Tensor:
        """The structured similarity layer. Shape: -> (B, N)"""
        feats: list[torch.Tensor] = []
        for p in POOLS_A:
            a0, a1 = s0[f"A{p}"], s1[f"A{p}"]  # (B, W, F)
            # Horizontal: per filter, the vector over window sizes.
            feats += cos_l2_l1(a0, a1, dim=1, l1=False)  # (B, F) x2
            # Vertical: every pair of window sizes, whole filter vectors.
            pairs = cos_l2_l1(a0.unsqueeze(2), a1.unsqueeze(1))  # (B, W, W) x3
            feats += [f.flatten(1) for f in pairs]
            feats += [f.unsqueeze(1) for f in cos_l2_l1(s0[f"Ainf{p}"], s1[f"Ainf{p}"])]
        for p in POOLS_B:
            b0, b1 = s0[f"B{p}"], s1[f"B{p}"]  # (B, W_B, I, G)
            # Vertical, per window and filter: the vector over input dimensions.
            feats += [f.flatten(1) for f in cos_l2_l1(b0, b1, dim=2)]
        return torch.cat(feats, dim=1)  # (B, N)

    def _encode(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        lmask, rmask = batch.left_mask, batch.right_mask
        left = self.token_encoder(batch.left_ids, lmask)  # (B, L, d)
        right = self.token_encoder(batch.right_ids, rmask)  # (B, R, d)
        out: dict[str, torch.Tensor] = {}
        if self.config.attention:
            left, right, out["left_attention"], out["right_attention"] = attention_input(
                left, lmask, right, rmask
            )  # (B, L, 2d), (B, R, 2d)
        out["features"] = self._features(self._sentence(left, lmask), self._sentence(right, rmask))
        return out

    def forward(self, batch: PairBatch) -> torch.Tensor:
        features = self._encode(batch)["features"]  # (B, N)
        return self.mlp(self.dropout(features))  # (B, C)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """The attention input layer's weights "left_attention" (B, L), "right_attention" (B, R);
        empty for the plain MP-CNN."""
        out = self._encode(batch)
        return {k: v for k, v in out.items() if k.endswith("attention")}


register_preset(
    "mpcnn_attention",
    model="mpcnn",
    overrides={"attention": True},
    description="Attention-based MP-CNN (He et al., SemEval 2016): attention input layer + MP-CNN",
)
register_preset(
    "mpcnn",
    model="mpcnn",
    overrides={"attention": False},
    description="MP-CNN (He et al., EMNLP 2015), the attention ablation",
)
