"""ESIM beyond the common suite: local inference by hand, masking, and the whole model against a
reference written from the paper's equations on unpadded texts."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from attnmatch.inputs import TokenEncoderConfig
from attnmatch.models.esim import ESIM, ESIMConfig, mean_max_pool, soft_align
from attnmatch.nn.coattention import enhance
from attnmatch.nn.recurrent import BiRNN

from .conftest import make_batch, random_pairs, tiny_model


def tiny_esim(*, num_outputs: int = 1, **overrides: Any) -> ESIM:
    model = tiny_model("esim", num_outputs=num_outputs, **overrides)
    assert isinstance(model, ESIM)
    return model


def _states(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_soft_align_of_identical_texts_by_hand() -> None:
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (1, 2, 2)
    mask = torch.ones(1, 2, dtype=torch.bool)
    out = soft_align(x, mask, x, mask)
    # e = I: each token puts e/(e+1) on itself and 1/(e+1) on the other.
    torch.testing.assert_close(out["affinity"][0], torch.eye(2))
    p, q = math.e / (math.e + 1), 1 / (math.e + 1)
    expected = torch.tensor([[p, q], [q, p]])
    torch.testing.assert_close(out["left_weights"][0], expected)
    torch.testing.assert_close(out["left_aligned"][0], expected)  # rows of x are unit vectors
    torch.testing.assert_close(out["right_aligned"][0], expected)  # the same by symmetry


def test_soft_align_one_hot_case_by_hand() -> None:
    a = torch.tensor([[[10.0, 0.0]]])  # (1, L=1, 2)
    b = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]])  # (1, R=3, 2)
    ones_a, ones_b = torch.ones(1, 1, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool)
    out = soft_align(a, ones_a, b, ones_b)
    # e = (10, 0, -10): a~ = sum_j softmax_j(e_j) b_j, almost all on b_0.
    z = math.exp(10) + 1 + math.exp(-10)
    w = torch.tensor([math.exp(10) / z, 1 / z, math.exp(-10) / z])
    torch.testing.assert_close(out["left_weights"][0, 0], w)
    torch.testing.assert_close(out["left_aligned"][0, 0], torch.tensor([w[0] - w[2], w[1]]))
    # One real left token: every right token aligns to it with weight 1.
    torch.testing.assert_close(out["right_weights"][0], torch.ones(1, 3))
    torch.testing.assert_close(out["right_aligned"][0], a[0].expand(3, 2))


def test_soft_align_gives_padding_zero_attention() -> None:
    a, b = _states(1, 2, 3, 4), _states(2, 2, 5, 4)
    amask = torch.tensor([[True, True, False], [True, True, True]])
    bmask = torch.tensor([[True, True, False, False, False], [True, True, True, True, False]])
    # Padded states that would dominate every softmax if they were attended to.
    a = a.masked_fill(~amask.unsqueeze(-1), 1e3)
    b = b.masked_fill(~bmask.unsqueeze(-1), 1e3)
    out = soft_align(a, amask, b, bmask)
    cells = amask.unsqueeze(-1) & bmask.unsqueeze(-2)  # (B, L, R)
    for key in ("left_weights", "right_weights"):
        assert (out[key][~cells] == 0).all()
    torch.testing.assert_close(out["left_weights"].sum(-1)[amask], torch.ones(5))
    torch.testing.assert_close(out["right_weights"].sum(-2)[bmask], torch.ones(6))
    # Padded tokens' own aligned vectors are zero; real ones are finite.
    assert (out["left_aligned"][~amask] == 0).all() and (out["right_aligned"][~bmask] == 0).all()
    assert torch.isfinite(out["left_aligned"]).all() and torch.isfinite(out["right_aligned"]).all()


def test_soft_align_a_tilde_ignores_padding_appended_to_the_other_side() -> None:
    a, b = _states(3, 1, 3, 4), _states(4, 1, 2, 4)
    ones_a, ones_b = torch.ones(1, 3, dtype=torch.bool), torch.ones(1, 2, dtype=torch.bool)
    ref = soft_align(a, ones_a, b, ones_b)
    b_padded = torch.cat([b, torch.full((1, 4, 4), 50.0)], dim=1)  # (1, 6, 4), garbage padding
    bmask = torch.tensor([[True, True, False, False, False, False]])
    out = soft_align(a, ones_a, b_padded, bmask)
    torch.testing.assert_close(out["left_aligned"], ref["left_aligned"])
    torch.testing.assert_close(out["right_aligned"][:, :2], ref["right_aligned"])


@torch.no_grad()
def test_model_a_tilde_is_unchanged_by_padding_on_the_other_side() -> None:
    model = tiny_esim().eval()
    left, right = random_pairs(4, seed=8)
    base = model._encode(make_batch(left, right))
    # Pad only the right texts: one long right text in the batch forces padding on the others.
    longer = make_batch(left, [*right[:-1], right[-1] + [3] * 9])
    padded = model._encode(longer)
    lmask = longer.left_mask
    torch.testing.assert_close(
        padded["left_aligned"][:-1][lmask[:-1]], base["left_aligned"][:-1][lmask[:-1]]
    )
    rlen = base["left_weights"].shape[-1]
    torch.testing.assert_close(padded["left_weights"][:-1, :, :rlen], base["left_weights"][:-1])
    assert (padded["left_weights"][:-1, :, rlen:] == 0).all()


def test_enhance_by_hand() -> None:
    x = torch.tensor([[[1.0, 2.0]]])
    aligned = torch.tensor([[[3.0, -1.0]]])
    torch.testing.assert_close(
        enhance(x, aligned), torch.tensor([[[1.0, 2.0, 3.0, -1.0, -2.0, 3.0, 3.0, -2.0]]])
    )


def test_mean_max_pool_reads_real_positions_only() -> None:
    x = torch.tensor([[[1.0, -4.0], [3.0, -2.0], [100.0, 100.0]], [[7.0, 7.0]] * 3])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    out = mean_max_pool(x, mask)
    torch.testing.assert_close(out[0], torch.tensor([2.0, -3.0, 3.0, -2.0]))
    torch.testing.assert_close(out[1], torch.zeros(4))  # a text without real tokens


def _lstm(birnn: BiRNN, x: torch.Tensor) -> torch.Tensor:
    return birnn.rnn(x.unsqueeze(0))[0][0]  # (T, 2h): nn.LSTM on one unpadded sequence


def _reference(model: ESIM, left: list[int], right: list[int]) -> torch.Tensor:
    """The paper's equations for one pair, unpadded, no masks, nn.LSTM directly."""
    emb = model.token_encoder.embedding.weight
    a_bar = _lstm(model.input_rnn, emb[torch.tensor(left)])  # (L, 2h)
    b_bar = _lstm(model.input_rnn, emb[torch.tensor(right)])  # (R, 2h)
    e = a_bar @ b_bar.T  # (L, R)
    a_tilde = torch.softmax(e, dim=1) @ b_bar  # (L, 2h)
    b_tilde = torch.softmax(e, dim=0).T @ a_bar  # (R, 2h)
    m_a = torch.cat([a_bar, a_tilde, a_bar - a_tilde, a_bar * a_tilde], dim=-1)
    m_b = torch.cat([b_bar, b_tilde, b_bar - b_tilde, b_bar * b_tilde], dim=-1)
    linear = model.projection[0]
    v_a = _lstm(model.composition_rnn, torch.relu(linear(m_a)))  # (L, 2h)
    v_b = _lstm(model.composition_rnn, torch.relu(linear(m_b)))  # (R, 2h)
    v = torch.cat([v_a.mean(0), v_a.amax(0), v_b.mean(0), v_b.amax(0)])  # (8h,)
    hidden, out = model.mlp[1], model.mlp[4]
    return out(torch.tanh(hidden(v)))  # (C,)


