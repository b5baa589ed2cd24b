"""IARNN: inner-attention recurrent networks, with the GRU and OARNN baselines.

Paper:
    Wang, Liu, Zhao, "Inner Attention based Recurrent Neural Networks for Answer Selection",
    ACL 2016 (https://aclanthology.org/P16-1122).

Summary: word vectors -> one GRU shared by question and answer (bidirectional by default) ->
question vector r_q = masked mean of the question's states -> answer vector r_a by variant ->
similarity(r_q, r_a) (cosine for WikiQA/TrecQA, GESD for InsuranceQA), trained with a max-margin
hinge (eq. 9; margins 0.15 WikiQA, 0.1 TrecQA, 0.12 InsuranceQA: a training setting).

Variants (`variant=`), with x_t the answer's word vectors and h_a(t) its GRU states:
- "gru": r_a = masked mean of h_a. No attention.
- "oarnn" (eq. 2-3, outer attention): m(t) = tanh(W_hm h_a(t) + W_qm r_q),
  s_t = masked softmax_t(w_ms . m(t)), r_a = sum_t s_t h_a(t).
- "iarnn_word" (eq. 4): alpha_t = sigmoid(r_q^T M_qi x_t), the GRU runs over alpha_t x_t,
  r_a = masked mean.
- "iarnn_context" (eq. 6): per direction, w_C(t) = M_hc h_{t-1} + M_qc r_q,
  alpha_t = sigmoid(w_C(t)^T x_t), the GRU input is alpha_t x_t. Needs a step loop (h_{t-1}
  feeds the attention); see "Speed".
- "iarnn_gate" (eq. 7): the GRU's update and reset gates get + M_qz r_q and + M_qf r_q.
`occam=True` (eq. 8, WORD and CONTEXT only): the model records the auxiliary training term
n_p * sum_t alpha_t with n_p = max(w_qp^T r_q, lambda_q), which the trainer adds to the loss
(`auxiliary_terms()`; see attnmatch.losses.auxiliary_loss).

Speed:
- GRU, OARNN, WORD: `nn.GRU` over packed sequences (cuDNN on GPU). WORD runs the fused kernel
  after the attention, on alpha_t x_t.
- GATE: r_q is constant over time, so + M_q r_q is a per-example gate bias. It runs on the same
  fused kernel by appending r_q to every input step, with input weights [W_ih, [M_qf; M_qz; 0]]
  built in `forward` (the candidate block's r_q columns are a constant zero, not parameters).
- CONTEXT: `_ContextGRU`, one step loop for both directions at once over the real tokens only
  (packed, longest sequence first, so the batch shrinks as answers end), with a hand-written
  backward (BPTT: local derivatives in bulk, one matmul a step, W_hh's gradient as one matmul).
  What does not depend on h_{t-1} is computed for all steps in bulk before the loop: W_ih x_t,
  because the input gates are linear in the input (W_ih (alpha_t x_t) = alpha_t (W_ih x_t)),
  and the attention's two factors M_hc^T x_t and (M_qc r_q) . x_t. Each step is then one
  (n, H) x (H, 3H) matmul, one dot product and the gate arithmetic. Training: 2.6x the
  autograd step loop (`_gru_loop`, still run with `use_fused = False`) on one thread.
- `Matcher.predict` on the CPU in float32 runs `predict_encoded` (WORD, CONTEXT, GATE; the
  attribute `encoded_inference = False` switches it off): pairs in length-sorted windows, each
  distinct question encoded once (r_q), each answer's GRU run per pair from r_q, packed by
  length with no padding (`_gru_scan`: both directions at once, one matmul of
  [h_{t-1}; 1; x_t] a step, the question's terms folded in); equal to `forward` up to float
  rounding.
- `use_fused = False` (a module attribute, for benchmarks) runs every variant through the
  autograd step loop `_gru_loop`, to time the fused kernels against it.
  tests/models/test_iarnn.py checks every path against a literal step-by-step reference of
  eq. 5-7 to 1e-5, the gradients of each fast path against the step loop's, and CONTEXT's
  backward against finite differences.

Deviations from the paper / decisions (see docs/models.md, IARNN):
- The GRU cell is PyTorch's: h_t = (1 - z_t) n_t + z_t h_{t-1}, n_t = tanh(W_in x_t + b_in +
  r_t (W_hn h_{t-1} + b_hn)), with biases. Eq. 5 puts the reset gate f_t before W_hh and z_t on
  the new state; both are reparametrisations of the same family. GATE's M_qf adds to the reset
  gate r_t and M_qz to the update gate z_t.
- Bidirectional: each direction has its own attention matrices where they act on that
  direction's state (CONTEXT's M_hc and M_qc, GATE's M_qz and M_qf); CONTEXT's alpha_t differs
  per direction. WORD's and OARNN's attention is shared. `attention()` reports CONTEXT's
  weights as the mean of the two directions.
- Occam: the paper's J*_i = J_i + n_p^i sum_t alpha_t^i does not say which answer's alpha; we
  add n_p sum_t alpha_t (mean over directions for CONTEXT) for every answer in the batch,
  averaged over pairs.
- Dropout (the paper: "applied to every parameter", 30%) on the word vectors and on the GRU
  states; not on the attention parameters.
- Initialisation as the paper: every weight matrix (each GRU gate block separately) rescaled to
  largest singular value 1 (Pascanu et al. 2013); biases zero.
- Embeddings: GloVe 6B 50d here (the paper: word2vec 100d, fixed on WikiQA, 50d trained on
  TrecQA); the token encoder's `trainable` is a training-table setting.

Dims: B batch, L question length, R answer length, E word vector size, H hidden size per
direction, D directions (1 or 2), Q = D H the sentence vector size, C outputs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

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
from attnmatch.nn.heads import HeadKind, PairHead, resolve_head
from attnmatch.nn.masking import masked_mean, masked_softmax
from attnmatch.nn.recurrent import PackPlan, encode_pair, pack_plan, packed_state_index

Variant = Literal["gru", "oarnn", "iarnn_word", "iarnn_context", "iarnn_gate"]
VARIANTS: tuple[str, ...] = ("gru", "oarnn", "iarnn_word", "iarnn_context", "iarnn_gate")
_OCCAM_VARIANTS = ("iarnn_word", "iarnn_context")
_ENCODED_VARIANTS = ("iarnn_word", "iarnn_context", "iarnn_gate")  # with `predict_encoded`


@dataclass(frozen=True, kw_only=True)
class IARNNConfig:
    """Args:
    encoder: the token encoder (input layer).
    variant: "gru", "oarnn", "iarnn_word", "iarnn_context" or "iarnn_gate".
    hidden_size: H, GRU units per direction (paper: 165 WikiQA, 80 TrecQA, 145 InsuranceQA).
    bidirectional: a bidirectional GRU (the paper) or a forward one (§5.1's one-directional
        OARNN).
    occam: the Occam regulariser (eq. 8) as an auxiliary term; WORD and CONTEXT only.
    occam_lambda: lambda_q, the floor of the per-question penalty weight n_p (paper: 0.05).
    occam_reduction: "sum" (eq. 8: n_p sum_t alpha_t) or "mean" (ours: n_p mean_t alpha_t,
        the same penalty divided by the answer's length).
    head: "auto" (cosine for one output, MLP otherwise), "cosine", "gesd", "aesd" or "mlp".
    mlp_hidden: units of the MLP head's two hidden layers (classification only).
    dropout: dropout on the word vectors and the GRU states (paper: 0.3).
    num_outputs: 1 for a ranking score, the number of classes for classification.
    """

    encoder: TokenEncoderConfig
    variant: Variant = "iarnn_gate"
    hidden_size: int = 80
    bidirectional: bool = True
    occam: bool = False
    occam_lambda: float = 0.05
    occam_reduction: Literal["sum", "mean"] = "sum"
    head: HeadKind = "auto"
    mlp_hidden: int = 100
    dropout: float = 0.3
    num_outputs: int = 1

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose one of {VARIANTS}")
        for name in ("hidden_size", "mlp_hidden", "num_outputs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.occam and self.variant not in _OCCAM_VARIANTS:
            raise ValueError(
                f"occam=True regularises attention weights, which only {_OCCAM_VARIANTS} have "
                f"(the paper does not regularise GATE); got variant={self.variant!r}"
            )
        if self.occam_lambda < 0:
            raise ValueError(f"occam_lambda must be >= 0, got {self.occam_lambda}")
        resolve_head(self.head, self.num_outputs)


def _unit_spectral_(weight: torch.Tensor, blocks: int = 1) -> None:
    """Rescales each of `blocks` row blocks of `weight` to largest singular value 1, in place
    (a meta tensor, built to check shapes, has no values to rescale)."""
    if weight.is_meta:
        return
    with torch.no_grad():
        for block in weight.chunk(blocks, dim=0):
            block.div_(torch.linalg.matrix_norm(block, ord=2).clamp(min=1e-12))


def reverse_padded(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Reverses each sequence's real tokens in place of its padding-free prefix.

    Shape:
        x: (B, T, ...), mask: (B, T) right-padded -> (B, T, ...); padding stays where it was
        (its values are copies of real positions; callers mask them).
    """
    steps = x.shape[1]
    lengths = mask.sum(dim=1, keepdim=True)  # (B, 1)
    pos = torch.arange(steps, device=x.device).unsqueeze(0)  # (1, T)
    index = torch.where(pos < lengths, lengths - 1 - pos, pos)  # (B, T)
    index = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


def gru_gates(gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """One GRU update from the input and hidden projections, PyTorch's gate order (r, z, n).

    Shape:
        gi, gh: (..., 3H), h: (..., H) -> (..., H)
    """
    i_r, i_z, i_n = gi.chunk(3, dim=-1)
    h_r, h_z, h_n = gh.chunk(3, dim=-1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (h - n)  # = (1 - z) n + z h


def _gru_loop(
    proj: torch.Tensor,
    mask: torch.Tensor,
    w_hh: torch.Tensor,
    b_hh: torch.Tensor,
    *,
    input_bias: torch.Tensor,
    attn_h: torch.Tensor | None = None,
    attn_c: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A GRU step loop over D directions at once, on precomputed input projections.

    Input gates at step t are alpha_t proj_t + input_bias, with alpha_t = sigmoid(h_{t-1} .
    attn_h_t + attn_c_t) when attn_h is given (IARNN-CONTEXT) and 1 otherwise. Every direction's
    sequences are already in its reading order (backward ones reversed within their length).

    Shape:
        proj: (D, B, T, 3H) = W_ih x_t, mask: (B, T), w_hh: (D, 3H, H), b_hh: (D, 3H),
        input_bias: (D, B, 3H) or (D, 1, 3H), attn_h: (D, B, T, H), attn_c: (D, B, T)
        -> states (D, B, T, H) zero on padding, alpha (D, B, T) or None
    """
    dirs, batch, steps, _ = proj.shape
    h = proj.new_zeros(dirs, batch, w_hh.shape[-1])  # (D, B, H)
    w_hh_t = w_hh.transpose(1, 2)  # (D, H, 3H)
    b_hh = b_hh.unsqueeze(1)  # (D, 1, 3H)
    states, alphas = [], []
    for t in range(steps):
        gi = proj[:, :, t]  # (D, B, 3H)
        if attn_h is not None and attn_c is not None:
            alpha = torch.sigmoid((h * attn_h[:, :, t]).sum(-1) + attn_c[:, :, t])  # (D, B)
            alphas.append(alpha)
            gi = alpha.unsqueeze(-1) * gi
        gh = torch.baddbmm(b_hh, h, w_hh_t)  # (D, B, 3H)
        new = gru_gates(gi + input_bias, gh, h)  # (D, B, H)
        step_mask = mask[:, t].view(1, batch, 1)  # (1, B, 1)
        states.append(new * step_mask)
        h = torch.where(step_mask, new, h)
    out = torch.stack(states, dim=2)  # (D, B, T, H)
    alpha_out = torch.stack(alphas, dim=2) * mask if alphas else None  # (D, B, T)
    return out, alpha_out


class _ContextGRU(torch.autograd.Function):
    """IARNN-CONTEXT's GRU over packed sequences (`PackPlan`: step t's rows continue the first
    rows of step t-1), both directions at once, h_{-1} = 0, with a hand-written backward.

    Step t: alpha_t = sigmoid(h_{t-1} . a_t + c_t), input gates alpha_t p_t + b_ih, then
    PyTorch's GRU cell: r, z = sigmoid(.), n = tanh(. + r (W_hn h_{t-1} + b_hn)),
    h_t = n + z (h_{t-1} - n). The forward keeps the activations; the backward is BPTT with
    the local derivatives in bulk, one (n, 3H) x (3H, H) matmul a step, and W_hh's gradient
    as one matmul over all steps. Computed in float32 or float64 (autocast off). First-order
    only.

    Shape:
        proj: (D, N, 3H) p_t = W_ih x_t, attn_h: (D, N, H) a_t = M_hc^T x_t,
        attn_c: (D, N) c_t = (M_qc r_q) . x_t, w_hh: (D, 3H, H), b_ih, b_hh: (D, 3H)
        -> states (D, N, H), alpha (D, N)
    """

    @staticmethod
    def forward(
        ctx: Any,
        proj: torch.Tensor,
        attn_h: torch.Tensor,
        attn_c: torch.Tensor,
        w_hh: torch.Tensor,
        b_ih: torch.Tensor,
        b_hh: torch.Tensor,
        batch_sizes: list[int],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(proj.device.type, enabled=False):
            dtype = torch.promote_types(proj.dtype, torch.float32)  # float16/bf16 -> float32
            proj, attn_h, attn_c, w_hh, b_ih, b_hh = (
                t.to(dtype) for t in (proj, attn_h, attn_c, w_hh, b_ih, b_hh)
            )
            dirs, rows, three_h = proj.shape
            hid = three_h // 3
            first = batch_sizes[0] if batch_sizes else 0
            hidden = proj.new_empty(dirs, rows, hid)  # h_t
            alpha = proj.new_empty(dirs, rows)  # alpha_t
            gates = proj.new_empty(dirs, rows, three_h)  # r_t, z_t, n_t
            gh_n = proj.new_empty(dirs, rows, hid)  # W_hn h_{t-1} + b_hn
            w_hh_t = w_hh.transpose(1, 2)  # (D, H, 3H)
            b_ih_, b_hh_ = b_ih.unsqueeze(1), b_hh.unsqueeze(1)  # (D, 1, 3H)
            h_prev = proj.new_zeros(dirs, first, hid)  # h_{-1} = 0
            start = 0
            for size in batch_sizes:
                end = start + size
                hp = h_prev[:, :size]  # (D, n, H)
                a = alpha[:, start:end]  # (D, n)
                score = torch.mul(hp, attn_h[:, start:end]).sum(-1)  # (D, n)
                torch.add(score, attn_c[:, start:end], out=a).sigmoid_()
                gi = torch.addcmul(b_ih_, a.unsqueeze(-1), proj[:, start:end])  # (D, n, 3H)
                gh = torch.baddbmm(b_hh_, hp, w_hh_t)  # (D, n, 3H)
                g = gates[:, start:end]  # (D, n, 3H)
                torch.add(gi[..., : 2 * hid], gh[..., : 2 * hid], out=g[..., : 2 * hid]).sigmoid_()
                gh_n[:, start:end] = gh[..., 2 * hid :]
                n = g[..., 2 * hid :]
                torch.addcmul(gi[..., 2 * hid :], g[..., :hid], gh[..., 2 * hid :], out=n).tanh_()
                h_prev = torch.lerp(n, hp, g[..., hid : 2 * hid], out=hidden[:, start:end])
                start = end
        ctx.save_for_backward(proj, attn_h, w_hh, hidden, alpha, gates, gh_n)
        ctx.batch_sizes = batch_sizes
        return hidden, alpha

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, grad_hidden: torch.Tensor, grad_alpha: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        proj, attn_h, w_hh, hidden, alpha, gates, gh_n = ctx.saved_tensors
        sizes: list[int] = ctx.batch_sizes
        with torch.autocast(proj.device.type, enabled=False):
            grad_hidden, grad_alpha = grad_hidden.to(proj.dtype), grad_alpha.to(proj.dtype)
            dirs, rows, three_h = proj.shape
            hid = three_h // 3
            first = sizes[0] if sizes else 0
            steps = torch.tensor(sizes, dtype=torch.long)
            prev_row = torch.arange(first, rows) - steps[:-1].repeat_interleave(steps[1:])
            prev_row = prev_row.to(proj.device)  # (N - S_0,) the row of h_{t-1}
            h_prev = torch.cat([hidden.new_zeros(dirs, first, hid), hidden[:, prev_row]], 1)
            r, z, n = gates.split(hid, dim=-1)  # (D, N, H) each
            # Local derivatives in bulk: d pre_n / dh_t, d pre_z / dh_t, d pre_r / d pre_n,
            # d score / d alpha.
            coef_n = (1 - z) * (1 - n * n)  # (D, N, H)
            coef_z = (h_prev - n) * z * (1 - z)
            coef_r = gh_n * r * (1 - r)
            coef_a = alpha * (1 - alpha)  # (D, N)
            grad_gi = proj.new_empty(dirs, rows, three_h)  # d input gates
            grad_gh = proj.new_empty(dirs, rows, three_h)  # d (W_hh h_{t-1} + b_hh)
            grad_score = proj.new_empty(dirs, rows)  # d (h_{t-1} . a_t + c_t)
            dh_next = proj.new_zeros(dirs, first, hid)  # dh_t through step t+1
            end = rows
            for t in range(len(sizes) - 1, -1, -1):
                size = sizes[t]
                start = end - size
                dh = torch.add(grad_hidden[:, start:end], dh_next[:, :size])  # (D, n, H)
                gi, gh = grad_gi[:, start:end], grad_gh[:, start:end]  # (D, n, 3H)
                torch.mul(dh, coef_n[:, start:end], out=gi[..., 2 * hid :])
                torch.mul(dh, coef_z[:, start:end], out=gi[..., hid : 2 * hid])
                torch.mul(gi[..., 2 * hid :], coef_r[:, start:end], out=gi[..., :hid])
                gh[..., : 2 * hid] = gi[..., : 2 * hid]
                torch.mul(gi[..., 2 * hid :], r[:, start:end], out=gh[..., 2 * hid :])
                ds = grad_score[:, start:end]  # (D, n)
                torch.sum(gi * proj[:, start:end], dim=-1, out=ds)
                ds.add_(grad_alpha[:, start:end]).mul_(coef_a[:, start:end])
                if t > 0:
                    dhp = torch.baddbmm(dh * z[:, start:end], gh, w_hh)  # (D, n, H)
                    dh_next[:, :size] = dhp.addcmul_(ds.unsqueeze(-1), attn_h[:, start:end])
                end = start
            needs = ctx.needs_input_grad
            grad_proj = grad_gi * alpha.unsqueeze(-1) if needs[0] else None  # (D, N, 3H)
            grad_attn_h = grad_score.unsqueeze(-1) * h_prev if needs[1] else None  # (D, N, H)
            grad_w_hh = None
            if needs[3]:  # sum_t dgh_t^T h_{t-1}; h_{-1} = 0
                grad_w_hh = grad_gh[:, first:].transpose(1, 2) @ h_prev[:, first:]  # (D, 3H, H)
            grad_b_ih = grad_gi.sum(dim=1) if needs[4] else None  # (D, 3H)
            grad_b_hh = grad_gh.sum(dim=1) if needs[5] else None
        return grad_proj, grad_attn_h, grad_score, grad_w_hh, grad_b_ih, grad_b_hh, None


# Sequences per `_gru_scan` call in `IARNN.predict_encoded`: a step's gates then stay in cache.
_SCAN_CHUNK = 256


@dataclass(frozen=True)
class _Packing:
    """The packed, step-major layout of S sequences for `_gru_scan`: step t holds one row per
    sequence still running, longest sequence first, so the rows of step t continue the first
    rows of step t-1; a backward direction reads each sequence reversed within its length.

    `_gru_scan` keeps its states with the next step's inputs, in S_0 + N rows (S_0 = the
    non-empty sequences): row k < S_0 holds h_0 and x_0 of the k-th longest sequence, row
    S_0 + p holds h_t of packed row p (step t) and x_{t+1} of the same sequence, if it goes on.

    Attributes:
        order: (S,) the sequences, longest first (ties keep their order).
        seq: (N,) the sequence of each packed row (the same in every direction).
        feed: (S_0 + N,) for each row of the scan's buffer, the packed row whose token it
            holds (0 where none: the rows of last steps).
        pos: (D, N) the position in its sequence of each packed row's token, per direction.
        batch_sizes: rows per step (non-increasing).
    """

    order: torch.Tensor
    seq: torch.Tensor
    feed: torch.Tensor
    pos: torch.Tensor
    batch_sizes: list[int]


def _packing(lengths: torch.Tensor, dirs: int) -> _Packing:
    """The packed layout (`_Packing`) of sequences of `lengths` (S,) for D directions."""
    order = torch.argsort(lengths, descending=True, stable=True)  # (S,)
    sorted_lengths = lengths[order]  # (S,)
    longest = int(sorted_lengths[0]) if len(lengths) else 0
    t = torch.arange(longest).unsqueeze(1)  # (T', 1)
    running = t < sorted_lengths.unsqueeze(0)  # (T', S): step t of the k-th longest sequence
    step = t.expand_as(running)[running]  # (N,)
    slot = torch.arange(len(lengths)).expand_as(running)[running]  # (N,) place in its step
    seq = order.unsqueeze(0).expand_as(running)[running]  # (N,)
    pos = torch.stack([step, lengths[seq] - 1 - step][:dirs])  # (D, N)
    sizes = running.sum(dim=1)  # (T',)
    following = torch.cat([sizes[1:], sizes.new_zeros(1)])[step]  # (N,) rows of step t+1
    rows = torch.arange(len(seq))  # (N,)
    feed = torch.cat(
        [
            torch.arange(int(sizes[0]) if longest else 0),
            torch.where(slot < following, rows + sizes[step], 0),
        ]
    )  # (S_0 + N,)
    return _Packing(order, seq, feed, pos, sizes.tolist())


def _step_weights(
    w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor, b_hh: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The GRU's weights as `_gru_scan` reads them: one matmul of [h_{t-1}; 1; x_t] gives the
    r and z pre-activations (input and hidden parts summed, both biases) and W_hn h_{t-1} + b_hn;
    W_in x_t + b_in, from [1; x_t], is computed for every step at once.

    Shape:
        w_ih: (D, 3H, E), w_hh: (D, 3H, H), b_ih, b_hh: (D, 3H)
        -> step weight (D, H+1+E, 3H), [b_in; W_in^T] (D, 1+E, H), b_in (D, 1, H)
    """
    hid = w_hh.shape[-1]
    w_x = w_ih.transpose(1, 2).clone()  # (D, E, 3H)
    w_x[..., 2 * hid :] = 0  # the candidate's input part is added apart, outside r * (...)
    bias = torch.cat([b_ih[:, : 2 * hid] + b_hh[:, : 2 * hid], b_hh[:, 2 * hid :]], dim=1)
    weight = torch.cat([w_hh.transpose(1, 2), bias.unsqueeze(1), w_x], dim=1)  # (D, H+1+E, 3H)
    b_in = b_ih[:, 2 * hid :].unsqueeze(1)  # (D, 1, H)
    return weight, torch.cat([b_in, w_ih[:, 2 * hid :].transpose(1, 2)], dim=1), b_in


def _gru_scan(
    inputs: torch.Tensor,
    weight: torch.Tensor,
    gates_n: torch.Tensor,
    batch_sizes: list[int],
    *,
    gate_bias: torch.Tensor | None = None,
    attention: torch.Tensor | None = None,
    b_in: torch.Tensor | None = None,
) -> torch.Tensor:
    """A GRU over D directions of packed sequences (`_Packing`) from h_0 = 0, without autograd;
    returns each sequence's sum of states.

    Step t is one matmul, g = [h_{t-1}; 1; x_t] `weight` (`_step_weights`), then PyTorch's
    cell: r, z = sigmoid(g_r), sigmoid(g_z) (+ `gate_bias`, GATE's per-sequence terms, before
    the sigmoid), n = tanh(W_in x_t + b_in + r g_n), h_t = n + z (h_{t-1} - n). The rows
    [h_{t-1}; 1; x_t] are those of `inputs` (`_Packing.feed`'s layout): step t writes h_t
    into the rows of its own packed rows, next to x_{t+1}. With `attention` (IARNN-CONTEXT)
    x_t is first scaled by alpha_t = sigmoid([h_{t-1}; 1] . attention_t), and `gates_n`, then
    W_in x_t, by alpha_t before b_in is added.

    Shape:
        inputs: (D, S_0+N, H+1+E) [0; 1; x] in `feed`'s layout, overwritten;
        weight: (D, H+1+E, 3H), gates_n: (D, S_0+N, H) W_in x (+ b_in), likewise;
        gate_bias: (D, S_0, 2H) longest first; attention: (D, S_0+N, H+1); b_in: (D, 1, H)
        -> (D, S_0, H), longest first
    """
    hid = gates_n.shape[-1]
    seqs = batch_sizes[0] if batch_sizes else 0
    total = inputs.new_zeros(inputs.shape[0], seqs, hid)  # (D, S_0, H)
    read, write = 0, seqs  # the buffer rows of step t's inputs and states
    for size in batch_sizes:
        step_in = inputs[:, read : read + size]  # (D, n, H+1+E) [h_{t-1}; 1; x_t]
        g_n = gates_n[:, read : read + size]  # (D, n, H)
        if attention is not None and b_in is not None:
            score = (step_in[..., : hid + 1] * attention[:, read : read + size]).sum(-1)
            alpha = score.sigmoid_().unsqueeze(-1)  # (D, n, 1)
            step_in[..., hid + 1 :].mul_(alpha)
            g_n = torch.addcmul(b_in, alpha, g_n)  # (D, n, H)
        g = torch.bmm(step_in, weight)  # (D, n, 3H)
        rz = g[..., : 2 * hid]  # (D, n, 2H)
        if gate_bias is not None:
            rz.add_(gate_bias[:, :size])
        rz.sigmoid_()
        cand = torch.addcmul(g_n, rz[..., :hid], g[..., 2 * hid :]).tanh_()  # (D, n, H)
        h = torch.lerp(
            cand, step_in[..., :hid], rz[..., hid:], out=inputs[:, write : write + size, :hid]
        )
        total[:, :size] += h
        read, write = write, write + size
    return total


@register_model(
    "iarnn",
    config=IARNNConfig,
    tasks=("ranking", "classification"),
    paper="Wang et al. ACL 2016",
    explains=True,
    auxiliary_loss=True,
)
class IARNN(nn.Module):
    """GRU, OARNN and the IARNN variants. Returns (B, num_outputs) scores/logits."""

    def __init__(self, config: IARNNConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        emb, hid = config.encoder.output_dim, config.hidden_size
        dirs = 2 if config.bidirectional else 1
        qdim = dirs * hid
        self.rnn = nn.GRU(emb, hid, batch_first=True, bidirectional=config.bidirectional)
        self.dropout = nn.Dropout(config.dropout)
        variant = config.variant
        if variant == "oarnn":
            self.w_hm = nn.Linear(qdim, qdim, bias=False)
            self.w_qm = nn.Linear(qdim, qdim, bias=False)
            self.w_ms = nn.Linear(qdim, 1, bias=False)
        elif variant == "iarnn_word":
            self.m_qi = nn.Parameter(torch.empty(qdim, emb))
        elif variant == "iarnn_context":
            self.m_hc = nn.Parameter(torch.empty(dirs, emb, hid))  # w_C gets M_hc h_{t-1}
            self.m_qc = nn.Parameter(torch.empty(dirs, emb, qdim))  # and M_qc r_q
        elif variant == "iarnn_gate":
            self.m_qf = nn.Parameter(torch.empty(dirs, hid, qdim))  # reset gate (eq. 7's f)
            self.m_qz = nn.Parameter(torch.empty(dirs, hid, qdim))  # update gate
        self.w_qp = nn.Parameter(torch.zeros(qdim)) if config.occam else None
        self.occam_lambda = config.occam_lambda
        self.occam_mean = config.occam_reduction == "mean"
        self.head = PairHead(
            config.head, qdim, config.mlp_hidden, config.num_outputs, config.dropout
        )
        self.use_fused = True  # benchmarks set False to time the step loop against the kernel
        # `Matcher.predict` on the CPU runs `predict_encoded` (off: `forward` per batch).
        self.encoded_inference = variant in _ENCODED_VARIANTS
        self._auxiliary: dict[str, torch.Tensor] = {}
        self._init_weights()

    def _init_weights(self) -> None:
        for name, param in self.rnn.named_parameters():
            if name.startswith("weight"):
                _unit_spectral_(param, blocks=3)
            else:
                nn.init.zeros_(param)
        for name, param in self.named_parameters():
            if name.startswith(("m_", "w_hm", "w_qm", "w_ms")):
                if param.dim() == 2:
                    nn.init.normal_(param)
                    _unit_spectral_(param)
                else:
                    for block in param:
                        nn.init.normal_(block)
                        _unit_spectral_(block)
        if self.w_qp is not None:
            nn.init.normal_(self.w_qp, std=self.w_qp.shape[0] ** -0.5)

    # ---- recurrences -------------------------------------------------------------------------
    def _directions(self) -> list[str]:
        return ["", "_reverse"] if self.config.bidirectional else [""]

    def _gru_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-direction GRU weights stacked: W_ih (D, 3H, E), W_hh (D, 3H, H), b_ih, b_hh (D, 3H)."""
        rnn, sfx = self.rnn, self._directions()
        return (
            torch.stack([getattr(rnn, f"weight_ih_l0{s}") for s in sfx]),
            torch.stack([getattr(rnn, f"weight_hh_l0{s}") for s in sfx]),
            torch.stack([getattr(rnn, f"bias_ih_l0{s}") for s in sfx]),
            torch.stack([getattr(rnn, f"bias_hh_l0{s}") for s in sfx]),
        )

    def _fused(
        self, x: torch.Tensor, mask: torch.Tensor, gate_q: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The packed `nn.GRU` kernel; with `gate_q` (B, Q), GATE's r_q columns appended.

        Shape:
            x: (B, T, E), mask: (B, T) -> (B, T, Q), zero on padding
        """
        steps = x.shape[1]
        lengths = mask.sum(dim=1).clamp(min=1).cpu()  # (B,) empty sequences get one masked step
        if gate_q is None:
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.rnn(packed)
        else:
            aug = torch.cat([x, gate_q.unsqueeze(1).expand(-1, steps, -1)], dim=-1)  # (B,T,E+Q)
            packed = pack_padded_sequence(aug, lengths, batch_first=True, enforce_sorted=False)
            hid = self.config.hidden_size
            weights: list[torch.Tensor] = []
            for d, sfx in enumerate(self._directions()):
                zeros = gate_q.new_zeros(hid, gate_q.shape[-1])  # the candidate block: no r_q
                w_q = torch.cat([self.m_qf[d], self.m_qz[d], zeros])  # (3H, Q)
                w_ih = torch.cat([getattr(self.rnn, f"weight_ih_l0{sfx}"), w_q], dim=1)
                weights += [
                    w_ih,
                    getattr(self.rnn, f"weight_hh_l0{sfx}"),
                    getattr(self.rnn, f"bias_ih_l0{sfx}"),
                    getattr(self.rnn, f"bias_hh_l0{sfx}"),
                ]
            h0 = x.new_zeros(len(self._directions()), x.shape[0], hid)
            # `train`: with dropout 0 it changes no value, but cuDNN keeps what its backward
            # needs only when it is True (on the CPU it makes no difference). The weights are
            # built for this call, so cuDNN's note that it packs them per call is expected.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="RNN module weights are not part")
                data, _ = torch.gru(
                    packed.data,
                    packed.batch_sizes,
                    h0,
                    weights,
                    True,
                    1,
                    0.0,
                    torch.is_grad_enabled(),
                    self.config.bidirectional,
                )
            out = PackedSequence(
                data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices
            )
        padded, _ = pad_packed_sequence(out, batch_first=True, total_length=steps)  # (B, T, Q)
        return padded * mask.unsqueeze(-1)

    def _loop(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        *,
        scale: torch.Tensor | None = None,
        gate_q: torch.Tensor | None = None,
        context_q: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The step loop: input scale alpha (WORD), gate bias (GATE) or context attention.

        Shape:
            x: (B, T, E), mask: (B, T), scale: (B, T), gate_q / context_q: (B, Q)
            -> states (B, T, Q) zero on padding, CONTEXT's alpha (B, T, D) or None
        """
        w_ih, w_hh, b_ih, b_hh = self._gru_weights()
        dirs = w_ih.shape[0]
        seqs = [x, reverse_padded(x, mask)][:dirs]
        xd = torch.stack(seqs)  # (D, B, T, E)
        proj = torch.einsum("dbte,dge->dbtg", xd, w_ih)  # (D, B, T, 3H)
        if scale is not None:
            scales = torch.stack([scale, reverse_padded(scale, mask)][:dirs])  # (D, B, T)
            proj = proj * scales.unsqueeze(-1)
        input_bias = b_ih.unsqueeze(1)  # (D, 1, 3H)
        if gate_q is not None:
            zeros = torch.zeros_like(self.m_qf)  # (D, H, Q)
            w_q = torch.cat([self.m_qf, self.m_qz, zeros], dim=1)  # (D, 3H, Q)
            input_bias = input_bias + torch.einsum("dgq,bq->dbg", w_q, gate_q)  # (D, B, 3H)
        attn_h = attn_c = None
        if context_q is not None:
            attn_h = torch.einsum("dbte,deh->dbth", xd, self.m_hc)  # (D, B, T, H)
            w_c = torch.einsum("deq,bq->dbe", self.m_qc, context_q)  # (D, B, E)
            attn_c = torch.einsum("dbte,dbe->dbt", xd, w_c)  # (D, B, T)
        states, alpha = _gru_loop(
            proj, mask, w_hh, b_hh, input_bias=input_bias, attn_h=attn_h, attn_c=attn_c
        )  # (D, B, T, H), (D, B, T)
        parts = [states[0]]
        if dirs == 2:
            parts.append(reverse_padded(states[1], mask))
        out = torch.cat(parts, dim=-1) * mask.unsqueeze(-1)  # (B, T, Q)
        if alpha is None:
            return out, None
        alphas = [alpha[0]] + ([reverse_padded(alpha[1], mask)] if dirs == 2 else [])
        return out, torch.stack(alphas, dim=-1) * mask.unsqueeze(-1)  # (B, T, Q), (B, T, D)

    def _context(
        self, x: torch.Tensor, mask: torch.Tensor, r_q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """IARNN-CONTEXT's recurrence on the real tokens only (`_ContextGRU`): what does not
        depend on h_{t-1} (W_ih x_t, M_hc^T x_t, (M_qc r_q) . x_t) in bulk, then the packed
        step loop with its hand-written backward.

        Shape:
            x: (B, T, E), mask: (B, T), r_q: (B, Q) -> states (B, T, Q), alpha (B, T, D),
            both zero on padding
        """
        w_ih, w_hh, b_ih, b_hh = self._gru_weights()
        dirs = w_ih.shape[0]
        batch, steps, emb = x.shape
        both = pack_plan(mask.sum(dim=1), steps)  # both directions' rows
        token = both.token[: dirs * (len(both.token) // 2)].to(x.device)  # (D*N,)
        plan = PackPlan(token, both.batch_sizes)
        tokens = x.reshape(-1, emb).index_select(0, plan.token).view(dirs, -1, emb)  # (D, N, E)
        proj = torch.bmm(tokens, w_ih.transpose(1, 2))  # (D, N, 3H)
        attn_h = torch.bmm(tokens, self.m_hc)  # (D, N, H)
        w_c = torch.einsum("deq,bq->dbe", self.m_qc, r_q)  # (D, B, E)
        attn_c = torch.einsum("bte,dbe->dbt", x, w_c).reshape(-1)  # (D*B*T,)
        offset = torch.arange(dirs, device=x.device).repeat_interleave(len(plan.token) // dirs)
        attn_c = attn_c.index_select(0, plan.token + offset * batch * steps).view(dirs, -1)
        states, alpha = _ContextGRU.apply(
            proj, attn_h, attn_c, w_hh, b_ih, b_hh, plan.batch_sizes
        )  # (D, N, H), (D, N)
        where = packed_state_index(plan, dirs)  # (D*N,) rows of (B*T*D, ...)
        hid = w_hh.shape[-1]
        out = states.new_zeros(batch * steps * dirs, hid).index_copy(
            0, where, states.reshape(-1, hid)
        )
        alphas = alpha.new_zeros(batch * steps * dirs).index_copy(0, where, alpha.reshape(-1))
        return out.view(batch, steps, dirs * hid), alphas.view(batch, steps, dirs)

    # ---- whole-input inference ---------------------------------------------------------------
    def predict_encoded(self, data: EncodedPairs, batch_size: int) -> torch.Tensor:
        """Outputs for every pair of `data`, in its order: the inference path of
        `Matcher.predict` on the CPU (WORD, CONTEXT and GATE). Run it in eval mode under
        `torch.inference_mode`.

        The pairs are taken in length-sorted windows (`attnmatch.models._windows`). Shared:
        once per distinct text of a window its token vectors (word vectors: of its real tokens
        only), and for a question its GRU states and r_q; once per distinct question GATE's
        gate terms M_qf r_q and M_qz r_q, WORD's M_qi^T r_q, CONTEXT's M_qc r_q. The answer's
        recurrence depends on r_q, so it runs per pair: all the pairs of the window, whatever
        `batch_size`, `_SCAN_CHUNK` at a time, sorted by answer length and packed (`_Packing`:
        no padding, no masking), both directions at once, each step one matmul of
        [h_{t-1}; 1; x_t] (`_step_weights`: the r and z input parts and the biases inside), GATE's
        terms added to r and z, WORD's alpha_t applied to x_t beforehand. Then r_a = the mean of
        the states, and the head on `batch_size` pairs at a time. The answer's W_ih x_t is
        computed per pair, not per distinct answer (a ranking's answers are rarely repeated).
        The outputs equal `forward`'s on the same pairs up to float rounding
        (tests/models/test_iarnn_inference.py).

        Shape:
            -> (N, num_outputs) float32
        """
        if self.config.variant not in _ENCODED_VARIANTS:
            raise ValueError(f"predict_encoded runs {_ENCODED_VARIANTS}, not {self.config.variant}")
        outputs = torch.empty(len(data), self.config.num_outputs)  # (N, num_outputs)

        def window(pairs: np.ndarray) -> None:  # (W,) pair indices
            left = window_texts(data, data.left[pairs])  # U_l texts
            right = window_texts(data, data.right[pairs])  # U_r texts
            questions = torch.from_numpy(left.rows)  # (W,) each pair's question
            r_q = self._question_vectors(left)  # (U_l, Q)
            r_a = self._answer_vectors(right, r_q, questions)  # (W, Q)
            for rows in batch_rows(len(pairs), batch_size):  # (b,)
                index = torch.from_numpy(rows)  # (b,)
                u = r_q.index_select(0, questions.index_select(0, index))  # (b, Q)
                scores = self.head(u, r_a.index_select(0, index))  # (b, num_outputs)
                outputs[torch.from_numpy(pairs[rows])] = scores

        run_windows(window, inference_windows(data, batch_size))
        return outputs

    def _question_vectors(self, texts: WindowTexts) -> torch.Tensor:
        """r_q of each distinct question: the mean of its GRU states.

        Shape:
            -> (U, Q)
        """
        return self._state_means(texts, torch.arange(len(texts.lengths)))

    def _answer_vectors(
        self, texts: WindowTexts, r_q: torch.Tensor, questions: torch.Tensor
    ) -> torch.Tensor:
        """r_a of each pair of a window: the mean of its answer's GRU states, run with its
        question's r_q.

        Shape:
            r_q: (U_l, Q), questions: (W,) rows of r_q -> (W, Q)
        """
        answers = torch.from_numpy(texts.rows)  # (W,)
        variant = self.config.variant
        if variant == "iarnn_gate":
            gate_q = torch.cat([self.m_qf, self.m_qz], dim=1)  # (D, 2H, Q)
            gate = torch.einsum("dgq,uq->dug", gate_q, r_q)  # (D, U_l, 2H) M_qf r_q, M_qz r_q
            return self._state_means(texts, answers, questions, gate=gate)
        if variant == "iarnn_word":
            v = r_q @ self.m_qi  # (U_l, E): alpha_t = sigmoid(x_t . v)
            return self._state_means(texts, answers, questions, word=v)
        w_c = torch.einsum("deq,uq->due", self.m_qc, r_q)  # (D, U_l, E) M_qc r_q
        return self._state_means(texts, answers, questions, context=w_c)

    def _token_vectors(self, texts: WindowTexts) -> tuple[torch.Tensor, torch.Tensor]:
        """The token vectors of a window's distinct texts as rows, their real tokens only, text
        after text, and the row of each text's first token.

        Shape:
            -> (M, E), (U,)
        """
        x = self.token_encoder(texts.ids, texts.mask)  # (U, T, E)
        lengths = torch.from_numpy(texts.lengths)  # (U,)
        real = texts.mask.reshape(-1).nonzero().squeeze(1)  # (M,) faster than a boolean index
        flat = x.reshape(-1, x.shape[-1]).index_select(0, real)  # (M, E)
        return flat, torch.cumsum(lengths, 0) - lengths  # (M, E), (U,)

    def _state_means(
        self,
        texts: WindowTexts,
        text_rows: torch.Tensor,
        questions: torch.Tensor | None = None,
        *,
        gate: torch.Tensor | None = None,
        word: torch.Tensor | None = None,
        context: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The mean GRU state of S sequences, each the text `text_rows[s]` of `texts`, through
        `_gru_scan` `_SCAN_CHUNK` sequences at a time, sorted by length. GATE's `gate` (M_qf r_q,
        M_qz r_q), WORD's `word` (M_qi^T r_q) and CONTEXT's `context` (M_qc r_q) are read at row
        `questions[s]`.

        Shape:
            text_rows: (S,), questions: (S,), gate: (D, U_l, 2H), word: (U_l, E),
            context: (D, U_l, E) -> (S, D*H)
        """
        weight, w_in, b_in = _step_weights(*self._gru_weights())
        flat_x, first = self._token_vectors(texts)  # (M, E), (U,)
        dirs, hid, emb = w_in.shape[0], w_in.shape[-1], flat_x.shape[-1]
        lengths = torch.from_numpy(texts.lengths).index_select(0, text_rows)  # (S,)
        by_length = torch.argsort(lengths, descending=True, stable=True)  # (S,)
        means = flat_x.new_zeros(len(lengths), dirs, hid)  # (S, D, H)
        buffer: torch.Tensor | None = None
        for chunk in by_length.split(_SCAN_CHUNK):  # (S',)
            pack = _packing(lengths[chunk], dirs)
            seqs = chunk[pack.seq[pack.feed]]  # (S_0+N,) the sequence of each buffer row
            at = first[text_rows[seqs]] + pack.pos[:, pack.feed]  # (D, S_0+N) rows of flat_x
            tokens = flat_x.index_select(0, at.view(-1)).view(dirs, -1, emb)  # (D, S_0+N, E)
            gate_bias = attention = None
            if gate is not None and questions is not None:
                gate_bias = gate.index_select(1, questions[chunk[pack.order]])  # (D, S', 2H)
            # The scan's buffer [h; 1; x_t]: h is 0 in the first S_0 rows (h_0), written by
            # the scan in the others. One buffer for all chunks (the first, of the longest
            # texts, is the largest): its memory is touched once, not once a chunk.
            rows = tokens.shape[1]
            if buffer is None or buffer.shape[1] < rows:
                buffer = tokens.new_empty(dirs, rows, hid + 1 + emb)
                buffer[..., hid] = 1
            inputs = buffer[:, :rows]  # (D, S_0+N, H+1+E)
            inputs[:, : pack.batch_sizes[0] if pack.batch_sizes else 0, :hid] = 0
            if word is not None and questions is not None:
                v = word.index_select(0, questions[seqs])  # (S_0+N, E)
                score = (tokens * v).sum(-1, keepdim=True)  # (D, S_0+N, 1)
                torch.mul(tokens, score.sigmoid_(), out=inputs[..., hid + 1 :])  # alpha_t x_t
            else:
                inputs[..., hid + 1 :] = tokens
            if context is not None and questions is not None:
                w_c = context.index_select(1, questions[seqs])  # (D, S_0+N, E) M_qc r_q
                m_hc = torch.cat([self.m_hc, self.m_hc.new_zeros(dirs, emb, 1)], dim=-1)
                attention = torch.bmm(tokens, m_hc)  # (D, S_0+N, H+1) [M_hc^T x_t; 0]
                attention[..., hid] = (tokens * w_c).sum(-1)  # x_t . M_qc r_q
                gates_n = torch.bmm(tokens, w_in[:, 1:])  # (D, S_0+N, H) W_in x_t
            else:
                gates_n = torch.bmm(inputs[..., hid:], w_in)  # (D, S_0+N, H) W_in x_t + b_in
            total = _gru_scan(
                inputs,
                weight,
                gates_n,
                pack.batch_sizes,
                gate_bias=gate_bias,
                attention=attention,
                b_in=b_in,
            )  # (D, S_0, H) longest first
            ordered = chunk[pack.order[: total.shape[1]]]  # (S_0,) an empty text's mean is 0
            count = lengths[ordered].to(flat_x.dtype).view(1, -1, 1)  # (1, S_0, 1)
            means[ordered] = (total / count).transpose(0, 1)  # (S_0, D, H)
        return means.reshape(len(lengths), dirs * hid)  # (S, Q)

    # ---- the model ---------------------------------------------------------------------------
    def _encode(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        cfg, lmask, rmask = self.config, batch.left_mask, batch.right_mask
        left = self.dropout(self.token_encoder(batch.left_ids, lmask))  # (B, L, E)
        right = self.dropout(self.token_encoder(batch.right_ids, rmask))  # (B, R, E)
        fused = self.use_fused
        out: dict[str, torch.Tensor] = {}
        if cfg.variant in ("gru", "oarnn") and fused:
            # No question attention inside the GRU: both sides in one packed call.
            hq, ha = encode_pair(self._fused, left, lmask, right, rmask)  # (B, L, Q), (B, R, Q)
        else:
            hq = self._fused(left, lmask) if fused else self._loop(left, lmask)[0]  # (B, L, Q)
        hq = self.dropout(hq)
        r_q = masked_mean(hq, lmask.unsqueeze(-1), dim=1)  # (B, Q)
        alpha: torch.Tensor | None = None
        if cfg.variant in ("gru", "oarnn"):
            if not fused:
                ha = self._loop(right, rmask)[0]  # (B, R, Q)
        elif cfg.variant == "iarnn_word":
            alpha = torch.sigmoid(right @ (r_q @ self.m_qi).unsqueeze(-1)).squeeze(-1)  # (B, R)
            alpha = alpha * rmask
            if fused:
                ha = self._fused(right * alpha.unsqueeze(-1), rmask)  # (B, R, Q)
            else:
                ha = self._loop(right, rmask, scale=alpha)[0]
        elif cfg.variant == "iarnn_gate":
            if fused:
                ha = self._fused(right, rmask, gate_q=r_q)  # (B, R, Q)
            else:
                ha = self._loop(right, rmask, gate_q=r_q)[0]
        else:  # iarnn_context
            alpha_dirs: torch.Tensor | None
            if fused:
                ha, alpha_dirs = self._context(right, rmask, r_q)  # (B, R, Q), (B, R, D)
            else:
                ha, alpha_dirs = self._loop(right, rmask, context_q=r_q)
            assert alpha_dirs is not None
            out["right_attention_directions"] = alpha_dirs
            alpha = alpha_dirs.mean(dim=-1)  # (B, R)
        ha = self.dropout(ha)
        if cfg.variant == "oarnn":
            m_t = torch.tanh(self.w_hm(ha) + self.w_qm(r_q).unsqueeze(1))  # (B, R, Q)
            alpha = masked_softmax(self.w_ms(m_t).squeeze(-1), rmask, dim=-1)  # (B, R)
            r_a = (alpha.unsqueeze(-1) * ha).sum(dim=1)  # (B, Q)
        else:
            r_a = masked_mean(ha, rmask.unsqueeze(-1), dim=1)  # (B, Q)
        out["left"], out["right"] = r_q, r_a
        if alpha is not None:
            out["right_attention"] = alpha
        return out

    def forward(self, batch: PairBatch) -> torch.Tensor:
        out = self._encode(batch)
        if self.training and self.w_qp is not None:
            n_p = torch.clamp(out["left"] @ self.w_qp, min=self.occam_lambda)  # (B,)
            mass = out["right_attention"].sum(dim=-1)  # (B,) alpha is zero on padding
            if self.occam_mean:
                mass = mass / batch.right_mask.sum(dim=-1).clamp(min=1)  # (B,)
            self._auxiliary = {"occam": (n_p * mass).mean()}
        else:
            self._auxiliary = {}
        return self.head(out["left"], out["right"])  # (B, C)

    def auxiliary_terms(self) -> dict[str, torch.Tensor]:
        """The auxiliary training terms of the last forward pass ({"occam": scalar} in training
        with occam=True, else empty); the trainer adds them to the loss."""
        return dict(self._auxiliary)

    def attention(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        """Weights over the answer: "right_attention" (B, R) is OARNN's s_t or WORD's and
        CONTEXT's alpha_t (CONTEXT: the mean of the directions, each in
        "right_attention_directions" (B, R, D)); zero on padding. GRU and GATE have no
        per-token attention and return an empty dict."""
        out = self._encode(batch)
        return {k: v for k, v in out.items() if k.startswith("right_attention")}


def _preset(name: str, description: str, **overrides: object) -> None:
    register_preset(name, model="iarnn", overrides=dict(overrides), description=description)


_preset("gru", "GRU (IARNN paper baseline): shared BiGRU, mean pooling, cosine", variant="gru")
_preset("oarnn", "OARNN (IARNN paper eq. 2-3): outer attention over BiGRU states", variant="oarnn")
_preset(
    "oarnn_uni",
    "OARNN with a one-directional GRU (IARNN paper §5.1, Figure 5)",
    variant="oarnn",
    bidirectional=False,
)
_preset(
    "iarnn_word",
    "IARNN-WORD (eq. 4): question attention on the answer's word vectors",
    variant="iarnn_word",
)
_preset(
    "iarnn_occam_word",
    "IARNN-Occam(word): IARNN-WORD + the Occam regulariser (eq. 8)",
    variant="iarnn_word",
    occam=True,
)
_preset(
    "iarnn_context",
    "IARNN-CONTEXT (eq. 6): attention from r_q and h_{t-1}",
    variant="iarnn_context",
)
_preset(
    "iarnn_occam_context",
    "IARNN-Occam(context): IARNN-CONTEXT + the Occam regulariser (eq. 8)",
    variant="iarnn_context",
    occam=True,
)
_preset(
    "iarnn_gate",
    "IARNN-GATE (eq. 7): r_q in the GRU's update and reset gates",
    variant="iarnn_gate",
)
