"""Attentive pooling networks (ap_cnn, ap_lstm): dos Santos et al.'s pooling by hand."""

from __future__ import annotations

import math

import pytest
import torch

from attnmatch.inputs import TokenEncoderConfig
from attnmatch.models.attentive_pooling import APCNNConfig, APLSTMConfig, AttentivePooling

from .conftest import DIM, VOCAB, make_batch, random_pairs, tiny_model

ENCODER = TokenEncoderConfig(vocab_size=VOCAB, embedding_dim=DIM)


def _softmax(xs: list[float]) -> list[float]:
    exps = [math.exp(x) for x in xs]
    return [e / sum(exps) for e in exps]


def test_attentive_pooling_2x3_by_hand_with_identity_u() -> None:
    pooling = AttentivePooling(2)
    with torch.no_grad():
        pooling.weight.copy_(torch.eye(2))
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (1, L=2, 2)
    # Three real answer positions and one padded one holding a vector that would win every max.
    a = torch.tensor([[[1.0, 1.0], [0.0, 2.0], [-1.0, 0.0], [5.0, 5.0]]])  # (1, R=4, 2)
    q_mask = torch.tensor([[True, True]])
    a_mask = torch.tensor([[True, True, True, False]])
    out = pooling(q, q_mask, a, a_mask)

    # Q A^T = [[1, 0, -1], [1, 2, 0]] over the real cells.
    t1, t2 = math.tanh(1.0), math.tanh(2.0)
    torch.testing.assert_close(
        out["affinity"][0, :, :3],
        torch.tensor([[t1, 0.0, math.tanh(-1.0)], [t1, t2, 0.0]]),
    )
    # Row maxima (over real j): tanh 1, tanh 2; column maxima (over i): tanh 1, tanh 2, 0.
    wq = _softmax([t1, t2])
    wa = _softmax([t1, t2, 0.0])
    torch.testing.assert_close(out["left_weights"], torch.tensor([wq]))
    torch.testing.assert_close(out["right_weights"], torch.tensor([wa + [0.0]]))
    # r_q = wq_0 [1, 0] + wq_1 [0, 1]; r_a = wa_0 [1, 1] + wa_1 [0, 2] + wa_2 [-1, 0].
    torch.testing.assert_close(out["left_pooled"], torch.tensor([wq]))
    torch.testing.assert_close(
        out["right_pooled"], torch.tensor([[wa[0] - wa[2], wa[0] + 2 * wa[1]]])
    )


@pytest.mark.parametrize("name", ["ap_cnn", "ap_lstm"])
def test_weights_are_zero_on_padding_and_sum_to_one(name: str) -> None:
    model = tiny_model(name).eval()
    left, right = random_pairs(5, seed=30)
    batch = make_batch(left, right, extra_pad=3)
    attn = model.attention(batch)
    b, lsteps, rsteps = len(left), batch.left_ids.shape[1], batch.right_ids.shape[1]
    assert attn["affinity"].shape == (b, lsteps, rsteps)
    for key, mask in (("left_weights", batch.left_mask), ("right_weights", batch.right_mask)):
        weights = attn[key]
        assert weights.shape == mask.shape
        assert torch.equal(weights[~mask], torch.zeros(int((~mask).sum())))
        assert (weights[mask] > 0).all()
        torch.testing.assert_close(weights.sum(dim=-1), torch.ones(b))
    cells = batch.left_mask.unsqueeze(-1) & batch.right_mask.unsqueeze(-2)
    assert torch.equal(attn["affinity"][~cells], torch.zeros(int((~cells).sum())))


@pytest.mark.parametrize("name", ["ap_cnn", "ap_lstm"])
def test_weights_of_a_pair_alone_equal_those_in_a_padded_batch(name: str) -> None:
    model = tiny_model(name).eval()
    left, right = random_pairs(4, seed=31)
    batched = model.attention(make_batch(left, right, extra_pad=2))
    for i in range(len(left)):
        alone = model.attention(make_batch([left[i]], [right[i]]))
        n_left, n_right = len(left[i]), len(right[i])
        torch.testing.assert_close(
            alone["left_weights"][0], batched["left_weights"][i, :n_left], atol=1e-6, rtol=1e-6
        )
        torch.testing.assert_close(
            alone["right_weights"][0], batched["right_weights"][i, :n_right], atol=1e-6, rtol=1e-6
        )


@pytest.mark.parametrize("name", ["ap_cnn", "ap_lstm"])
def test_cosine_head_on_one_output_mlp_on_three(name: str) -> None:
    left, right = random_pairs(5, seed=32)
    batch = make_batch(left, right)
    ranking = tiny_model(name).eval()
    assert ranking.head.kind == "cosine"
    scores = ranking(batch)
    assert scores.shape == (5, 1) and (scores.abs() <= 1 + 1e-6).all()
    classifier = tiny_model(name, num_outputs=3).eval()
    assert classifier.head.kind == "mlp"
    assert classifier(batch).shape == (5, 3)


@pytest.mark.parametrize("config_cls", [APCNNConfig, APLSTMConfig])
def test_cosine_head_with_three_outputs_raises(config_cls: type) -> None:
    with pytest.raises(ValueError, match="head='cosine'"):
        config_cls(encoder=ENCODER, head="cosine", num_outputs=3)


def test_ap_cnn_rejects_an_even_width() -> None:
    with pytest.raises(ValueError, match="kernel_size"):
        APCNNConfig(encoder=ENCODER, kernel_size=2)
