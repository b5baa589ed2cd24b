"""IARNN-CONTEXT's recurrence (eq. 6): a GRU whose input is scaled by an attention weight that
reads the previous state, over packed sequences, with a hand-written backward.

At step t, per direction, alpha_t = sigmoid(x_t . (M_h h_{t-1} + M_q q)), with q a per-sequence
query vector (IARNN's question vector r_q), and the GRU reads alpha_t x_t. `context_gru` runs it
on the real tokens only: what does not depend on h_{t-1} is computed for all steps in bulk before
the loop: W_ih x_t, because the input gates are linear in the input (W_ih (alpha_t x_t) =
alpha_t (W_ih x_t)), and the attention's two factors M_h^T x_t and (M_q q) . x_t. Each step is
then one (n, H) x (H, 3H) matmul, one dot product and the gate arithmetic, both directions at
once, the batch shrinking as sequences end (`PackPlan`). The backward (`_ContextGRU`) is BPTT by
hand: local derivatives in bulk, one matmul a step, W_hh's gradient as one matmul over all steps.
Training IARNN-CONTEXT: 2.6x the autograd step loop on one thread (docs/speed.md).
tests/models/test_iarnn.py checks it against a literal step-by-step reference of eq. 6 and the
autograd step loop (values and gradients), and its backward against finite differences.

Dims: B batch, T padded length, E input size, H hidden size per direction, D directions (1 or
2), N real tokens, Q query size.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from attnmatch.nn.recurrent import PackPlan, pack_plan, packed_state_index


def context_gru(
    x: torch.Tensor,
    mask: torch.Tensor,
    query: torch.Tensor,
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    m_h: torch.Tensor,
    m_q: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention-scaled GRU over D directions of right-padded sequences, from h_0 = 0.

    Args:
        x: (B, T, E) inputs; padding is never read.
        mask: (B, T) bool, True on real tokens.
        query: (B, Q) the query vector q of each sequence.
        weights: the GRU's W_ih (D, 3H, E), W_hh (D, 3H, H), b_ih, b_hh (D, 3H), PyTorch's gate
            order (r, z, n), the backward direction second.
        m_h: (D, E, H) M_h per direction.
        m_q: (D, E, Q) M_q per direction.

    Returns:
        states (B, T, D*H) and alpha (B, T, D), both zero on padding.
    """
    w_ih, w_hh, b_ih, b_hh = weights
    dirs = w_ih.shape[0]
    batch, steps, emb = x.shape
    both = pack_plan(mask.sum(dim=1), steps)  # both directions' rows
    token = both.token[: dirs * (len(both.token) // 2)].to(x.device)  # (D*N,)
    plan = PackPlan(token, both.batch_sizes)
    tokens = x.reshape(-1, emb).index_select(0, plan.token).view(dirs, -1, emb)  # (D, N, E)
    proj = torch.bmm(tokens, w_ih.transpose(1, 2))  # (D, N, 3H)
    attn_h = torch.bmm(tokens, m_h)  # (D, N, H)
    w_c = torch.einsum("deq,bq->dbe", m_q, query)  # (D, B, E)
    attn_c = torch.einsum("bte,dbe->dbt", x, w_c).reshape(-1)  # (D*B*T,)
    offset = torch.arange(dirs, device=x.device).repeat_interleave(len(plan.token) // dirs)
    attn_c = attn_c.index_select(0, plan.token + offset * batch * steps).view(dirs, -1)
    states, alpha = _ContextGRU.apply(
        proj, attn_h, attn_c, w_hh, b_ih, b_hh, plan.batch_sizes
    )  # (D, N, H), (D, N)
    where = packed_state_index(plan, dirs)  # (D*N,) rows of (B*T*D, ...)
    hid = w_hh.shape[-1]
    out = states.new_zeros(batch * steps * dirs, hid).index_copy(0, where, states.reshape(-1, hid))
    alphas = alpha.new_zeros(batch * steps * dirs).index_copy(0, where, alpha.reshape(-1))
    return out.view(batch, steps, dirs * hid), alphas.view(batch, steps, dirs)


class _ContextGRU(torch.autograd.Function):
    """The GRU of `context_gru` over packed sequences (`PackPlan`: step t's rows continue the first
    rows of step t-1), both directions at once, h_{-1} = 0, with a hand-written backward.

    Step t: alpha_t = sigmoid(h_{t-1} . a_t + c_t), input gates alpha_t p_t + b_ih, then
    PyTorch's GRU cell: r, z = sigmoid(.), n = tanh(. + r (W_hn h_{t-1} + b_hn)),
    h_t = n + z (h_{t-1} - n). The forward keeps the activations; the backward is BPTT with
    the local derivatives in bulk, one (n, 3H) x (3H, H) matmul a step, and W_hh's gradient
    as one matmul over all steps. Computed in float32 or float64 (autocast off). First-order
    only.

    Shape:
        proj: (D, N, 3H) p_t = W_ih x_t, attn_h: (D, N, H) a_t = M_h^T x_t,
        attn_c: (D, N) c_t = (M_q q) . x_t, w_hh: (D, 3H, H), b_ih, b_hh: (D, 3H)
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


def _context_steps(
    proj: torch.Tensor,
    mask: torch.Tensor,
    w_hh: torch.Tensor,
    b_hh: torch.Tensor,
    input_bias: torch.Tensor,
    attn_h: torch.Tensor,
    attn_c: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention-scaled GRU as a step loop over every padded step (TorchScript: scripted by
    `context_gru_loop`, so that its length is the input's, not a traced example's).

    Shape:
        proj: (D, B, T, 3H), mask: (B, T), w_hh: (D, 3H, H), b_hh: (D, 3H),
        input_bias: (D, 1, 3H), attn_h: (D, B, T, H), attn_c: (D, B, T)
        -> states (D, B, T, H) zero on padding, alpha (D, B, T) zero on padding
    """
    dirs, batch, steps = proj.size(0), proj.size(1), proj.size(2)
    hid = w_hh.size(2)
    h = proj.new_zeros([dirs, batch, hid])  # (D, B, H)
    w_hh_t = w_hh.transpose(1, 2)  # (D, H, 3H)
    bias_hh = b_hh.unsqueeze(1)  # (D, 1, 3H)
    states: list[torch.Tensor] = []
    alphas: list[torch.Tensor] = []
    for t in range(steps):
        alpha = torch.sigmoid((h * attn_h[:, :, t]).sum(-1) + attn_c[:, :, t])  # (D, B)
        gi = alpha.unsqueeze(-1) * proj[:, :, t] + input_bias  # (D, B, 3H)
        gh = torch.baddbmm(bias_hh, h, w_hh_t)  # (D, B, 3H)
        i_r, i_z, i_n = gi.chunk(3, dim=-1)  # (D, B, H) each, PyTorch's gate order
        h_r, h_z, h_n = gh.chunk(3, dim=-1)  # (D, B, H) each
        r = torch.sigmoid(i_r + h_r)  # (D, B, H)
        z = torch.sigmoid(i_z + h_z)  # (D, B, H)
        n = torch.tanh(i_n + r * h_n)  # (D, B, H)
        new = n + z * (h - n)  # (D, B, H) = (1 - z) n + z h
        step_mask = mask[:, t].view(1, batch, 1)  # (1, B, 1)
        states.append(new * step_mask)  # (D, B, H)
        alphas.append(alpha * mask[:, t].unsqueeze(0))  # (D, B)
        h = torch.where(step_mask, new, h)  # (D, B, H): padding keeps the state
    return torch.stack(states, dim=2), torch.stack(alphas, dim=2)  # (D, B, T, H), (D, B, T)


@functools.lru_cache(maxsize=1)
def context_gru_loop() -> Any:
    """`_context_steps` scripted (once per process): the export path of IARNN-CONTEXT's
    recurrence (`nn.exporting`), which the ONNX exporter writes as a Loop over the input's
    length. The same step as `IARNN._loop`'s (`models/iarnn.py`, `_gru_loop`)."""
    return torch.jit.script(_context_steps)
