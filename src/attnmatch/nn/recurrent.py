"""Bidirectional recurrent encoders over right-padded batches, exact under padding.

The backward direction of a bidirectional RNN must start at each sequence's last *real* token,
or padding leaks into every state. Every path below reads real tokens only, so a sequence's
outputs do not depend on how much padding it carries.

Why a hand-written LSTM. Measured on a 2-core x86 CPU (torch 2.13, H=50, WikiQA training
batches: 320 sequences of length ~20-80, ~40% real tokens), `nn.LSTM` was ~80% of MV-LSTM's
training step:
- over a `PackedSequence`, autograd slices the packed input once per time step and each slice's
  backward materialises a full-size zero tensor, so the backward grows quadratically with length;
- on the padded batch it goes to oneDNN, whose backward took ~50 ms per call: slower still;
- `torch.tanh` cost ~2.5 ns per float32 element then, ~6x `torch.sigmoid` (on torch 2.13 it is
  no slower than `torch.sigmoid`, 4.7 vs 6.0 µs for 16,000 floats, but `torch.tanh` for tanh(c_t)
  changed MV-LSTM's training by less than the noise, 0.98-1.01x, so the sigmoid form stays).
`_PackedBiLSTM` therefore: runs both directions together (one batched matmul per step); packs the
real tokens, longest sequence first, so the batch shrinks as sequences end (no work on padding);
computes every activation with a sigmoid (tanh(x) = 2 sigmoid(2x) - 1); and does the backward as
manual BPTT, with the local derivatives in bulk and every weight gradient, and the input
gradient, as one matmul over all steps. Per training batch (forward + backward, one thread):
86 -> 35-39 ms; aMV-LSTM training 1,650 -> 3,150 pairs/s, inference 8,900 -> 12,500 pairs/s.
tests/nn/test_recurrent.py checks outputs and gradients against `nn.LSTM`.

In inference, below `_SMALL_INFERENCE_BATCH` sequences the per-step Python overhead outweighs the
savings and `nn.LSTM` over a `PackedSequence` is faster, so that path is used there; GRUs and
inputs on any other device than the CPU (CUDA: cuDNN's fused LSTM) always use it. Both paths have
the same parameters, so a model trained on one device runs on the other. Under CPU autocast
(bf16) the hand-written LSTM computes in float32 (`torch.amp.custom_fwd`): its in-place
recurrence is not autocast-aware, and its cost is the per-step overhead, not the arithmetic.

From `_GROUPED_INFERENCE_BATCH` sequences up, inference without autograd groups the sequences by
exact length (`BiRNN._forward_by_length`, `bilstm_by_length`): a group needs no padding, so it
runs through `nn.LSTM`'s dense oneDNN kernel, ~1.7x the hand-written recurrence per token at
H=50 (both directions of 512 sequences of 24 tokens on one thread: ~860k vs ~490k tokens/s);
lengths with fewer than `_DENSE_GROUP_MIN` sequences run together through the paths above. Not
under CPU autocast (the paths above, in float32).

Dims: B batch, T padded length, E input size, H hidden size per direction, D = 2 directions,
N real tokens in the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmatch.nn.exporting import exporting

# Measured crossover (inference, H=50, T=20-80): from ~24 sequences up `_PackedBiLSTM` is faster.
_SMALL_INFERENCE_BATCH = 24
# Inference from this many sequences up groups them by exact length (`BiRNN._forward_by_length`).
_GROUPED_INFERENCE_BATCH = 64
# In `_forward_by_length`, a length shared by fewer sequences than this joins the leftovers.
_DENSE_GROUP_MIN = 8
# oneDNN's LSTM slows down on larger batches of long sequences (BiLSTM 50 over 40 steps, one
# thread: ~0.85M tokens/s at 128-256 sequences, ~0.70M at 758 and ~0.56M at 1,024, as a
# step's gates leave the cache), so a group of one length runs in chunks of at most this many.
_DENSE_GROUP_MAX = 256


def _dense_lstm(rnn: nn.LSTM, x: torch.Tensor) -> torch.Tensor:
    """`rnn` over unpadded sequences of one length, in chunks of at most `_DENSE_GROUP_MAX`
    sequences of even sizes.

    Shape:
        x: (n, T, E) -> (n, T, 2H)
    """
    count = -(-len(x) // _DENSE_GROUP_MAX)
    if count <= 1:
        return rnn(x)[0]  # type: ignore[no-any-return]
    size = -(-len(x) // count)
    return torch.cat([rnn(part)[0] for part in x.split(size)])  # (n, T, 2H)


def encode_pair(
    rnn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    left: torch.Tensor,
    left_mask: torch.Tensor,
    right: torch.Tensor,
    right_mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both sides of a pair through one (siamese) encoder in one call.

    `rnn(x, mask)` is any masked sequence encoder: a `BiRNN`, or e.g. IARNN's packed GRU.

    One packed call over 2B sequences halves the per-step kernel launches of two calls.

    Shape:
        left: (B, L, E), left_mask: (B, L), right: (B', R, E), right_mask: (B', R)
        -> (B, L, 2H), (B', R, 2H); the sides' batch sizes may differ (distinct texts of each).

    Export (`nn.exporting`): each side on its own, with no common width read from the shapes.
    """
    if exporting():
        return rnn(left, left_mask), rnn(right, right_mask)
    batch, lsteps, _ = left.shape
    rsteps = right.shape[1]
    steps = max(lsteps, rsteps)
    x = torch.cat(
        [F.pad(left, (0, 0, 0, steps - lsteps)), F.pad(right, (0, 0, 0, steps - rsteps))]
    )  # (2B, T, E)
    mask = torch.cat(
        [F.pad(left_mask, (0, steps - lsteps)), F.pad(right_mask, (0, steps - rsteps))]
    )  # (2B, T)
    states = rnn(x, mask)  # (2B, T, 2H)
    return states[:batch, :lsteps], states[batch:, :rsteps]