@pytest.mark.parametrize("grad", [False, True], ids=["packed_lstm", "fast_cpu_lstm"])
def test_model_matches_the_equations_on_unpadded_pairs(grad: bool) -> None:
    model = tiny_esim(num_outputs=3).eval()
    left, right = random_pairs(5, seed=9)
    with torch.set_grad_enabled(grad):  # BiRNN's two CPU paths
        batched = model(make_batch(left, right, extra_pad=2))  # (5, 3)
        for i in range(len(left)):
            torch.testing.assert_close(
                batched[i], _reference(model, left[i], right[i]), atol=1e-5, rtol=1e-5
            )


def test_layer_sizes_follow_the_paper() -> None:
    config = ESIMConfig(encoder=TokenEncoderConfig(vocab_size=10, embedding_dim=4), num_outputs=3)
    assert (config.hidden_size, config.dropout) == (300, 0.5)
    model = ESIM(config)
    h = 300
    assert model.input_rnn.rnn.weight_ih_l0.shape == (4 * h, 4)
    assert model.projection[0].weight.shape == (h, 8 * h)  # F: 8h -> h
    assert model.composition_rnn.rnn.weight_ih_l0.shape == (4 * h, h)
    assert model.mlp[1].weight.shape == (h, 8 * h) and isinstance(model.mlp[2], torch.nn.Tanh)
    assert model.mlp[4].weight.shape == (3, h)


@torch.no_grad()
def test_attention_maps_have_plot_shapes() -> None:
    model = tiny_esim().eval()
    left, right = random_pairs(3, seed=4)
    batch = make_batch(left, right)
    att = model.attention(batch)
    shape = (3, batch.left_ids.shape[1], batch.right_ids.shape[1])
    assert {k: tuple(v.shape) for k, v in att.items()} == {
        "affinity": shape,
        "left_weights": shape,
        "right_weights": shape,
    }


@pytest.mark.parametrize(
    ("field", "value"), [("hidden_size", 0), ("num_outputs", 0), ("dropout", 1.0)]
)
def test_invalid_config_values_raise(field: str, value: float) -> None:
    enc = TokenEncoderConfig(vocab_size=10, embedding_dim=4)
    with pytest.raises(ValueError, match=field):
        ESIMConfig(encoder=enc, **{field: value})
