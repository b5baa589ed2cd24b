"""IARNN: every fast path against a literal step-by-step reference of the paper's equations.

The references below are deliberately naive: one example, one direction, one time step at a
time, written from eq. 2-7 (with PyTorch's GRU cell, see models/iarnn.py), reading the model's
parameters by name. The model's fused kernels and its batched step loop must match them to 1e-5.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from attnmatch.losses import auxiliary_loss, rank_hinge_loss
from attnmatch.models.iarnn import IARNN, reverse_padded
from attnmatch.nn.context_gru import _ContextGRU
from attnmatch.nn.similarity import similarity

from .conftest import VOCAB, make_batch, random_pairs, tiny_model

torch.set_default_dtype(torch.float32)


def _sig(x: torch.Tensor) -> torch.Tensor:
    return 1.0 / (1.0 + torch.exp(-x))


def _cell(
    model: IARNN, sfx: str, x: torch.Tensor, h: torch.Tensor, gate_bias: torch.Tensor | None
) -> torch.Tensor:
    """One GRU step, eq. 5/7 in PyTorch's form: r (eq. 7's f), z, candidate n."""
    rnn = model.rnn
    w_ih, w_hh = getattr(rnn, f"weight_ih_l0{sfx}"), getattr(rnn, f"weight_hh_l0{sfx}")
    b_ih, b_hh = getattr(rnn, f"bias_ih_l0{sfx}"), getattr(rnn, f"bias_hh_l0{sfx}")
    hid = h.shape[0]
    w_ir, w_iz, w_in = w_ih[:hid], w_ih[hid : 2 * hid], w_ih[2 * hid :]
    w_hr, w_hz, w_hn = w_hh[:hid], w_hh[hid : 2 * hid], w_hh[2 * hid :]
    b_ir, b_iz, b_in = b_ih[:hid], b_ih[hid : 2 * hid], b_ih[2 * hid :]
    b_hr, b_hz, b_hn = b_hh[:hid], b_hh[hid : 2 * hid], b_hh[2 * hid :]
    q_f = gate_bias[0] if gate_bias is not None else 0.0
    q_z = gate_bias[1] if gate_bias is not None else 0.0
    r = _sig(w_ir @ x + b_ir + w_hr @ h + b_hr + q_f)
    z = _sig(w_iz @ x + b_iz + w_hz @ h + b_hz + q_z)
    n = torch.tanh(w_in @ x + b_in + r * (w_hn @ h + b_hn))
    return (1 - z) * n + z * h


def _reference_states(
    model: IARNN, x: torch.Tensor, r_q: torch.Tensor | None = None, d_index: int | None = None
) -> tuple[torch.Tensor, list[list[float]]]:
    """States of one sequence (T, E) of real tokens, both directions, eq. 5 / 6 / 7.

    GATE (eq. 7) when the model is iarnn_gate and r_q is given; CONTEXT (eq. 6) when the model
    is iarnn_context and r_q is given. Returns (T, Q) and CONTEXT's alpha per direction.
    """
    hid = model.config.hidden_size
    sfxs = ["", "_reverse"] if model.config.bidirectional else [""]
    outs, alphas = [], []
    for d, sfx in enumerate(sfxs):
        order = list(range(len(x))) if d == 0 else list(reversed(range(len(x))))
        h = torch.zeros(hid)
        states: dict[int, torch.Tensor] = {}
        alpha_d: dict[int, float] = {}
        for t in order:
            x_t = x[t]
            gate_bias = None
            if r_q is not None and model.config.variant == "iarnn_gate":
                gate_bias = (model.m_qf[d] @ r_q, model.m_qz[d] @ r_q)  # eq. 7: M_qf r_q, M_qz r_q
            if r_q is not None and model.config.variant == "iarnn_context":
                w_c = model.m_hc[d] @ h + model.m_qc[d] @ r_q  # eq. 6: w_C(t)
                alpha = _sig(w_c @ x_t)
                alpha_d[t] = float(alpha)
                x_t = alpha * x_t
            h = _cell(model, sfx, x_t, h, gate_bias)
            states[t] = h
        outs.append(torch.stack([states[t] for t in range(len(x))]))
        alphas.append([alpha_d.get(t, 1.0) for t in range(len(x))])
    return torch.cat(outs, dim=-1), alphas


def _reference_vectors(model: IARNN, batch) -> tuple[torch.Tensor, torch.Tensor, list]:
    """(r_q, r_a) per example from the references, and CONTEXT's per-token alpha."""
    rqs, ras, all_alpha = [], [], []
    with torch.no_grad():
        for b in range(batch.left_ids.shape[0]):
            lm, rm = batch.left_mask[b], batch.right_mask[b]
            q = model.token_encoder(batch.left_ids[b : b + 1], lm[None])[0][lm]  # (L, E)
            a = model.token_encoder(batch.right_ids[b : b + 1], rm[None])[0][rm]  # (R, E)
            hq, _ = _reference_states(model, q)
            r_q = hq.mean(dim=0)
            variant = model.config.variant
            alpha_word = None
            if variant == "iarnn_word":
                alpha_word = _sig(a @ (r_q @ model.m_qi))  # eq. 4
                a = alpha_word.unsqueeze(-1) * a
            ha, alphas = _reference_states(
                model, a, r_q if variant in ("iarnn_gate", "iarnn_context") else None
            )
            if variant == "oarnn":  # eq. 2-3
                m_t = torch.tanh(ha @ model.w_hm.weight.T + model.w_qm.weight @ r_q)
                s = torch.softmax(m_t @ model.w_ms.weight[0], dim=0)
                r_a = (s.unsqueeze(-1) * ha).sum(dim=0)
            else:
                r_a = ha.mean(dim=0)
            rqs.append(r_q)
            ras.append(r_a)
            all_alpha.append(alpha_word.tolist() if alpha_word is not None else alphas)
    return torch.stack(rqs), torch.stack(ras), all_alpha


