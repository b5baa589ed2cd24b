"""aNMM beyond the common suite: value-shared bins and the question gates by hand, padding."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from attnmatch import configs
from attnmatch.inputs import TokenEncoderConfig
from attnmatch.models.anmm import ANMM, ANMMConfig, value_shared_bins

from .conftest import make_batch, random_pairs, tiny_model


def _tiny(*, num_outputs: int = 1, **overrides: Any) -> ANMM:
    model = tiny_model("anmm", num_outputs=num_outputs, **overrides)
    assert isinstance(model, ANMM)
    return model


def test_value_shared_bins_by_hand() -> None:
    # bins=5: four bins of width 0.5 over [-1, 1): [-1, -.5) [-.5, 0) [0, .5) [.5, 1), then the
    # exact-match bin {1}. The last answer word is padding: its cosines (-0.75, 0.9) never count.
    cos = torch.tensor([[[1.0, 0.25, -1.0, -0.75], [0.5, 0.6, 1.0 - 1e-7, 0.9]]])  # (1, 2, 4)
    rmask = torch.tensor([[True, True, True, False]])
    out = value_shared_bins(cos, rmask, bins=5)
    # Sums, not counts: the second word's [.5, 1) bin holds 0.5 + 0.6.
    expected = torch.tensor([[[-1.0, 0.0, 0.25, 0.0, 1.0], [0.0, 0.0, 0.0, 1.1, 1.0 - 1e-7]]])
    torch.testing.assert_close(out, expected)

    # Every answer word real: the padded signals now land in their bins.
    all_real = value_shared_bins(cos, torch.ones(1, 4, dtype=torch.bool), bins=5)
    torch.testing.assert_close(all_real[0, 0], torch.tensor([-1.75, 0.0, 0.25, 0.0, 1.0]))
    torch.testing.assert_close(all_real[0, 1, 3], torch.tensor(2.0))


def test_bin_edges_with_200_bins() -> None:
    # 199 bins of width 2/199 over [-1, 1), then the exact-match bin 199.
    w = 2 / 199
    values = [-1.0, -1.0 + 1.5 * w, 0.99, 1.0, 1.01, 0.999999]  # 1.01: rounding above 1
    cos = torch.tensor(values).view(1, -1, 1)  # (1, 6, 1): one answer word per question word
    out = value_shared_bins(cos, torch.ones(1, 1, dtype=torch.bool), bins=200)
    assert out.shape == (1, 6, 200)
    assert out[0].nonzero()[:, 1].tolist() == [0, 1, 198, 199, 199, 199]
    torch.testing.assert_close(out[0].sum(-1), torch.tensor(values))


def test_bins_pass_gradients_to_real_signals_only() -> None:
    cos = torch.tensor([[[0.3, -0.2, 0.8]]], requires_grad=True)
    out = value_shared_bins(cos, torch.tensor([[True, True, False]]), bins=7)
    (out * torch.arange(7.0)).sum().backward()
    # d/dcos = the index of the bin the signal fell in (0.3 -> 3, -0.2 -> 2), 0 for padding.
    assert cos.grad is not None
    assert cos.grad[0, 0].tolist() == [3.0, 2.0, 0.0]


def _hand_model() -> ANMM:
    """E = 2; word 2 = (1, 0), word 3 = (0, 1), word 4 = (0, -1); bins = 5; w = (1, 0, 0, 0, 2),
    b = 0; gate v = (ln 3, 0)."""
    enc = TokenEncoderConfig(vocab_size=5, embedding_dim=2)
    model = ANMM(ANMMConfig(encoder=enc, bins=5)).eval()
    with torch.no_grad():
        model.token_encoder.embedding.weight.copy_(
            torch.tensor([[0.0, 0.0], [0.5, 0.5], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
        )
        linear = model.value_shared[0]
        assert isinstance(linear, torch.nn.Linear)
        linear.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0, 2.0]]))
        linear.bias.zero_()
        model.gate.weight.copy_(torch.tensor([[math.log(3.0), 0.0]]))
    return model


@torch.no_grad()
def test_score_by_hand() -> None:
    model = _hand_model()
    # Question (2, 3), answer (2, 4): cosines [[1, 0], [0, -1]] -> bin-sums (0, 0, 0, 0, 1) and
    # (-1, 0, 0, 0, 0) -> h = (tanh 2, tanh -1); gates softmax(ln 3, 0) = (3/4, 1/4).
    expected = 0.75 * math.tanh(2.0) + 0.25 * math.tanh(-1.0)
    out = model(make_batch([[2, 3]], [[2, 4]]))
    assert out.shape == (1, 1)
    torch.testing.assert_close(out, torch.tensor([[expected]]))
    att = model.attention(make_batch([[2, 3]], [[2, 4]]))
    torch.testing.assert_close(att["question_gates"], torch.tensor([[0.75, 0.25]]))
    torch.testing.assert_close(att["cosine"], torch.tensor([[[1.0, 0.0], [0.0, -1.0]]]))

    # The same pair next to a longer one (padded question and answer words) scores the same.
    batch = make_batch([[2, 3], [3, 3, 2, 4]], [[2, 4], [4, 4, 3, 2, 2]], extra_pad=4)
    torch.testing.assert_close(model(batch)[0], torch.tensor([expected]))


@torch.no_grad()
def test_question_gates_ignore_padded_question_words() -> None:
    model = _tiny().eval()
    left, right = random_pairs(6, seed=11)
    left[0] = [3, 4, 5, 6, 7]  # the longest question, so the others get padded question words
    batch = make_batch(left, right, extra_pad=5)
    att = model.attention(batch)
    gates, lmask = att["question_gates"], batch.left_mask
    assert (gates[~lmask] == 0).all()
    torch.testing.assert_close(gates.sum(-1), torch.ones(6))
    for i in range(6):
        alone = model.attention(make_batch([left[i]], [right[i]]))["question_gates"][0]
        torch.testing.assert_close(gates[i, : len(left[i])], alone)
    # A real word's id on the padded question positions changes nothing.
    reference = model(batch)
    batch.left_ids = batch.left_ids.masked_fill(~lmask, 9)
    torch.testing.assert_close(model(batch), reference)


@torch.no_grad()
@pytest.mark.parametrize("num_outputs", [1, 3])
def test_padding_invariance_with_a_lot_of_padding(num_outputs: int) -> None:
    model = _tiny(num_outputs=num_outputs, hidden_sizes=[4]).eval()
    left, right = random_pairs(5, seed=12)
    left[1], right[1] = [7], [7]  # an exact match, one word each
    batched = model(make_batch(left, right, extra_pad=40))
    assert batched.shape == (5, num_outputs)
    for i in range(5):
        alone = model(make_batch([left[i]], [right[i]]))
        torch.testing.assert_close(alone[0], batched[i], atol=1e-6, rtol=1e-6)


@torch.no_grad()
def test_several_outputs_are_a_linear_map_of_the_score() -> None:
    model = _tiny(num_outputs=3).eval()
    left, right = random_pairs(4, seed=13)
    batch = make_batch(left, right)
    score = model.attention(batch)
    gated = (score["question_gates"] * score["question_values"]).sum(-1, keepdim=True)  # (B, 1)
    assert model.output is not None
    torch.testing.assert_close(model(batch), model.output(gated))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"bins": 1}, "bins must be >= 2"),
        ({"hidden_sizes": (4, 0)}, "hidden_sizes"),
        ({"dropout": 1.0}, "dropout"),
        ({"num_outputs": 0}, "num_outputs"),
    ],
)
def test_config_errors(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(configs.ConfigError, match=message):
        _tiny(**overrides)
    enc = TokenEncoderConfig(vocab_size=10, embedding_dim=4)
    with pytest.raises(ValueError, match=message):
        ANMMConfig(encoder=enc, **overrides)
    with pytest.raises(ValueError, match="bins"):
        value_shared_bins(torch.zeros(1, 1, 1), torch.ones(1, 1, dtype=torch.bool), bins=1)
