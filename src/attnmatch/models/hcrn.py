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

Inference: `Matcher.predict` on the CPU in float32 runs `predict_encoded` instead of `forward`
per batch: the pairs sorted by length, everything that depends on one text (token vectors,
projection, BiLSTM by exact length, intra-attention, each side's factor of the affinity) computed
once per distinct text of a window of pairs, then the affinity, pooling and head per batch; equal
to `forward` up to float rounding (`encoded_inference = False` switches it off).

Dims: B batch, L left length, R right length, E embedding size, n projection size,
d = 2n BiLSTM state size, D co-attention input size (d, or 2d with intra-attention), F the
width of one side's affinity factor, C outputs, U distinct texts of one side of a window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models import _windows
from attnmatch.models._registry import register_model, register_preset
from attnmatch.models._windows import (
    WindowTexts,
    batch_rows,
    inference_windows,
    run_windows,
    window_texts,
)
from attnmatch.nn.coattention import alignment_pool, extractive_pool
from attnmatch.nn.heads import HeadKind, PairHead, resolve_head
from attnmatch.nn.masking import masked_softmax
from attnmatch.nn.recurrent import BiRNN, bilstm_by_length, encode_pair

AffinityKind = Literal["real", "hermitian", "hermitian_bilinear", "complex_diagonal"]

# `predict_encoded`: added to the affinity of a cell per padded token of it, so that a softmax
# gives the cell exactly zero weight next to a real one; twice it stays finite in float32.
_PADDED = -1e30
# `predict_encoded`: pairs matched at a time, at most (fewer with a smaller batch size): a
# batch's right-text encodings then stay in cache (at 512 pairs they take ~10 MB and the
# throughput drops by a third).
_MATCH_CHUNK = 64
# `predict_encoded`: pairs encoded together, at least. Larger than the shared default: a left
# text (with its costly product by the kernel K) is encoded once per window, and a question's
# candidates are spread over the length-sorted windows (WikiQA test: 1,673 left texts encoded
# with windows of 2,048 pairs, 633 with 8,192).
_WINDOW = 8192
# `predict_encoded`: the window's distinct left texts pass intra-attention and the affinity
# factor in chunks of this many, each cut to its longest text.
_TEXT_CHUNK = 64
# `predict_encoded`: the window's distinct right texts go through the token encoder and the
# BiLSTM in chunks of this many (sorted by length), each padded to its longest text.
_RIGHT_CHUNK = 256


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
        for name in ("hidden_size", "mlp_hidden", "num_outputs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
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
            wr, wi = torch.diag(self.w_real), torch.diag(self.w_imag)  # (D, D)
            return torch.cat(
                [torch.cat([wr, wi], dim=1), torch.cat([-wi, wr], dim=1)], dim=0
            )  # (2D, 2D)
        return None

    def factor(self, x: torch.Tensor, side: Literal["left", "right"]) -> torch.Tensor:
        """One text's factor of the affinity: s(a, b) = factor(a, "left") @ factor(b, "right")^T.
        Left: p(a) (real), [a; p(a)] (hermitian) or [a; p(a)] K; right: p(b) or [b; p(b)].

        Shape:
            x: (..., T, D) -> (..., T, F)
        """
        if self.kind == "real":
            return torch.relu(self.proj(x))  # (..., T, D)
        c = self.complexify(x)  # (..., T, 2D)
        if side == "right" or self.kind == "hermitian":
            return c
        if self.kind == "complex_diagonal":  # the product by K, elementwise
            p = c[..., self.dim :]  # (..., T, D)
            return torch.cat(
                [x * self.w_real - p * self.w_imag, x * self.w_imag + p * self.w_real], dim=-1
            )  # (..., T, 2D)
        k = self.kernel()
        assert k is not None
        return c @ k  # (..., T, 2D)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.kind == "real":
            return torch.relu(self.proj(a)) @ torch.relu(self.proj(b)).transpose(1, 2)  # (B, L, R)
        ca, cb = self.complexify(a), self.complexify(b)  # (B, L, 2D), (B, R, 2D)
        k = self.kernel()
        if k is not None:
            ca = ca @ k  # (B, L, 2D)
        return ca @ cb.transpose(1, 2)  # (B, L, R)


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
    tasks=("ranking", "classification", "regression"),
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
        # `Matcher.predict` on the CPU runs `predict_encoded` (off: `forward` per batch).
        self.encoded_inference = True

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

    def predict_encoded(self, data: EncodedPairs, batch_size: int) -> torch.Tensor:
        """Outputs for every pair of `data`, in its order: the inference path of
        `Matcher.predict` on the CPU. Run it in eval mode under `torch.inference_mode`.

        The pairs are taken in length-sorted windows of at least `_WINDOW` pairs (with more
        than one thread: of `INFERENCE_WINDOW`, run side by side; `attnmatch.models._windows`),
        and each distinct text of a window is encoded once:
        token vectors, projection and BiLSTM states (by exact length, `bilstm_by_length`; the
        right texts in length-sorted chunks of `_RIGHT_CHUNK`, each padded to its longest),
        intra-attention (eq. 9 is within one text) and its side's factor of the affinity
        (`Affinity.factor`: the complexified states, times the kernel K on the left). The left
        texts' factors are computed for the window at once; the pairs then run in the order of
        their right texts, at most min(`batch_size`, `_MATCH_CHUNK`) at a time, so that a
        batch's right texts are consecutive rows, encoded there (in pieces [x'; h; p(x)], never
        concatenated) and still in cache when matched. Per pair only the affinity (batched
        matmuls of the factors, padding masked by adding `_PADDED`), the pooling and the head
        remain. Alignment pooling sums the softmax weights over the real tokens before
        multiplying by the states (sum_i beta_i = (sum_i softmax_j(s_ij)) b). Deviation:
        a `batch_size` above `_MATCH_CHUNK` changes nothing (each pair's output is its own).
        The outputs equal `forward`'s on the same pairs up to float rounding
        (tests/models/test_hcrn_inference.py).

        Shape:
            -> (N, num_outputs) float32
        """
        outputs = torch.empty(len(data), self.config.num_outputs)  # (N, num_outputs)

        def window(pairs: np.ndarray) -> None:  # (W,) pair indices
            left = window_texts(data, data.left[pairs])  # U_l texts
            right = window_texts(data, data.right[pairs])  # U_r texts
            # The right texts in chunks of `_RIGHT_CHUNK`, each padded to its longest.
            bounds = [*range(0, len(right.lengths), _RIGHT_CHUNK), len(right.lengths)]
            spans = list(zip(bounds[:-1], bounds[1:], strict=True))
            states = bilstm_by_length(
                self.rnn,
                [(self._projected(left, 0, len(left.lengths)), left.lengths)]
                + [(self._projected(right, lo, hi), right.lengths[lo:hi]) for lo, hi in spans],
            )  # (U_l, L, d), then (c, R_c, d) per chunk
            left_enc, left_at = self._encode_left(states[0], left)  # (U_l, L, W_l)
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
                    xs, factor = self._encode_right(right_states[first:last, :steps], right_mask)
                    if last - first < len(texts):  # a right text in several pairs
                        index = torch.from_numpy(texts - first)  # (b,)
                        xs = [x.index_select(0, index) for x in xs]  # (b, R', *)
                        factor = [f.index_select(0, index) for f in factor]  # (b, R', *)
                        right_mask = right_mask.index_select(0, index)  # (b, R')
                    scores = self._match(a, left_mask, left_at, xs, factor, right_mask)
                    outputs[torch.from_numpy(pairs[positions])] = scores  # (b, C)

        # One thread: windows of `_WINDOW`; more: windows of the shared default, which run side
        # by side (`run_windows`; 2 threads: ~1.1x over one window of 8,192 on WikiQA test).
        size = _WINDOW if torch.get_num_threads() <= 1 else min(_WINDOW, _windows.INFERENCE_WINDOW)
        run_windows(window, inference_windows(data, batch_size, size))
        return outputs

    def _match(
        self,
        a: torch.Tensor,
        left_mask: torch.Tensor,
        left_at: int,
        right: list[torch.Tensor],
        factor: list[torch.Tensor],
        right_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Affinity, pooling and head of a batch of pairs: the left texts as `_encode_texts`
        gives them (states from column `left_at`), the right texts as `_encode_right` does.

        Shape:
            a: (b, L, W_l), left_mask: (b, L), right: pieces (b, R, *) of (b, R, D),
            factor: pieces (b, R, *) of (b, R, F), right_mask: (b, R) -> (b, C)
        """
        hl = a[..., left_at : left_at + self.head_dim]  # (b, L, D)
        padded_l = (~left_mask).to(a.dtype) * _PADDED  # (b, L)
        padded_r = (~right_mask).to(a.dtype) * _PADDED  # (b, R)
        s = padded_l.unsqueeze(-1) + padded_r.unsqueeze(-2)  # (b, L, R)
        column = 0
        for piece in factor:  # s += a[:, :, piece's columns] @ piece^T
            width = piece.shape[-1]
            s = s.baddbmm_(a[..., column : column + width], piece.transpose(1, 2))  # (b, L, R)
            column += width
        if self.config.pooling == "alignment":
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
        return self.head(left_vec, right_vec)  # (b, C)

    @property
    def head_dim(self) -> int:
        """D, the size of the states the co-attention pools."""
        return 2 * self.config.hidden_size * (2 if self.intra is not None else 1)

    @property
    def affinity_width(self) -> int:
        """F, the width of one side's affinity factor (`Affinity.factor`)."""
        return self.head_dim * (1 if self.affinity.kind == "real" else 2)

    def _encode_texts(
        self, states: torch.Tensor, mask: torch.Tensor, side: Literal["left", "right"]
    ) -> tuple[torch.Tensor, int]:
        """Texts of one side as `_match` reads them: their affinity factor, then their
        co-attention states x unless the factor starts with them ([x; p(x)]); and the column
        where x starts.

        Shape:
            states: (U, T, d) BiLSTM states, mask: (U, T) -> (U, T, F [+ D]), int
        """
        x = states
        if self.intra is not None:
            x, _ = self.intra(x, mask)  # (U, T, D)
        factor = self.affinity.factor(x, side)  # (U, T, F)
        if self.affinity.kind == "real" or (side == "left" and self.affinity.kind != "hermitian"):
            return torch.cat([factor, x], dim=-1), factor.shape[-1]  # (U, T, F + D)
        return factor, 0

    def _projected(self, texts: WindowTexts, first: int, end: int) -> torch.Tensor:
        """u = ReLU(W_p w + b) (eq. 1) of a window's texts first..end-1, cut to their longest
        (at least 1 step); padding is not zeroed (the BiLSTM reads real tokens only).

        Shape:
            -> (c, T', n)
        """
        cut = max(int(texts.lengths[end - 1]), 1)  # the longest text (sorted by length)
        ids, mask = texts.ids[first:end, :cut], texts.mask[first:end, :cut]  # (c, T')
        return torch.relu(self.projection(self.token_encoder(ids, mask)))  # (c, T', n)

    def _encode_right(
        self, states: torch.Tensor, mask: torch.Tensor
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Right texts as `_match` reads them: their co-attention states x = [x'; h] (intra) or
        h, and their affinity factor p(x) (real) or [x; p(x)], both as pieces along the
        feature axis, never concatenated (p(x) as a sum of products with W's column blocks).

        Shape:
            states: (U, T, d) BiLSTM states h, mask: (U, T)
            -> pieces of (U, T, D) and of (U, T, F)
        """
        h = states.contiguous()  # (U, T, d)
        xs = [h]
        if self.intra is not None:
            q = torch.relu(self.intra.complexify.proj(h))  # (U, T, d)
            scores = torch.baddbmm(h @ h.transpose(1, 2), q, q.transpose(1, 2))  # (U, T, T)
            cells = mask.unsqueeze(-1) & mask.unsqueeze(-2)  # (U, T, T)
            xs = [masked_softmax(scores, cells, dim=-1) @ h, h]  # [x'; h], zero on padding
        if self.affinity.kind == "real":
            proj = self.affinity.proj
        else:
            proj = self.affinity.complexify.proj
        p = F.linear(xs[0], proj.weight[:, : xs[0].shape[-1]], proj.bias)  # (U, T, D)
        if len(xs) > 1:
            p.view(-1, p.shape[-1]).addmm_(
                xs[1].view(-1, xs[1].shape[-1]), proj.weight[:, xs[0].shape[-1] :].t()
            )  # (U*T, D)
        p = p.relu_()  # (U, T, D)
        return xs, ([p] if self.affinity.kind == "real" else [*xs, p])

    def _encode_left(self, states: torch.Tensor, texts: WindowTexts) -> tuple[torch.Tensor, int]:
        """`_encode_texts` of a window's left texts, in chunks of `_TEXT_CHUNK` (sorted by
        length) each cut to its longest text; zero beyond.

        Shape:
            states: (U, T, d) -> (U, T, F [+ D]), int
        """
        count, steps = texts.mask.shape
        encoded: torch.Tensor | None = None
        at = 0
        for start in range(0, count, _TEXT_CHUNK):
            end = min(start + _TEXT_CHUNK, count)
            cut = max(int(texts.lengths[end - 1]), 1)  # the chunk's longest text
            chunk, at = self._encode_texts(
                states[start:end, :cut], texts.mask[start:end, :cut], "left"
            )  # (n, T', W)
            if encoded is None:
                encoded = chunk.new_zeros(count, steps, chunk.shape[-1])  # (U, T, W)
            encoded[start:end, :cut] = chunk
        assert encoded is not None  # a window has a pair, so a left text
        return encoded, at

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """For plots: "affinity" (B, L, R); "left_weights"/"right_weights" ((B, L, R) each for
        alignment pooling: softmax over right and over left tokens; (B, L) and (B, R) for
        extractive pooling); with intra-attention "left_intra" (B, L, L), "right_intra" (B, R, R).
        """
        out = self._encode(batch)
        return {k: v for k, v in out.items() if k not in ("left", "right")}


def _gather(
    texts: WindowTexts, encoded: torch.Tensor, positions: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    """`texts.gather`, with whole rows copied (a contiguous `index_select`, several times
    faster than one of a cut view) and then cut.

    Shape:
        encoded: (U, T, W), positions: (b,) -> (b, T', W) view, (b, T') bool
    """
    index = torch.from_numpy(texts.rows[positions])  # (b,)
    steps = max(int(texts.lengths[texts.rows[positions]].max(initial=0)), 1)
    out = encoded.index_select(0, index)[:, :steps]  # (b, T', W)
    return out, texts.mask.index_select(0, index)[:, :steps]


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
