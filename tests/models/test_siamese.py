"""Siamese baselines of HCRN (cbow_mlp, lstm, cnn): their equations on small examples."""

from __future__ import annotations

import pytest
import torch

from attnmatch.configs import ConfigError
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig
from attnmatch.models import resolve_model_config
from attnmatch.models.siamese import (
    CBOWMLPConfig,
    ConvEncoder,
    SiameseCNNConfig,
    SiameseLSTMConfig,
)
from attnmatch.nn.masking import masked_mean

from .conftest import DIM, VOCAB, make_batch, random_pairs, tiny_model

ENCODER = TokenEncoderConfig(vocab_size=VOCAB, embedding_dim=DIM)


def test_cbow_vector_is_the_masked_sum_of_projected_words() -> None:
    model = tiny_model("cbow_mlp").eval()
    left, right = [[3, 4, 5], [6]], [[7, 8], [9, 10, 11, 12]]
    batch = make_batch(left, right, extra_pad=2)
    left_vec, right_vec = model.encode(batch)
    table = model.token_encoder.embedding.weight
    w, b = model.projection.linear.weight, model.projection.linear.bias
    for side, vec in ((left, left_vec), (right, right_vec)):
        for i, ids in enumerate(side):
            projected = torch.relu(table[torch.tensor(ids)] @ w.T + b)  # (T, n), real words only
            torch.testing.assert_close(vec[i], projected.sum(dim=0))


def test_cbow_scores_with_the_mlp_even_for_one_output() -> None:
    model = tiny_model("cbow_mlp").eval()
    assert model.head.kind == "mlp"
    left, right = random_pairs(4, seed=20)
    assert model(make_batch(left, right)).shape == (4, 1)


def test_conv_encoder_ignores_what_padded_positions_hold() -> None:
    torch.manual_seed(0)
    conv = ConvEncoder(4, 5, 3)
    real = torch.randn(1, 3, 4)
    alone = conv(real, torch.ones(1, 3, dtype=torch.bool))  # (1, 3, 5)
    padded = torch.cat([real, 100 * torch.randn(1, 4, 4)], dim=1)  # garbage after the sequence
    mask = torch.tensor([[True] * 3 + [False] * 4])
    out = conv(padded, mask)  # (1, 7, 5)
    torch.testing.assert_close(out[:, :3], alone, atol=1e-6, rtol=1e-6)
    assert torch.equal(out[:, 3:], torch.zeros(1, 4, 5))


def test_cnn_output_unchanged_by_trailing_padding() -> None:
    model = tiny_model("cnn").eval()
    left, right = [[3, 4, 5, 6]], [[7, 8, 9]]
    plain = model(make_batch(left, right))
    for extra in (1, 2, 5):
        torch.testing.assert_close(
            model(make_batch(left, right, extra_pad=extra)), plain, atol=1e-6, rtol=1e-6
        )


def test_cnn_rejects_an_even_width() -> None:
    with pytest.raises(ValueError, match="kernel_size"):
        SiameseCNNConfig(encoder=ENCODER, kernel_size=4)


