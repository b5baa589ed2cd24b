"""MV-LSTM / aMV-LSTM: the paper's equations on hand-computed examples."""

from __future__ import annotations

import math

import pytest
import torch

from attnmatch.data.schema import PairBatch
from attnmatch.models.mvlstm import AttentionGate, Interaction
from attnmatch.nn.masking import masked_kmax

from .conftest import make_batch, random_pairs, tiny_model


def test_attention_gate_equation_4_by_hand() -> None:
    gate = AttentionGate(2, "none")
    with torch.no_grad():
        gate.v.copy_(torch.tensor([1.0, -1.0]))
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [5.0, 0.0]]])  # last token is padding
    mask = torch.tensor([[True, True, True, False]])
    gated, alpha = gate(x, mask)
    # v . w_t = 1, -1, 0 over real tokens -> softmax
    z = math.e + math.exp(-1) + 1
    expected = torch.tensor([[math.e / z, math.exp(-1) / z, 1 / z, 0.0]])
    torch.testing.assert_close(alpha, expected)
    torch.testing.assert_close(gated, x * expected.unsqueeze(-1))
    scaled, alpha_len = AttentionGate.forward(_with_scale(gate, "length"), x, mask)
    torch.testing.assert_close(alpha_len, expected * 3)


def _with_scale(gate: AttentionGate, scale: str) -> AttentionGate:
    gate.scale = scale  # type: ignore[assignment]
    return gate


def test_cosine_interaction_concat_and_separate() -> None:
    u = torch.tensor([[[1.0, 0.0, 0.0, 2.0]]])  # (B=1, L=1, D=4): fwd [1, 0], bwd [0, 2]
    v = torch.tensor([[[1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 3.0, 0.0]]])  # (1, R=2, 4)
    concat = Interaction("cosine", 4, "concat", 1)(u, v)
    assert concat.shape == (1, 1, 1, 2)
    torch.testing.assert_close(
        concat[0, 0, 0], torch.tensor([3 / (math.sqrt(5) * math.sqrt(3)), 0.0])
    )
    separate = Interaction("cosine", 4, "separate", 1)(u, v)
    assert separate.shape == (1, 2, 1, 2)
    torch.testing.assert_close(separate[0, :, 0, 0], torch.tensor([1 / math.sqrt(2), 1.0]))


@pytest.mark.parametrize(
    "overrides",
    [
        {"interaction": "dot"},
        {"interaction": "bilinear", "directions": "separate"},
        {"interaction": "tensor", "tensor_slices": 3},
        {"directions": "separate"},
        {"shared_encoder": False},
        {"mlp_hidden": [7, 5], "gate": "both", "gate_scale": "length"},
    ],
)
def test_configuration_space_shapes_and_padding(overrides: dict) -> None:
    model = tiny_model("mvlstm", **overrides).eval()
    left, right = random_pairs(4, seed=11)
    batched = model(make_batch(left, right, extra_pad=2))
    assert batched.shape == (4, 1)
    for i in range(4):
        torch.testing.assert_close(
            model(make_batch([left[i]], [right[i]]))[0], batched[i], atol=1e-5, rtol=1e-5
        )


@pytest.mark.parametrize("k", [3, 50])  # fewer and more than the pair's real cells
def test_kmax_pooling_ignores_padded_cells(k: int) -> None:
    model = tiny_model("mvlstm", k=k).eval()
    left, right = random_pairs(1, seed=12)
    shape = (len(left[0]), len(right[0]))
    assert 3 < shape[0] * shape[1] < 50
    padded = make_batch(left, right, extra_pad=4)
    cells = padded.left_mask.unsqueeze(-1) & padded.right_mask.unsqueeze(-2)  # (1, L, R)
    assert model.attention(padded)["interaction"].shape[-2:] == (shape[0] + 4, shape[1] + 5)

    # Padded cells get large garbage (a real cosine is at most 1): were one of them pooled, it
    # would beat every real cell and change the score.
    filled: list[torch.Tensor] = []

    def fill_padding(module: torch.nn.Module, args: tuple, sim: torch.Tensor) -> torch.Tensor:
        if sim.shape[-2:] == shape:
            return sim  # the unpadded pair: no padded cell
        filled.append(sim.masked_fill(~cells.unsqueeze(1), 1e4))  # (1, C, L, R)
        return filled[-1]

    handle = model.interaction.register_forward_hook(fill_padding)
    try:
        with torch.no_grad():
            unpadded_score = model(make_batch(left, right))
            padded_score = model(padded)
    finally:
        handle.remove()
    assert len(filled) == 1 and int((filled[0] == 1e4).sum()) == int((~cells).sum())
    torch.testing.assert_close(padded_score, unpadded_score, atol=1e-5, rtol=1e-5)
    # The pooled features themselves: the k largest real cells, then zeros.
    sim, real = filled[0].reshape(1, -1), cells.reshape(1, -1)
    want = sim[real].sort(descending=True).values[:k]
    pooled = masked_kmax(sim, real, k)[0]
    torch.testing.assert_close(pooled[: len(want)], want)
    assert len(want) == min(k, shape[0] * shape[1]) and bool((pooled[len(want) :] == 0).all())


