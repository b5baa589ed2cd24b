"""HCRN: Hermitian co-attention recurrent network.

Paper:
    Tay, Luu, Hui, "Hermitian Co-Attention Networks for Text Matching in Asymmetrical Domains",
    IJCAI 2018 (https://www.ijcai.org/proceedings/2018/615).

Summary: word vectors -> projection u = ReLU(W_p w + b) (eq. 1, n units) -> shared BiLSTM (eq. 2,
d = 2n) -> optional Hermitian intra-attention (eq. 9, output [x'; x]) -> affinity matrix s between
the two texts -> co-attention pooling -> sum into one vector per side -> cosine (ranking) or
[a; b] -> 2-layer MLP (classification) (§3.5).

Affinities (`affinity=`), all with x the encoder states and p(x) = ReLU(W x + b) (one layer,
shared by both sides):
- "real" (eq. 3, vanilla co-attention): s_ij = p(a_i) . p(b_j).
- "hermitian" (eq. 7): complexify a = x + i p(x); s_ij = Re<a_i, b_j> = Re(conj(a_i)^T b_j)
  = x_ai . x_bj + p(x_ai) . p(x_bj).
  Note: the real part of the Hermitian inner product is symmetric, Re<a, b> = Re<b, a>: the
  conjugate only flips the sign of the imaginary part, which `Re` discards. So with "hermitian",
  s(a, b) = s(b, a)^T exactly; the asymmetry the paper argues for (§3.3) lives in Im<a, b>, which
  eq. 7 drops. (tests/models/test_hcrn.py checks both facts.)
- "hermitian_bilinear" (eq. 8): s_ij = Re(a_i^T M b_j) with a learned complex M (d x d), no
  conjugate, as written. Not symmetric unless M is.
- "complex_diagonal" (ours, ComplEx-style): s_ij = Re(sum_k a_ik w_k conj(b_jk)) with a learned
  complex w (d); antisymmetric in its imaginary part, so s(a, b) != s(b, a)^T in general.

Implementation: complex numbers as explicit real/imaginary halves [Re; Im] of a real tensor, and
each complex affinity as one real bilinear form [x_a; p_a] K [x_b; p_b]^T with K built from the
complex parameters (for eq. 8, K = [[M_r, -M_i], [-M_i, -M_r]]). This is one matmul in float32
with plain autograd; the tests check it against torch's complex dtype on hand examples.

Pooling (`pooling=`): "alignment" (eq. 4: beta_i = sum_j softmax_j(s_ij) b_j, alpha_j =
sum_i softmax_i(s_ij) a_i) or "extractive" (eq. 5: softmax over max-pooled rows/columns).

Deviations from the paper / decisions (see docs/models.md, HCRN):
- Aggregation: with alignment pooling the left vector is sum_i beta_i (the right text as aligned
  to each real left token) and the right vector sum_j alpha_j; the paper only says "sum".
- Intra-attention (eq. 9) uses its own complexification layer p'(x) and has no distance bias;
  its output [x'; x] (2d) feeds the co-attention.
- Initialisation: PyTorch's defaults and xavier for M, not the paper's N(0, 0.01) (WikiQA/TrecQA)
  or xavier everywhere (SciTail).
- Dropout (config.dropout, the paper's 1 - keep-prob) after the projection, after the encoder
  and inside the MLP head.
- L2 regularisation is the optimiser's weight decay (training config), not part of the model.

Inference: `Matcher.predict` on the CPU runs `models/fast/hcrn.py` instead (the same outputs up
to float rounding).

Dims: B batch, L left length, R right length, E embedding size, n projection size,
d = 2n BiLSTM state size, D co-attention input size (d, or 2d with intra-attention), F the
width of one side's affinity factor, C outputs, U distinct texts of one side of a window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.coattention import alignment_pool, extractive_pool
from attnmatch.nn.exporting import exporting
from attnmatch.nn.heads import HeadKind, PairHead, resolve_head
from attnmatch.nn.masking import masked_softmax
from attnmatch.nn.recurrent import BiRNN, encode_pair

AffinityKind = Literal["real", "hermitian", "hermitian_bilinear", "complex_diagonal"]


@dataclass(frozen=True, kw_only=True)
class HCRNConfig:
    """Args:
    encoder: the token encoder (input layer).
    hidden_size: n, the projection size and the BiLSTM units per direction (d = 2n; the paper's
        d = 100 gives n = 50).
    affinity: "real" (eq. 3), "hermitian" (eq. 7), "hermitian_bilinear" (eq. 8) or
        "complex_diagonal" (ours).
    pooling: "alignment" (eq. 4; the paper's choice for WikiQA, TrecQA and SciTail) or
        "extractive" (eq. 5; Twitter).
    intra: Hermitian intra-attention after the encoder (eq. 9).
    head: "auto" (cosine for one output, MLP otherwise), "cosine" or "mlp".
    mlp_hidden: h, units of the MLP head's two hidden layers.
    dropout: dropout rate (the paper's keep-probability 0.9 -> 0.1; SciTail 0.8 -> 0.2).
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    hidden_size: int = 50
    affinity: AffinityKind = "hermitian_bilinear"
    pooling: Literal["alignment", "extractive"] = "alignment"
    intra: bool = True
    head: HeadKind = "auto"
    mlp_hidden: int = 100
    dropout: float = 0.1
    num_outputs: int = 1

    def __post_init__(self) -> None:
        check_positive(self, "hidden_size", "mlp_hidden", "num_outputs")
        check_dropout(self.dropout)
        resolve_head(self.head, self.num_outputs)


class Complexify(nn.Module):
    """x -> [x; p(x)], the real and imaginary halves of x + i p(x), p(x) = ReLU(W x + b).

    Shape:
        x: (B, T, D) -> (B, T, 2D)
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, torch.relu(self.proj(x))], dim=-1)  # (B, T, 2D)


class Affinity(nn.Module):
    """The affinity matrix s between two sequences of states (eq. 3, 7, 8 or ComplEx-diagonal).

    Shape:
        a: (B, L, D), b: (B, R, D) -> (B, L, R)
    """

    def __init__(self, kind: AffinityKind, dim: int) -> None:
        super().__init__()
        self.kind = kind
        self.dim = dim
        if kind == "real":
            self.proj = nn.Linear(dim, dim)
        else:
            self.complexify = Complexify(dim)
        if kind == "hermitian_bilinear":
            self.m_real = nn.Parameter(torch.empty(dim, dim))
            self.m_imag = nn.Parameter(torch.empty(dim, dim))
            nn.init.xavier_uniform_(self.m_real)
            nn.init.xavier_uniform_(self.m_imag)
        elif kind == "complex_diagonal":
            # Starts as the plain Hermitian product plus a small antisymmetric part.
            self.w_real = nn.Parameter(torch.ones(dim))
            self.w_imag = nn.Parameter(torch.empty(dim).normal_(0.0, 0.1))

    def kernel(self) -> torch.Tensor | None:
        """K with s = [a_r; a_i] K [b_r; b_i]^T, or None for the identity (plain Hermitian)."""
        if self.kind == "hermitian_bilinear":
            # Re(a^T M b) = a_r M_r b_r - a_r M_i b_i - a_i M_i b_r - a_i M_r b_i
            top = torch.cat([self.m_real, -self.m_imag], dim=1)  # (D, 2D)
            bottom = torch.cat([-self.m_imag, -self.m_real], dim=1)  # (D, 2D)
            return torch.cat([top, bottom], dim=0)  # (2D, 2D)
        if self.kind == "complex_diagonal":
            # Re(sum_k a_k w_k conj(b_k)) = w_r (a_r b_r + a_i b_i) + w_i (a_r b_i - a_i b_r)
            wr, wi = _diagonal(self.w_real), _diagonal(self.w_imag)  # (D, D)
            return torch.cat(
                [torch.cat([wr, wi], dim=1), torch.cat([-wi, wr], dim=1)], dim=0
            )  # (2D, 2D)
        return None

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.kind == "real":
            return torch.relu(self.proj(a)) @ torch.relu(self.proj(b)).transpose(1, 2)  # (B, L, R)
        ca, cb = self.complexify(a), self.complexify(b)  # (B, L, 2D), (B, R, 2D)
        k = self.kernel()
        if k is not None:
            ca = ca @ k  # (B, L, 2D)
        return ca @ cb.transpose(1, 2)  # (B, L, R)


def _diagonal(w: torch.Tensor) -> torch.Tensor:
    """The diagonal matrix of `w`; on export the identity times `w` (the ONNX exporter has no
    `diag`), the same values. Shape: (D,) -> (D, D)"""
    if exporting():
        return torch.eye(len(w), dtype=w.dtype, device=w.device) * w  # (D, D)
    return torch.diag(w)  # (D, D)


class HermitianIntraAttention(nn.Module):
    """Eq. 9: x'_i = sum_j softmax_j(Re<a_i, a_j>) x_j over real j; output [x'; x].

    Shape:
        x: (B, T, D), mask: (B, T) -> (B, T, 2D) and the weights (B, T, T)
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.complexify = Complexify(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.complexify(x)  # (B, T, 2D)
        scores = c @ c.transpose(1, 2)  # (B, T, T), Re<a_i, a_j>
        cells = mask.unsqueeze(-1) & mask.unsqueeze(-2)  # (B, T, T)
        weights = masked_softmax(scores, cells, dim=-1)  # (B, T, T)
        return torch.cat([weights @ x, x], dim=-1), weights  # (B, T, 2D)


@register_model(
    "hcrn",
    config=HCRNConfig,
    paper="Tay et al. IJCAI 2018",
    explains=True,
)
class HCRN(nn.Module):
    """Hermitian co-attention recurrent network. Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: HCRNConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        n = config.hidden_size
        self.projection = nn.Linear(config.encoder.output_dim, n)
        self.rnn = BiRNN("lstm", n, n)
        self.dropout = nn.Dropout(config.dropout)
        dim = 2 * n
        self.intra = HermitianIntraAttention(dim) if config.intra else None
        if config.intra:
            dim *= 2
        self.affinity = Affinity(config.affinity, dim)
        self.head = PairHead(
            config.head, dim, config.mlp_hidden, config.num_outputs, config.dropout
        )

    def _encode(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        lmask, rmask = batch.left_mask, batch.right_mask
        left = self.token_encoder(batch.left_ids, lmask)  # (B, L, E)
        right = self.token_encoder(batch.right_ids, rmask)  # (B, R, E)
        left = self.dropout(torch.relu(self.projection(left)))  # (B, L, n)
        right = self.dropout(torch.relu(self.projection(right)))  # (B, R, n)
        hl, hr = encode_pair(self.rnn, left, lmask, right, rmask)  # (B, L, d), (B, R, d)
        hl, hr = self.dropout(hl), self.dropout(hr)
        out: dict[str, torch.Tensor] = {}
        if self.intra is not None:
            hl, out["left_intra"] = self.intra(hl, lmask)  # (B, L, 2d)
            hr, out["right_intra"] = self.intra(hr, rmask)  # (B, R, 2d)
        s = self.affinity(hl, hr)  # (B, L, R)
        out["affinity"] = s
        if self.config.pooling == "alignment":
            pooled = alignment_pool(s, hl, lmask, hr, rmask)
            out["left"] = (pooled["left_aligned"] * lmask.unsqueeze(-1)).sum(dim=1)  # (B, D)
            out["right"] = (pooled["right_aligned"] * rmask.unsqueeze(-1)).sum(dim=1)  # (B, D)
        else:
            pooled = extractive_pool(s, hl, lmask, hr, rmask)
            out["left"], out["right"] = pooled["left_pooled"], pooled["right_pooled"]  # (B, D)
        out["left_weights"], out["right_weights"] = pooled["left_weights"], pooled["right_weights"]
        return out

    def forward(self, batch: PairBatch) -> torch.Tensor:
        out = self._encode(batch)
        return self.head(out["left"], out["right"])  # (B, C)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """For plots: "affinity" (B, L, R); "left_weights"/"right_weights" ((B, L, R) each for
        alignment pooling: softmax over right and over left tokens; (B, L) and (B, R) for
        extractive pooling); with intra-attention "left_intra" (B, L, L), "right_intra" (B, R, R).
        """
        out = self._encode(batch)
        return {k: v for k, v in out.items() if k not in ("left", "right")}


def _preset(name: str, description: str, **overrides: object) -> None:
    register_preset(name, model="hcrn", overrides=dict(overrides), description=description)


_preset(
    "hcrn",
    "HCRN (Tay et al. 2018): complex bilinear co-attention + Hermitian intra-attention "
    "(Table 5 '+ With Intra', the Table 2 model)",
    affinity="hermitian_bilinear",
    intra=True,
)
_preset(
    "hcrn_bilinear",
    "HCRN ablation: complex bilinear co-attention (eq. 8), no intra-attention",
    affinity="hermitian_bilinear",
    intra=False,
)
_preset(
    "hcrn_complex",
    "HCRN ablation: Hermitian co-attention (eq. 7), no intra-attention",
    affinity="hermitian",
    intra=False,
)
_preset(
    "hcrn_real",
    "HCRN ablation: real (vanilla) co-attention (eq. 3), no intra-attention",
    affinity="real",
    intra=False,
)
_preset(
    "hcrn_diagonal",
    "HCRN with our complex-diagonal (ComplEx-style, asymmetric) affinity + intra-attention",
    affinity="complex_diagonal",
    intra=True,
)