VARIANTS = ["gru", "oarnn", "oarnn_uni", "iarnn_word", "iarnn_context", "iarnn_gate"]


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("name", VARIANTS)
def test_matches_the_step_by_step_reference(name: str, fused: bool) -> None:
    model = tiny_model(name, hidden_size=7, fused=fused).eval()
    assert isinstance(model, IARNN)
    _randomise_biases(model)
    left, right = random_pairs(6, seed=3)
    batch = make_batch(left, right, extra_pad=2)
    with torch.no_grad():
        out = model._encode(batch)
    r_q, r_a, _ = _reference_vectors(model, batch)
    torch.testing.assert_close(out["left"], r_q, atol=1e-5, rtol=0)
    torch.testing.assert_close(out["right"], r_a, atol=1e-5, rtol=0)


def _randomise_biases(model: IARNN) -> None:
    """The paper's init has zero biases; make them non-zero so the test sees them."""
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for pname, p in model.rnn.named_parameters():
            if pname.startswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)


def test_context_attention_weights_match_eq_6() -> None:
    model = tiny_model("iarnn_context", hidden_size=6).eval()
    assert isinstance(model, IARNN)
    left, right = random_pairs(5, seed=8)
    batch = make_batch(left, right, extra_pad=1)
    with torch.no_grad():
        att = model.attention(batch)
    _, _, ref_alpha = _reference_vectors(model, batch)
    for b, alphas in enumerate(ref_alpha):
        n = int(batch.right_mask[b].sum())
        got = att["right_attention_directions"][b, :n]  # (R, D)
        want = torch.tensor(alphas).T  # (R, D)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        torch.testing.assert_close(att["right_attention"][b, :n], want.mean(-1), atol=1e-5, rtol=0)
        assert att["right_attention"][b, n:].abs().sum() == 0  # zero on padding


def test_word_attention_weights_match_eq_4() -> None:
    model = tiny_model("iarnn_word", hidden_size=6).eval()
    left, right = random_pairs(5, seed=9)
    batch = make_batch(left, right, extra_pad=1)
    with torch.no_grad():
        att = model.attention(batch)["right_attention"]
    _, _, ref_alpha = _reference_vectors(model, batch)
    for b, alphas in enumerate(ref_alpha):
        n = int(batch.right_mask[b].sum())
        torch.testing.assert_close(att[b, :n], torch.tensor(alphas), atol=1e-6, rtol=0)
        assert att[b, n:].abs().sum() == 0


@pytest.mark.parametrize(
    "name", ["iarnn_gate", "iarnn_word", "gru", "iarnn_context", "iarnn_occam_context"]
)
def test_fused_and_loop_gradients_agree(name: str) -> None:
    """The fused kernel (CONTEXT: the packed loop with its own backward) and the autograd step
    loop give the same gradients, not just the same outputs; Occam's term included."""
    left, right = random_pairs(6, seed=12)
    right[2] = []  # an empty answer
    batch = make_batch(left, right, labels=[1.0, 0.0, 0.0, 1.0, 0.0, 0.0], extra_pad=2)
    grads = []
    for fused in (True, False):
        model = tiny_model(name, hidden_size=6, trainable=True, dropout=0.0, fused=fused).train()
        _randomise_biases(model)
        if model.w_qp is not None:
            with torch.no_grad():
                model.w_qp.normal_(generator=torch.Generator().manual_seed(2))
        loss = model(batch).pow(2).sum()
        for term in model.auxiliary_terms().values():
            loss = loss + term
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for pname in grads[0]:
        torch.testing.assert_close(grads[0][pname], grads[1][pname], atol=1e-5, rtol=1e-4)