def test_invalid_config_is_rejected() -> None:
    with pytest.raises(Exception, match="tensor"):
        tiny_model("mvlstm", interaction="tensor", directions="separate")
    with pytest.raises(Exception, match="k must be"):
        tiny_model("mvlstm", k=0)


def _ranking_batch() -> PairBatch:
    """Two questions with 5 and 3 candidates, one candidate repeated, padding to spare."""
    left, right = random_pairs(8, seed=21)
    left = [left[0]] * 5 + [left[1]] * 3
    right[6] = right[2]  # a candidate shared by both questions
    return make_batch(left, right, extra_pad=2)


@pytest.mark.usefixtures("share_small_batches")
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"gate": "left"},
        {"gate": "both", "gate_scale": "length", "directions": "separate"},
        {"shared_encoder": False, "interaction": "tensor", "tensor_slices": 2},
    ],
)
def test_shared_encodings_equal_the_plain_path(overrides: dict) -> None:
    # Up to float rounding, not bitwise: the BiLSTM's matmuls over fewer rows may block
    # differently (measured differences ~1e-7).
    model = tiny_model("mvlstm", **overrides).eval()
    plain_model = tiny_model("mvlstm", share_encodings=False, **overrides).eval()
    batch = _ranking_batch()
    seen: list[int] = []
    hooks = [
        m.token_encoder.register_forward_hook(lambda m, a, out: seen.append(len(out)))
        for m in (model, plain_model)
    ]
    try:
        shared, shared_attn = model(batch), model.attention(batch)
        assert seen[:2] == [2, 7]  # each distinct text through the encoder once
        plain, plain_attn = plain_model(batch), plain_model.attention(batch)
        assert seen[-2:] == [8, 8]
    finally:
        for hook in hooks:
            hook.remove()
    torch.testing.assert_close(shared, plain, atol=1e-6, rtol=1e-5)
    assert shared_attn.keys() == plain_attn.keys()
    for key in plain_attn:
        torch.testing.assert_close(shared_attn[key], plain_attn[key], atol=1e-6, rtol=1e-5)


@pytest.mark.usefixtures("share_small_batches")
def test_shared_encodings_gradients_equal_the_plain_path() -> None:
    batch = _ranking_batch()
    grads = []
    for share in (True, False):  # eval: sharing on where the config says so
        model = tiny_model("mvlstm", gate="left", trainable=True, share_encodings=share).eval()
        (model(batch) * torch.linspace(-1, 1, 8).unsqueeze(1)).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and "token_encoder.embedding.weight" in grads[0]
    for name in grads[1]:
        torch.testing.assert_close(grads[0][name], grads[1][name], atol=1e-6, rtol=1e-5)


@pytest.mark.usefixtures("share_small_batches")
def test_training_shares_encodings_with_the_plain_paths_gradients() -> None:
    # No dropout in the encoder: a question's candidates share its states in training too, and
    # the gradients of its copies add up. The features' dropout draws the same masks per pair.
    batch = _ranking_batch()
    seen: list[int] = []
    outputs, grads = [], []
    for share in (True, False):
        model = tiny_model(
            "mvlstm", gate="left", trainable=True, dropout=0.5, share_encodings=share
        ).train()
        hook = model.token_encoder.register_forward_hook(lambda m, a, out: seen.append(len(out)))
        torch.manual_seed(3)
        out = model(batch)
        hook.remove()
        (out * torch.linspace(-1, 1, 8).unsqueeze(1)).sum().backward()
        outputs.append(out.detach())
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    assert seen == [2, 7, 8, 8]
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-6, rtol=1e-5)
    for name in grads[1]:
        torch.testing.assert_close(grads[0][name], grads[1][name], atol=1e-6, rtol=1e-5)


@pytest.mark.usefixtures("share_small_batches")
def test_training_with_encoder_dropout_encodes_every_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    import attnmatch.models.mvlstm as mvlstm

    def fail(*args: object) -> None:
        raise AssertionError("encode_distinct_pairs called with dropout in the encoder")

    monkeypatch.setattr(mvlstm, "encode_distinct_pairs", fail)
    model = tiny_model("mvlstm", encoder={"dropout": 0.2}).train()  # per-pair draws
    assert model(_ranking_batch()).shape == (8, 1)
    with pytest.raises(AssertionError, match="encode_distinct_pairs"):
        model.eval()(_ranking_batch())