def test_lstm_mean_pooling_is_the_mean_of_the_real_states() -> None:
    model = tiny_model("lstm", pooling="mean").eval()
    left, right = [[3, 4, 5], [6]], [[7, 8], [9, 10, 11]]
    batch = make_batch(left, right, extra_pad=2)
    left_vec, _ = model.encode(batch)
    for i, ids in enumerate(left):
        one = make_batch([ids], [right[i]])
        words = model.projection(model.token_encoder(one.left_ids, one.left_mask), one.left_mask)
        states = model.rnn(words, one.left_mask)  # (1, T, 2n)
        expected = masked_mean(states, one.left_mask.unsqueeze(-1), dim=1)[0]
        torch.testing.assert_close(left_vec[i], expected, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(expected, states[0].mean(dim=0), atol=1e-6, rtol=1e-6)


def test_lstm_max_pooling_is_the_default() -> None:
    model = tiny_model("lstm").eval()
    assert model.config.pooling == "max"
    left, right = [[3, 4, 5]], [[7, 8]]
    batch = make_batch(left, right)
    words = model.projection(model.token_encoder(batch.left_ids, batch.left_mask), batch.left_mask)
    states = model.rnn(words, batch.left_mask)  # (1, 3, 2n)
    torch.testing.assert_close(model.encode(batch)[0][0], states[0].amax(dim=0))


@pytest.mark.parametrize("name", ["lstm", "cnn"])
def test_cosine_head_on_one_output_mlp_on_three(name: str) -> None:
    left, right = random_pairs(5, seed=21)
    batch = make_batch(left, right)
    ranking = tiny_model(name).eval()
    assert ranking.head.kind == "cosine"
    scores = ranking(batch)
    assert scores.shape == (5, 1) and (scores.abs() <= 1 + 1e-6).all()
    classifier = tiny_model(name, num_outputs=3).eval()
    assert classifier.head.kind == "mlp"
    assert classifier(batch).shape == (5, 3)


@pytest.mark.parametrize("config_cls", [CBOWMLPConfig, SiameseLSTMConfig, SiameseCNNConfig])
def test_cosine_head_with_three_outputs_raises(config_cls: type) -> None:
    with pytest.raises(ValueError, match="head='cosine'"):
        config_cls(encoder=ENCODER, head="cosine", num_outputs=3)


@pytest.mark.parametrize("name", ["cbow_mlp", "lstm", "cnn"])
def test_cosine_head_with_three_outputs_raises_from_a_dict(name: str) -> None:
    with pytest.raises(ConfigError, match="head='cosine'"):
        resolve_model_config(
            name,
            encoder={"vocab_size": VOCAB, "embedding_dim": DIM},
            num_outputs=3,
            overrides={"head": "cosine"},
        )


@pytest.mark.parametrize(
    ("field", "value"),
    [("hidden_size", 0), ("filters", 0), ("kernel_size", 0), ("mlp_hidden", 0), ("dropout", 1.0)],
)
def test_invalid_values_name_their_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        SiameseCNNConfig(encoder=ENCODER, **{field: value})


def _ranking_batch() -> PairBatch:
    """Two questions with 5 and 3 candidates, one candidate repeated, padding to spare."""
    left, right = random_pairs(8, seed=31)
    left = [left[0]] * 5 + [left[1]] * 3
    right[6] = right[2]  # a candidate shared by both questions
    return make_batch(left, right, extra_pad=2)


@pytest.mark.usefixtures("share_small_batches")
@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("cbow_mlp", {}),
        ("lstm", {}),
        ("lstm", {"pooling": "mean", "num_outputs": 3}),
        ("cnn", {}),
    ],
)
def test_shared_encodings_equal_the_plain_path(name: str, overrides: dict) -> None:
    # Up to float rounding: matmuls over fewer rows may block differently.
    batch = _ranking_batch()
    seen: list[int] = []
    outputs, grads = [], []
    for share in (True, False):
        model = tiny_model(name, trainable=True, share_encodings=share, **overrides).eval()
        hook = model.token_encoder.register_forward_hook(lambda m, a, out: seen.append(len(out)))
        out = model(batch)
        hook.remove()
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        outputs.append(out.detach())
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    assert seen == [2, 7, 8, 8]  # shared: each distinct text through the encoder once
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-6, rtol=1e-5)
    assert grads[0].keys() == grads[1].keys() and "token_encoder.embedding.weight" in grads[0]
    for key in grads[1]:
        torch.testing.assert_close(grads[0][key], grads[1][key], atol=1e-6, rtol=1e-5)
    model = tiny_model(name, **overrides).train()  # training: every pair's own encoding
    seen.clear()
    hook = model.token_encoder.register_forward_hook(lambda m, a, out: seen.append(len(out)))
    model(batch)
    hook.remove()
    assert seen == [8, 8]