def test_gate_fused_kernel_candidate_block_ignores_the_question() -> None:
    """Only the update and reset gates see r_q (eq. 7): zeroing M_qf and M_qz gives the GRU."""
    model = tiny_model("iarnn_gate", hidden_size=6).eval()
    left, right = random_pairs(4, seed=13)
    batch = make_batch(left, right)
    with torch.no_grad():
        gated = model._encode(batch)["right"]
        model.m_qf.zero_()
        model.m_qz.zero_()
        plain = model._encode(batch)["right"]
        model.config = tiny_model("gru", hidden_size=6).config  # same weights, no gate
        ref = _reference_vectors(model, batch)[1]
    torch.testing.assert_close(plain, ref, atol=1e-5, rtol=0)
    assert (gated - plain).abs().max() > 1e-3


def test_oarnn_weights_are_a_softmax_over_real_tokens() -> None:
    model = tiny_model("oarnn", hidden_size=6).eval()
    left, right = random_pairs(5, seed=14)
    batch = make_batch(left, right, extra_pad=3)
    with torch.no_grad():
        s = model.attention(batch)["right_attention"]
    torch.testing.assert_close(s.sum(-1), torch.ones(5))
    assert s[~batch.right_mask].abs().sum() == 0


@pytest.mark.parametrize("name", ["iarnn_occam_word", "iarnn_occam_context"])
def test_occam_term_is_eq_8(name: str) -> None:
    """n_p = max(w_qp . r_q, lambda_q); term = mean over pairs of n_p * sum_t alpha_t."""
    model = tiny_model(name, hidden_size=6, dropout=0.0).train()
    left, right = random_pairs(6, seed=15)
    batch = make_batch(left, right, extra_pad=2)
    model(batch)
    term = auxiliary_loss(model)
    assert term is not None and term.requires_grad
    with torch.no_grad():
        out = model._encode(batch)
        n_p = torch.clamp(out["left"] @ model.w_qp, min=0.05)
        want = (n_p * out["right_attention"].sum(-1)).mean()
        # the floor binds for some questions and not others in this example
        assert model.config.occam_lambda == 0.05
    torch.testing.assert_close(term, want)
    model.eval()
    model(batch)
    assert auxiliary_loss(model) is None  # nothing in evaluation


def test_occam_term_reaches_through_a_ddp_like_wrapper() -> None:
    model = tiny_model("iarnn_occam_word", hidden_size=4).train()
    wrapper = torch.nn.DataParallel(model)  # on the CPU: calls the model
    left, right = random_pairs(3, seed=16)
    model(make_batch(left, right))
    assert auxiliary_loss(wrapper) is not None
    assert auxiliary_loss(tiny_model("gru", hidden_size=4)) is None


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="only"):
        tiny_model("iarnn_gate", occam=True)
    with pytest.raises(ValueError, match="is not one of"):
        tiny_model("iarnn", variant="iarnn_typo")
    with pytest.raises(ValueError, match="num_outputs"):
        tiny_model("gru", head="gesd", num_outputs=2)


def test_init_has_unit_spectral_norm() -> None:
    model = tiny_model("iarnn_gate", hidden_size=6)
    w = model.rnn.weight_hh_l0
    for block in w.chunk(3):
        assert math.isclose(
            float(torch.linalg.matrix_norm(block.detach(), ord=2)), 1.0, rel_tol=1e-4
        )
    for block in model.m_qz:
        assert math.isclose(
            float(torch.linalg.matrix_norm(block.detach(), ord=2)), 1.0, rel_tol=1e-4
        )


def test_reverse_padded() -> None:
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]]).unsqueeze(-1)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    got = reverse_padded(x, mask).squeeze(-1)
    assert got[0, :3].tolist() == [3, 2, 1] and got[1, :2].tolist() == [5, 4]


def test_similarities_by_hand() -> None:
    x = torch.tensor([[1.0, 0.0]])
    y = torch.tensor([[0.0, 1.0]])
    dist = math.sqrt(2.0)
    sig = 1.0 / (1.0 + math.exp(-(0.0 + 1.0)))  # gamma = 1, c = 1, x . y = 0
    assert similarity("gesd", x, y).item() == pytest.approx(1 / (1 + dist) * sig, abs=1e-6)
    assert similarity("aesd", x, y).item() == pytest.approx(0.5 / (1 + dist) + 0.5 * sig, abs=1e-6)
    assert similarity("cosine", x, y).item() == pytest.approx(0.0, abs=1e-7)
    same = similarity("gesd", x, x, gamma=2.0, c=0.0)
    assert same.item() == pytest.approx(1.0 / (1.0 + math.exp(-2.0)), abs=1e-5)
    with pytest.raises(ValueError, match="unknown similarity"):
        similarity("dot", x, y)  # type: ignore[arg-type]


