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
- CONTEXT: `attnmatch.nn.context_gru`, a packed step loop over the real tokens only with a
  hand-written backward (2.6x the autograd step loop in training on one thread).
- `fused=False` (for benchmarks and tests) runs every variant through the autograd step loop
  `_gru_loop`. `Matcher.predict` on the CPU runs `models/fast/iarnn.py` (WORD, CONTEXT, GATE).
  tests/models/test_iarnn.py checks every path against a literal step-by-step reference of
  eq. 5-7 to 1e-5, and the gradients of each fast path against the step loop's.

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
from typing import Literal

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from attnmatch.configs import check_dropout, check_positive
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.context_gru import context_gru, context_gru_loop
from attnmatch.nn.exporting import exporting
from attnmatch.nn.heads import HeadKind, PairHead, resolve_head
from attnmatch.nn.masking import masked_mean, masked_softmax
from attnmatch.nn.recurrent import encode_pair

Variant = Literal["gru", "oarnn", "iarnn_word", "iarnn_context", "iarnn_gate"]
VARIANTS: tuple[str, ...] = ("gru", "oarnn", "iarnn_word", "iarnn_context", "iarnn_gate")
_OCCAM_VARIANTS = ("iarnn_word", "iarnn_context")


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
    fused: the fused GRU kernels (see "Speed"); False: the autograd step loop, the reference.
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
    fused: bool = True

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose one of {VARIANTS}")
        check_positive(self, "hidden_size", "mlp_hidden", "num_outputs")
        check_dropout(self.dropout)
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
        if exporting() and attn_h is not None and attn_c is not None:
            # Scripted, so the exported loop runs over the input's length (`nn.exporting`).
            states, alpha = context_gru_loop()(proj, mask, w_hh, b_hh, input_bias, attn_h, attn_c)
        else:
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

    def _encode(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        cfg, lmask, rmask = self.config, batch.left_mask, batch.right_mask
        left = self.dropout(self.token_encoder(batch.left_ids, lmask))  # (B, L, E)
        right = self.dropout(self.token_encoder(batch.right_ids, rmask))  # (B, R, E)
        fused = cfg.fused
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
            if fused and not exporting():  # export: the scripted step loop of `_loop`
                ha, alpha_dirs = context_gru(
                    right, rmask, r_q, self._gru_weights(), self.m_hc, self.m_qc
                )  # (B, R, Q), (B, R, D)
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
