"""IARNN whole-input inference on the CPU (`Matcher.predict`, float32): WORD, CONTEXT and GATE.
The GRU and OARNN baselines keep `IARNN.forward` per batch.

The pairs are taken in length-sorted windows (`attnmatch.models.fast._windows`). Shared: once per
distinct text of a window its token vectors (word vectors: of its real tokens only), and for a
question its GRU states and r_q; once per distinct question GATE's gate terms M_qf r_q and
M_qz r_q, WORD's M_qi^T r_q, CONTEXT's M_qc r_q. The answer's recurrence depends on r_q, so it
runs per pair: all the pairs of the window, whatever `batch_size`, `_SCAN_CHUNK` at a time,
sorted by answer length and packed (`_Packing`: no padding, no masking), both directions at once,
each step one matmul of [h_{t-1}; 1; x_t] (`_step_weights`: the r and z input parts and the
biases inside), GATE's terms added to r and z, WORD's alpha_t applied to x_t beforehand,
CONTEXT's alpha_t from one product per step. Then r_a = the mean of the states, and the head on
`batch_size` pairs at a time. The answer's W_ih x_t is computed per pair, not per distinct answer
(a ranking's answers are rarely repeated). The outputs equal `IARNN.forward`'s on the same pairs
up to float rounding (tests/models/test_iarnn_inference.py).

Dims: N pairs, W pairs in a window, U distinct texts of one side, S sequences, M real tokens,
E word vector size, H hidden size per direction, D directions (1 or 2), Q = D H the sentence
vector size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnmatch.data.encoding import EncodedPairs
from attnmatch.models.fast._registry import register_inference
from attnmatch.models.fast._windows import (
    WindowTexts,
    batch_rows,
    inference_windows,
    run_windows,
    window_texts,
)
from attnmatch.models.iarnn import IARNN

ENCODED_VARIANTS = ("iarnn_word", "iarnn_context", "iarnn_gate")


def _applies(model: IARNN) -> bool:
    return model.config.variant in ENCODED_VARIANTS


@register_inference(IARNN, applies=_applies)
def predict_iarnn(model: IARNN, data: EncodedPairs, batch_size: int) -> torch.Tensor:
    """Outputs for every pair of `data`, in its order (WORD, CONTEXT and GATE): (N, num_outputs)
    float32. Run it in eval mode under `torch.inference_mode`."""
    if not _applies(model):
        raise ValueError(f"predict_iarnn runs {ENCODED_VARIANTS}, not {model.config.variant}")
    outputs = torch.empty(len(data), model.config.num_outputs)  # (N, num_outputs)

    def window(pairs: np.ndarray) -> None:  # (W,) pair indices
        left = window_texts(data, data.left[pairs])  # U_l texts
        right = window_texts(data, data.right[pairs])  # U_r texts
        questions = torch.from_numpy(left.rows)  # (W,) each pair's question
        r_q = _question_vectors(model, left)  # (U_l, Q)
        r_a = _answer_vectors(model, right, r_q, questions)  # (W, Q)
        for rows in batch_rows(len(pairs), batch_size):  # (b,)
            index = torch.from_numpy(rows)  # (b,)
            u = r_q.index_select(0, questions.index_select(0, index))  # (b, Q)
            scores = model.head(u, r_a.index_select(0, index))  # (b, num_outputs)
            outputs[torch.from_numpy(pairs[rows])] = scores

    run_windows(window, inference_windows(data, batch_size))
    return outputs


def _question_vectors(model: IARNN, texts: WindowTexts) -> torch.Tensor:
    """r_q of each distinct question: the mean of its GRU states.

    Shape:
        -> (U, Q)
    """
    return _state_means(model, texts, torch.arange(len(texts.lengths)))


def _answer_vectors(
    model: IARNN, texts: WindowTexts, r_q: torch.Tensor, questions: torch.Tensor
) -> torch.Tensor:
    """r_a of each pair of a window: the mean of its answer's GRU states, run with its
    question's r_q.

    Shape:
        r_q: (U_l, Q), questions: (W,) rows of r_q -> (W, Q)
    """
    answers = torch.from_numpy(texts.rows)  # (W,)
    variant = model.config.variant
    if variant == "iarnn_gate":
        gate_q = torch.cat([model.m_qf, model.m_qz], dim=1)  # (D, 2H, Q)
        gate = torch.einsum("dgq,uq->dug", gate_q, r_q)  # (D, U_l, 2H) M_qf r_q, M_qz r_q
        return _state_means(model, texts, answers, questions, gate=gate)
    if variant == "iarnn_word":
        v = r_q @ model.m_qi  # (U_l, E): alpha_t = sigmoid(x_t . v)
        return _state_means(model, texts, answers, questions, word=v)
    w_c = torch.einsum("deq,uq->due", model.m_qc, r_q)  # (D, U_l, E) M_qc r_q
    return _state_means(model, texts, answers, questions, context=w_c)


def _token_vectors(model: IARNN, texts: WindowTexts) -> tuple[torch.Tensor, torch.Tensor]:
    """The token vectors of a window's distinct texts as rows, their real tokens only, text
    after text, and the row of each text's first token.

    Shape:
        -> (M, E), (U,)
    """
    x = model.token_encoder(texts.ids, texts.mask)  # (U, T, E)
    lengths = torch.from_numpy(texts.lengths)  # (U,)
    real = texts.mask.reshape(-1).nonzero().squeeze(1)  # (M,) faster than a boolean index
    flat = x.reshape(-1, x.shape[-1]).index_select(0, real)  # (M, E)
    return flat, torch.cumsum(lengths, 0) - lengths  # (M, E), (U,)


def _state_means(
    model: IARNN,
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
    weight, w_in, b_in = _step_weights(*model._gru_weights())
    flat_x, first = _token_vectors(model, texts)  # (M, E), (U,)
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
            m_hc = torch.cat([model.m_hc, model.m_hc.new_zeros(dirs, emb, 1)], dim=-1)
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


# Sequences per `_gru_scan` call: a step's gates then stay in cache.
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