def _gesd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """GESD by hand, gamma = c = 1: 1 / (1 + ||x - y||) * 1 / (1 + exp(-(x . y + 1)))."""
    return 1.0 / (1.0 + (x - y).pow(2).sum(-1).sqrt()) / (1.0 + torch.exp(-((x * y).sum(-1) + 1)))


def test_gesd_head_ranks_and_trains() -> None:
    # Ranks: the model's score is GESD of its question and answer vectors, which puts an answer
    # vector equal to the question's above one pointing away from it.
    model = tiny_model("iarnn_gate", hidden_size=5, head="gesd", dropout=0.0).eval()
    left, right = random_pairs(4, seed=17)
    batch = make_batch(left, right, extra_pad=2)
    with torch.no_grad():
        scores, out = model(batch), model._encode(batch)
    assert scores.shape == (4, 1)
    torch.testing.assert_close(scores[:, 0], _gesd(out["left"], out["right"]))
    q = out["left"][:1]
    close, far = model.head(q, q), model.head(q, -q)
    assert close.item() == pytest.approx(_gesd(q, q).item()) and close.item() > far.item()

    # Trains: on 6 questions whose relevant answer is the question's words shifted by 19 ids
    # (3 random answers each), a few steps of the rank hinge through the GESD head reach the
    # gate's parameters and put every relevant answer first.
    g = torch.Generator().manual_seed(5)
    groups, per_group = 6, 4
    left, right = [], []
    for _ in range(groups):
        question = torch.randint(2, 20, (4,), generator=g).tolist()
        answers = [[t + 19 for t in question]]
        answers += [torch.randint(21, VOCAB, (4,), generator=g).tolist() for _ in range(3)]
        left += [question] * per_group
        right += answers
    batch = make_batch(left, right)
    model = tiny_model("iarnn_gate", hidden_size=5, head="gesd", dropout=0.0, trainable=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)

    def loss_and_accuracy() -> tuple[torch.Tensor, float]:
        grouped = model(batch).reshape(groups, per_group)  # relevant answer first
        first = (grouped[:, :1] > grouped[:, 1:]).all(dim=1).float().mean().item()
        return rank_hinge_loss(grouped, margin=0.5), first

    model.train()
    loss, accuracy = loss_and_accuracy()
    losses, accuracies = [loss.item()], [accuracy]
    for step in range(30):
        optimizer.zero_grad()
        loss.backward()
        if step == 0:  # the gate's parameters get a gradient through the head
            assert model.m_qz.grad is not None and model.m_qz.grad.abs().sum() > 0
        optimizer.step()
        loss, accuracy = loss_and_accuracy()
        losses.append(loss.item())
        accuracies.append(accuracy)
    assert losses[-1] < 0.2 * losses[0], losses
    assert accuracies[0] < 1.0 and accuracies[-1] == 1.0, accuracies


def test_occam_mean_reduction_divides_by_answer_length() -> None:
    left, right = random_pairs(5, seed=18)
    batch = make_batch(left, right, extra_pad=2)
    terms = {}
    for reduction in ("sum", "mean"):
        model = tiny_model("iarnn_occam_context", hidden_size=5, dropout=0.0)
        model = type(model)(dataclasses.replace(model.config, occam_reduction=reduction)).train()
        torch.manual_seed(0)
        model(batch)
        terms[reduction] = model.auxiliary_terms()["occam"]
        with torch.no_grad():
            out = model._encode(batch)
            n_p = torch.clamp(out["left"] @ model.w_qp, min=0.05)
            lengths = batch.right_mask.sum(-1)
        mass = out["right_attention"].sum(-1)
        want = (n_p * (mass / lengths if reduction == "mean" else mass)).mean()
        torch.testing.assert_close(terms[reduction], want)


@pytest.mark.parametrize("dirs", [1, 2])
def test_context_gru_backward_passes_gradcheck(dirs: int) -> None:
    """`_ContextGRU`'s hand-written backward against finite differences (float64): packed
    sequences of lengths 4, 3, 3 and 1, every input and both outputs."""
    g = torch.Generator().manual_seed(3)
    hid, sizes = 3, [4, 3, 3, 1]  # the steps' running sequences, longest first
    rows = sum(sizes)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * 0.7).requires_grad_()

    inputs = (
        rand(dirs, rows, 3 * hid),  # proj
        rand(dirs, rows, hid),  # attn_h
        rand(dirs, rows),  # attn_c
        rand(dirs, 3 * hid, hid),  # w_hh
        rand(dirs, 3 * hid),  # b_ih
        rand(dirs, 3 * hid),  # b_hh
    )
    assert torch.autograd.gradcheck(
        lambda *args: _ContextGRU.apply(*args, sizes), inputs, atol=1e-6, rtol=1e-5
    )
