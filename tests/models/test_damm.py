"""DAMM: attention by hand, cross-attention padding invariance, the sub-layer wiring, TextCNN
masking, the ablations and config errors."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from attnmatch.models.damm import (
    DAMM,
    SubLayers,
    TextCNN,
    multi_head_attention,
    sinusoidal_positions,
)

from .conftest import make_batch, random_pairs, tiny_model


def _sublayers(residual: bool = True) -> SubLayers:
    config = dataclasses.replace(tiny_model("damm").config, residual=residual)
    torch.manual_seed(1)
    return SubLayers(config).eval()


def test_multi_head_attention_matches_a_per_head_loop() -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    key_mask = torch.tensor([[True, True, False, True, False]])
    got = multi_head_attention(q, k, v, key_mask)  # (1, 3, 8)
    for head in range(2):
        for i in range(3):
            scores = [
                (q[0, head, i] @ k[0, head, j]).item() / math.sqrt(4)
                for j in range(5)
                if key_mask[0, j]
            ]
            weights = torch.softmax(torch.tensor(scores), dim=0)
            want = sum(w * v[0, head, j] for w, j in zip(weights, [0, 1, 3], strict=True))
            torch.testing.assert_close(got[0, i, 4 * head : 4 * head + 4], want)


def test_an_empty_other_side_gives_finite_outputs() -> None:
    q, k, v = torch.randn(1, 1, 2, 3), torch.randn(1, 1, 4, 3), torch.randn(1, 1, 4, 3)
    out = multi_head_attention(q, k, v, torch.zeros(1, 4, dtype=torch.bool))
    assert torch.isfinite(out).all()


def test_cross_attention_of_a_query_token_ignores_padding_on_the_other_side() -> None:
    layer = _sublayers()
    d = layer.query.in_features
    torch.manual_seed(2)
    h_a = torch.randn(1, 3, d)
    h_b = torch.randn(1, 4, d)
    b_mask = torch.tensor([[True, True, True, False]])
    with torch.no_grad():
        short = layer(h_a, h_b, b_mask)
        # Three more padding positions holding large garbage values.
        padded_b = torch.cat([h_b, 100 * torch.randn(1, 3, d)], dim=1)
        padded_mask = torch.cat([b_mask, torch.zeros(1, 3, dtype=torch.bool)], dim=1)
        long = layer(h_a, padded_b, padded_mask)
        changed = layer(h_a, padded_b, torch.ones(1, 7, dtype=torch.bool))
    torch.testing.assert_close(short, long)
    assert not torch.allclose(short, changed)  # the garbage does matter once unmasked


def test_sublayers_follow_the_draft_without_residual_and_post_ln_with_it() -> None:
    for residual in (False, True):
        layer = _sublayers(residual)
        d = layer.query.in_features
        x, mem = torch.randn(2, 3, d), torch.randn(2, 5, d)
        mask = torch.ones(2, 5, dtype=torch.bool)
        k, v = layer.key_value(mem).chunk(2, dim=-1)
        split = layer._split
        with torch.no_grad():
            att = multi_head_attention(split(layer.query(x)), split(k), split(v), mask)
            if residual:
                m = torch.nn.functional.layer_norm(x + att, (d,), *_ln(layer.norm_attention))
                want = torch.nn.functional.layer_norm(m + layer.ffn(m), (d,), *_ln(layer.norm_ffn))
            else:  # H = gelu(M W1) W2 on the concatenated heads
                want = layer.ffn(att)
            torch.testing.assert_close(layer(x, mem, mask), want)


def _ln(norm: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    assert isinstance(norm, torch.nn.LayerNorm)
    return norm.weight, norm.bias


def test_text_cnn_masks_padding_and_keeps_one_window_for_short_texts() -> None:
    torch.manual_seed(3)
    cnn = TextCNN(4, (1, 2, 3), 5)
    x = torch.randn(2, 6, 4)
    mask = torch.tensor([[True] * 6, [True, False, False, False, False, False]])
    with torch.no_grad():
        out = cnn(x, mask)
        alone = cnn(x[1:, :1], mask[1:, :1])  # the one-token text on its own
        garbage = cnn(torch.where(mask.unsqueeze(-1), x, 50.0), mask)
    torch.testing.assert_close(out[1:], alone)
    torch.testing.assert_close(out, garbage)
    # Width 3 over one token: the single zero-padded window [x0, 0, 0].
    conv = cnn.convs[2]
    assert isinstance(conv, torch.nn.Conv1d)
    window = torch.nn.functional.pad(x[1, :1].T, (0, 2))  # (4, 3)
    want = torch.relu((conv.weight * window).sum(dim=(1, 2)) + conv.bias)
    torch.testing.assert_close(out[1, 10:], want)


def test_sinusoidal_positions_by_hand() -> None:
    enc = sinusoidal_positions(3, 4, torch.device("cpu"))
    torch.testing.assert_close(enc[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    want = [math.sin(2), math.cos(2), math.sin(2 / 100), math.cos(2 / 100)]
    torch.testing.assert_close(enc[2], torch.tensor(want))


def test_positional_encodings_reach_the_output() -> None:
    left, right = random_pairs(3, seed=5)
    left = [s if len(s) > 1 else s + [7] for s in left]
    swapped = [s[::-1] for s in left]
    model = tiny_model("damm", positional="sinusoidal").eval()
    with torch.no_grad():
        a = model(make_batch(left, right))
        b = model(make_batch(swapped, right))
    assert not torch.allclose(a, b)


def test_ablations_change_the_architecture() -> None:
    full = tiny_model("damm")
    one = tiny_model("damm_1block")
    three = tiny_model("damm_3block")
    no_cross = tiny_model("damm_no_cross")
    assert isinstance(full, DAMM) and isinstance(no_cross, DAMM)
    assert (len(one.blocks), len(full.blocks), len(three.blocks)) == (1, 2, 3)
    assert len(one.projections) == 0 and len(three.projections) == 2
    assert all(block.cross is None for block in no_cross.blocks)
    assert all(block.cross is not None for block in full.blocks)
    d = full.config.hidden_size
    assert full.text_cnn.convs[0].in_channels == 4 * d
    assert no_cross.text_cnn.convs[0].in_channels == d
    left, right = random_pairs(2, seed=6)
    for model in (full, one, three, no_cross):
        assert model.eval()(make_batch(left, right)).shape == (2, 1)


def test_config_errors() -> None:
    config = tiny_model("damm").config
    with pytest.raises(ValueError, match="divisible"):
        dataclasses.replace(config, hidden_size=9, num_heads=2)
    with pytest.raises(ValueError, match="num_blocks"):
        dataclasses.replace(config, num_blocks=0)
    with pytest.raises(ValueError, match="positional"):
        dataclasses.replace(config, positional="learned")