class BiRNN(nn.Module):
    """A one-layer bidirectional LSTM or GRU over masked inputs.

    The parameters are those of `nn.LSTM`/`nn.GRU(input_size, hidden_size, bidirectional=True)`
    (`rnn.weight_ih_l0`, `rnn.weight_hh_l0`, `rnn.bias_ih_l0`, `rnn.bias_hh_l0` and their
    `_reverse` twins, gates in PyTorch's order, initialised by PyTorch), whichever path runs.

    Args:
        cell: "lstm" or "gru".
        input_size: E.
        hidden_size: H per direction.

    Shape:
        x: (B, T, E), mask: (B, T) bool with real tokens first (right padding)
        -> (B, T, 2H): [forward; backward] states, zero on padding.
    """

    def __init__(self, cell: Literal["lstm", "gru"], input_size: int, hidden_size: int) -> None:
        super().__init__()
        rnn_cls = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn_cls(input_size, hidden_size, batch_first=True, bidirectional=True)
        self.cell = cell
        self.hidden_size = hidden_size
        # Benchmarks switch this off to time the packed `nn.LSTM` reference side by side.
        self.fast_cpu_lstm = True

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if exporting():  # one LSTM/GRU node with per-sequence lengths (`nn.exporting`)
            return self._forward_packed(x, mask)
        if self.cell != "lstm" or x.device.type != "cpu" or not self.fast_cpu_lstm:
            return self._forward_packed(x, mask)
        needs_grad = x.requires_grad or self.rnn.weight_hh_l0.requires_grad
        if not (torch.is_grad_enabled() and needs_grad):
            if len(x) < _SMALL_INFERENCE_BATCH:
                return self._forward_packed(x, mask)
            if len(x) >= _GROUPED_INFERENCE_BATCH and not torch.is_autocast_enabled("cpu"):
                return self._forward_by_length(x, mask)
        return self._forward_lstm_cpu(x, mask)

    def _forward_by_length(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Inference only: each length shared by `_DENSE_GROUP_MIN` sequences or more runs as one
        unpadded batch through `nn.LSTM` (oneDNN's fused kernel on the CPU, ~1.7x the
        hand-written recurrence per token); the other sequences together through
        `_forward_lstm_cpu` (or `_forward_packed` when they are few)."""
        batch, steps, _ = x.shape
        lengths = mask.sum(dim=1)  # (B,)
        sorted_lengths, order = torch.sort(lengths, stable=True)  # (B,), (B,)
        values, counts = torch.unique_consecutive(sorted_lengths, return_counts=True)
        out = x.new_zeros(batch, steps, 2 * self.hidden_size)  # (B, T, 2H)
        leftovers: list[torch.Tensor] = []
        start = 0
        for length, count in zip(values.tolist(), counts.tolist(), strict=True):
            rows = order[start : start + count]  # (n,)
            start += count
            if length == 0:
                continue  # no real token: zero states
            if count < _DENSE_GROUP_MIN:
                leftovers.append(rows)
                continue
            states = _dense_lstm(self.rnn, x.index_select(0, rows)[:, :length])  # (n, length, 2H)
            out[rows, :length] = states
        if leftovers:
            rows = torch.cat(leftovers)  # (m,)
            sub_x, sub_mask = x.index_select(0, rows), mask.index_select(0, rows)  # (m, T, E)
            longest = int(sub_mask.sum(dim=1).max())
            sub_x, sub_mask = sub_x[:, :longest], sub_mask[:, :longest]
            if len(rows) < _SMALL_INFERENCE_BATCH:
                out[rows, :longest] = self._forward_packed(sub_x, sub_mask)
            else:
                out[rows, :longest] = self._forward_lstm_cpu(sub_x, sub_mask)
        return out

    def _forward_packed(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, steps, _ = x.shape
        # Empty sequences cannot be packed; give them one (zero) step, masked out below.
        lengths = mask.sum(dim=1).clamp(min=1).cpu()  # (B,)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=steps)  # (B, T, 2H)
        return out * mask.unsqueeze(-1)

    def _forward_lstm_cpu(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        rnn = self.rnn
        w_ih = torch.stack([rnn.weight_ih_l0, rnn.weight_ih_l0_reverse])  # (D, 4H, E)
        bias = torch.stack(
            [rnn.bias_ih_l0 + rnn.bias_hh_l0, rnn.bias_ih_l0_reverse + rnn.bias_hh_l0_reverse]
        )  # (D, 4H)
        w_hh = torch.stack([rnn.weight_hh_l0, rnn.weight_hh_l0_reverse])  # (D, 4H, H)
        plan = pack_plan(mask.sum(dim=1), x.shape[1])
        return _PackedBiLSTM.apply(x, w_ih, bias, w_hh, plan)


def bilstm_by_length(
    birnn: BiRNN,
    batches: Sequence[tuple[torch.Tensor, np.ndarray]],
    transform: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """Inference only: a BiLSTM's states for several padded batches of sequences sorted by
    length, the sequences of each length together (over all batches) as one unpadded batch
    through `nn.LSTM` (oneDNN's fused kernel on the CPU), as `BiRNN._forward_by_length` does;
    lengths shared by fewer than `_DENSE_GROUP_MIN` sequences run together through `birnn`.

    Args:
        batches: (x, lengths) pairs: x (B_i, T_i, E) right-padded, lengths (B_i,) ascending.

        transform: `transform(states, out)` applied to the states of real tokens (e.g. a
            normalisation), so that padding is not transformed; it writes into `out` when
            that is given (a view of the result), else returns a new tensor.

    Returns:
        (B_i, T_i, 2H) states of each batch (transformed), zero on padding.
    """
    # Each state is written once, into its place (transformed there); only padding is zeroed.
    outs = [x.new_empty(x.shape[0], x.shape[1], 2 * birnn.hidden_size) for x, _ in batches]
    values = np.unique(np.concatenate([lengths for _, lengths in batches]))
    leftovers: list[tuple[int, int, int]] = []  # (batch, first row, end row)
    for length in values[values > 0].tolist():
        spans = []
        for i, (_, lengths) in enumerate(batches):
            lo, hi = np.searchsorted(lengths, [length, length + 1])
            if hi > lo:
                spans.append((i, int(lo), int(hi)))
        if sum(hi - lo for _, lo, hi in spans) < _DENSE_GROUP_MIN:
            leftovers += spans
            continue
        x = torch.cat([batches[i][0][lo:hi, :length] for i, lo, hi in spans])  # (n, length, E)
        states = _dense_lstm(birnn.rnn, x)  # (n, length, 2H)
        row = 0
        for i, lo, hi in spans:
            if transform is not None:
                transform(states[row : row + hi - lo], outs[i][lo:hi, :length])
            else:
                outs[i][lo:hi, :length] = states[row : row + hi - lo]
            row += hi - lo
    if leftovers:
        longest = max(int(batches[i][1][hi - 1]) for i, _, hi in leftovers)
        parts = [batches[i][0][lo:hi, :longest] for i, lo, hi in leftovers]
        x = torch.cat([F.pad(p, (0, 0, 0, longest - p.shape[1])) for p in parts])  # (m, T', E)
        real = torch.from_numpy(np.concatenate([batches[i][1][lo:hi] for i, lo, hi in leftovers]))
        mask = torch.arange(longest).unsqueeze(0) < real.unsqueeze(1)  # (m, longest)
        states = birnn(x, mask)  # (m, longest, 2H)
        if transform is not None:
            states = transform(states, None)
        row = 0
        for i, lo, hi in leftovers:
            steps = min(longest, outs[i].shape[1])
            outs[i][lo:hi, :steps] = states[row : row + hi - lo, :steps]
            row += hi - lo
    for out, (_, lengths) in zip(outs, batches, strict=True):
        values, first = np.unique(lengths, return_index=True)  # lengths ascending
        ends = np.append(first[1:], len(lengths))
        for length, lo, hi in zip(values.tolist(), first.tolist(), ends.tolist(), strict=True):
            out[lo:hi, length:] = 0  # padding (and an empty text's every step)
    return outs


@dataclass(frozen=True)
class PackPlan:
    """Where each row of the packed, time-major layout of both directions comes from.

    Step t holds `batch_sizes[t]` rows, one per sequence still running, longest sequence first,
    so step t continues the first rows of step t-1. The backward direction is each sequence
    reversed within its own length, so it also starts at t=0 and never reaches padding.

    Attributes:
        token: (D*N,) for packed row d * N + p, the flat position b * T + s of its token in x.
        batch_sizes: running sequences per step (non-increasing).
    """

    token: torch.Tensor
    batch_sizes: list[int]


def pack_plan(lengths: torch.Tensor, steps: int) -> PackPlan:
    lengths = lengths.detach().to("cpu", torch.long)  # (B,)
    order = torch.argsort(lengths, descending=True, stable=True)  # (B,) longest first
    sorted_lengths = lengths[order]
    longest = int(sorted_lengths[0]) if len(lengths) else 0
    t = torch.arange(longest).unsqueeze(1)  # (T', 1)
    running = t < sorted_lengths.unsqueeze(0)  # (T', B): step t of the k-th longest sequence
    # Packed rows enumerate `running` row-major: step by step, longest sequence first.
    step = t.expand_as(running)[running]  # (N,)
    seq = order.unsqueeze(0).expand_as(running)[running]  # (N,) b of each packed row
    forward = seq * steps + step  # (N,)
    backward = seq * steps + lengths[seq] - 1 - step  # (N,) reversed within the length
    return PackPlan(token=torch.cat([forward, backward]), batch_sizes=running.sum(dim=1).tolist())


class _PackedBiLSTM(torch.autograd.Function):
    """A bidirectional LSTM over the real tokens of a right-padded batch; h_0 = c_0 = 0.

    Forward: gather the real tokens into the packed layout (`PackPlan`), project them with one
    batched matmul, run the recurrence (`_lstm_scan`) for both directions at once, scatter the
    states back. Backward: BPTT (`_lstm_scan_backward`) for the gates' gradients, then one matmul
    each for W_ih, W_hh and x. First-order only (no double backward).

    Shape:
        x: (B, T, E), w_ih: (D, 4H, E), bias: (D, 4H) = b_ih + b_hh, w_hh: (D, 4H, H)
        -> (B, T, 2H), zero on padding
    """

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(
        ctx: Any,
        x: torch.Tensor,
        w_ih: torch.Tensor,
        bias: torch.Tensor,
        w_hh: torch.Tensor,
        plan: PackPlan,
    ) -> torch.Tensor:
        batch, steps, embed = x.shape
        dirs, four_h, h = w_hh.shape
        tokens = x.reshape(-1, embed).index_select(0, plan.token).view(dirs, -1, embed)  # (D, N, E)
        # tanh(x) = 2 sigmoid(2x) - 1 (see the module docstring): the g block's pre-activations
        # are doubled through the weights, and `_lstm_scan` applies only sigmoids to them.
        scale = torch.ones(four_h, 1, dtype=x.dtype)
        scale[2 * h : 3 * h] = 2
        gates = torch.baddbmm(
            (bias * scale.squeeze(1)).unsqueeze(1), tokens, (w_ih * scale).transpose(1, 2)
        )  # (D, N, 4H)
        w_hh_t = (w_hh * scale).transpose(1, 2)  # (D, H, 4H)
        kept, tanh_cells, hidden = _lstm_scan(gates, w_hh_t, plan.batch_sizes)

        out = x.new_zeros(batch * steps * dirs, h)  # (B*T*D, H)
        out.index_copy_(0, packed_state_index(plan, dirs), hidden.view(-1, h))
        ctx.save_for_backward(tokens, w_ih, w_hh, gates, kept, tanh_cells, hidden)
        ctx.plan, ctx.x_shape = plan, x.shape
        return out.view(batch, steps, dirs * h)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        tokens, w_ih, w_hh, gates, kept, tanh_cells, hidden = ctx.saved_tensors
        plan: PackPlan = ctx.plan
        dirs, n_rows, four_h = gates.shape
        h = four_h // 4
        grad_hidden = grad_out.reshape(-1, h).index_select(0, packed_state_index(plan, dirs))
        grad_hidden = grad_hidden.view(dirs, n_rows, h)  # (D, N, H)

        # Local derivatives, in bulk. With dh_t, dc_t the gradients of h_t, c_t:
        # dc_t += dh_t * o (1 - tanh^2 c_t); d pre-activations = dc_t * coef[i, f, g], dh_t * coef[o].
        i, f, cand, o = gates.chunk(4, dim=-1)  # (D, N, H) activations
        dc_from_dh = torch.addcmul(o, o, tanh_cells * tanh_cells, value=-1)  # (D, N, H)
        coef = gates.new_empty(dirs, n_rows, 4, h)  # (D, N, 4, H)
        # coef = [g i (1 - i), c_{t-1} f (1 - f), i (1 - g^2), tanh(c_t) o (1 - o)]
        torch.mul(cand, torch.addcmul(i, i, i, value=-1), out=coef[:, :, 0])
        torch.addcmul(kept, kept, f, value=-1, out=coef[:, :, 1])
        torch.addcmul(i, i, cand * cand, value=-1, out=coef[:, :, 2])
        torch.mul(tanh_cells, torch.addcmul(o, o, o, value=-1), out=coef[:, :, 3])
        grad_gates = _lstm_scan_backward(grad_hidden, dc_from_dh, coef, f, w_hh, plan.batch_sizes)

        needs = ctx.needs_input_grad
        grad_x = grad_w_ih = grad_bias = grad_w_hh = None
        if needs[0]:
            batch, steps, embed = ctx.x_shape
            grad_tokens = (grad_gates @ w_ih).view(-1, embed)  # (D*N, E)
            grad_x = grad_tokens.new_zeros(batch * steps, embed)  # (B*T, E)
            grad_x = grad_x.index_add_(0, plan.token, grad_tokens).view(batch, steps, embed)
        if needs[1]:
            grad_w_ih = grad_gates.transpose(1, 2) @ tokens  # (D, 4H, E)
        if needs[2]:
            grad_bias = grad_gates.sum(dim=1)  # (D, 4H)
        if needs[3]:
            # dW_hh = sum_t dgates_t^T h_{t-1}, over the steps after the first (h_0 = 0).
            sizes = torch.tensor(plan.batch_sizes, dtype=torch.long)
            first = int(sizes[0]) if len(sizes) else 0
            prev_row = torch.arange(first, n_rows) - sizes[:-1].repeat_interleave(sizes[1:])
            grad_w_hh = grad_gates[:, first:].transpose(1, 2) @ hidden[:, prev_row]  # (D, 4H, H)
        return grad_x, grad_w_ih, grad_bias, grad_w_hh, None


def packed_state_index(plan: PackPlan, dirs: int) -> torch.Tensor:
    """For packed row d * N + p, its row (b * T + s) * D + d in a (B*T*D, H) view of the output."""
    direction = torch.arange(dirs, device=plan.token.device).repeat_interleave(
        len(plan.token) // dirs
    )  # (D*N,)
    return plan.token * dirs + direction


def _lstm_scan(
    gates: torch.Tensor, w_hh_t: torch.Tensor, batch_sizes: list[int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The recurrence over the packed layout, in place on `gates`.

    Args:
        gates: (D, N, 4H) pre-activations x W_ih^T + b, the g block doubled; overwritten with
            the activations i, f, tanh(g), o.
        w_hh_t: (D, H, 4H) W_hh^T, the g block doubled.
        batch_sizes: running sequences per step.

    Returns:
        f_t * c_{t-1}, tanh(c_t) and h_t, each (D, N, H).
    """
    dirs, n_rows, four_h = gates.shape
    h = four_h // 4
    in_gate, forget, cand_all, out_gate = gates.split(h, dim=-1)  # (D, N, H) views
    minus_one = torch.full((), -1.0, dtype=gates.dtype)
    cells = gates.new_empty(dirs, n_rows, h)  # c_t
    kept = gates.new_empty(dirs, n_rows, h)  # f_t * c_{t-1}
    tanh_cells = gates.new_empty(dirs, n_rows, h)  # tanh(c_t)
    hidden = gates.new_empty(dirs, n_rows, h)  # h_t = o_t * tanh(c_t)
    # Each buffer's rows of every step, as views made at once (no Python slicing a step).
    g_s, i_s, f_s, cand_s, o_s, c_s, fc_s, tc_s, h_s = (
        x.split(batch_sizes, dim=1)
        for x in (gates, in_gate, forget, cand_all, out_gate, cells, kept, tanh_cells, hidden)
    )
    for t, size in enumerate(batch_sizes):
        g, cand, c, fc, tc = g_s[t], cand_s[t], c_s[t], fc_s[t], tc_s[t]  # (D, n, ...)
        if t > 0:
            g.baddbmm_(h_s[t - 1][:, :size], w_hh_t)
        g.sigmoid_()
        torch.add(minus_one, cand, alpha=2, out=cand)  # tanh
        if t > 0:
            torch.mul(f_s[t], c_s[t - 1][:, :size], out=fc)
        else:
            fc.zero_()
        torch.addcmul(fc, i_s[t], cand, out=c)
        torch.mul(c, 2, out=tc).sigmoid_()
        torch.add(minus_one, tc, alpha=2, out=tc)  # tanh
        torch.mul(o_s[t], tc, out=h_s[t])
    return kept, tanh_cells, hidden


def _lstm_scan_backward(
    grad_hidden: torch.Tensor,
    dc_from_dh: torch.Tensor,
    coef: torch.Tensor,
    forget: torch.Tensor,
    w_hh: torch.Tensor,
    batch_sizes: list[int],
) -> torch.Tensor:
    """BPTT through `_lstm_scan`.

    Args:
        grad_hidden: (D, N, H) gradient of the outputs h_t.
        dc_from_dh: (D, N, H) o_t (1 - tanh^2 c_t).
        coef: (D, N, 4, H) d pre-activation / d c_t for i, f, g, and d pre-activation / d h_t for o.
        forget: (D, N, H) f_t.
        w_hh: (D, 4H, H).
        batch_sizes: running sequences per step.

    Returns:
        (D, N, 4H) gradient of the gates' pre-activations.
    """
    dirs, n_rows, _, h = coef.shape
    grad_gates = coef.new_empty(dirs, n_rows, 4 * h)  # (D, N, 4H)
    grad_gates4 = grad_gates.view(dirs, n_rows, 4, h)
    longest = batch_sizes[0] if batch_sizes else 0
    # Rows beyond a step's running prefix stay zero: those sequences have no later steps.
    dh_next = coef.new_zeros(dirs, longest, h)  # dh_t through W_hh, from step t+1
    dc = coef.new_zeros(dirs, longest, h)  # dc_t carried from step t+1
    # Each buffer's rows of every step, as views made at once (no Python slicing a step).
    gh_s, dcdh_s, coef_s, f_s, gg_s, gg4_s = (
        x.split(batch_sizes, dim=1)
        for x in (grad_hidden, dc_from_dh, coef, forget, grad_gates, grad_gates4)
    )
    for t in range(len(batch_sizes) - 1, -1, -1):
        size = batch_sizes[t]
        coef_t, gg4 = coef_s[t], gg4_s[t]  # (D, n, 4, H)
        dh = torch.add(gh_s[t], dh_next[:, :size])  # (D, n, H)
        dc_t = dc[:, :size]
        dc_t.addcmul_(dh, dcdh_s[t])
        torch.mul(dc_t.unsqueeze(2), coef_t[:, :, :3], out=gg4[:, :, :3])
        torch.mul(dh, coef_t[:, :, 3], out=gg4[:, :, 3])
        dc_t.mul_(f_s[t])  # dc_{t-1} = dc_t * f_t
        if t > 0:
            torch.bmm(gg_s[t], w_hh, out=dh_next[:, :size])
    return grad_gates
