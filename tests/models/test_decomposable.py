"""Decomposable attention beyond the common suite: attend, intra-attention and aggregation by hand."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch

from attnmatch.inputs import TokenEncoderConfig
from attnmatch.models import get_preset
from attnmatch.models.decomposable import (
    DecomposableAttention,
    DecomposableAttentionConfig,
    IntraSentenceAttention,
    attend,
    distance_buckets,
)

from .conftest import make_batch, random_pairs, tiny_model

PRESETS = ["decomposable_attention", "decomposable_attention_intra"]


def _tiny(name: str, *, num_outputs: int = 1, **overrides: Any) -> DecomposableAttention:
    model = tiny_model(name, num_outputs=num_outputs, trainable=True, **overrides)
    assert isinstance(model, DecomposableAttention)
    return model


def test_attend_by_hand() -> None:
    left_f = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # F(a), (1, 2, 2)
    right_f = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]])  # F(b), (1, 3, 2)
    a = torch.tensor([[[1.0], [2.0]]])  # (1, 2, 1)
    b = torch.tensor([[[1.0], [2.0], [4.0]]])  # (1, 3, 1)
    ones_l, ones_r = torch.ones(1, 2, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool)
    out = attend(left_f, right_f, a, ones_l, b, ones_r)
    e = math.e
    torch.testing.assert_close(out["scores"][0], torch.tensor([[1.0, 0.0, 1.0], [0.0, 2.0, 1.0]]))
    # beta_i = sum_j softmax_j(e_ij) b_j: rows (1, 0, 1) and (0, 2, 1).
    beta = torch.tensor([(5 * e + 2) / (2 * e + 1), (1 + 2 * e**2 + 4 * e) / (1 + e**2 + e)])
    # alpha_j = sum_i softmax_i(e_ij) a_i: columns (1, 0), (0, 2), (1, 1).
    alpha = torch.tensor([(e + 2) / (e + 1), (1 + 2 * e**2) / (1 + e**2), 1.5])
    torch.testing.assert_close(out["beta"][0, :, 0], beta)
    torch.testing.assert_close(out["alpha"][0, :, 0], alpha)

    # The third right token is padding: it gets no weight, and its own alpha is zero.
    rmask = torch.tensor([[True, True, False]])
    masked = attend(left_f, right_f, a, ones_l, b, rmask)
    beta_masked = torch.tensor([(e + 2) / (e + 1), (1 + 2 * e**2) / (1 + e**2)])
    torch.testing.assert_close(masked["beta"][0, :, 0], beta_masked)
    torch.testing.assert_close(masked["alpha"][0, :, 0], torch.cat([alpha[:2], torch.zeros(1)]))


def test_beta_ignores_padding_appended_to_the_right_side() -> None:
    g = torch.Generator().manual_seed(0)
    left_f, right_f = torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g)
    a, b = torch.randn(2, 3, 6, generator=g), torch.randn(2, 5, 6, generator=g)
    lmask = torch.tensor([[True, True, True], [True, True, False]])
    rmask = torch.tensor([[True, True, True, True, True], [True, True, True, False, False]])
    out = attend(left_f, right_f, a, lmask, b, rmask)
    # Append 3 padded right tokens holding large values, in features and vectors.
    junk_f, junk = torch.full((2, 3, 4), 50.0), torch.full((2, 3, 6), 1e4)
    pad = torch.zeros(2, 3, dtype=torch.bool)
    padded = attend(
        left_f,
        torch.cat([right_f, junk_f], 1),
        a,
        lmask,
        torch.cat([b, junk], 1),
        torch.cat([rmask, pad], 1),
    )
    torch.testing.assert_close(padded["beta"][lmask], out["beta"][lmask])
    torch.testing.assert_close(padded["alpha"][:, :5][rmask], out["alpha"][rmask])
    assert (padded["left_weights"][:, :, 5:] == 0).all()


@torch.no_grad()
@pytest.mark.parametrize("name", PRESETS)
def test_model_attention_weights_ignore_padding(name: str) -> None:
    model = _tiny(name).eval()
    left, right = random_pairs(4, seed=11)
    plain = model.attention(make_batch(left, right))
    padded = model.attention(make_batch(left, right, extra_pad=3))
    for i in range(4):
        n, m = len(left[i]), len(right[i])
        for key in ("scores", "left_weights", "right_weights"):
            torch.testing.assert_close(padded[key][i, :n, :m], plain[key][i, :n, :m])
        assert (padded["left_weights"][i, :, m:] == 0).all()
        if model.config.intra_attention:
            torch.testing.assert_close(
                padded["left_intra"][i, :n, :n], plain["left_intra"][i, :n, :n]
            )


def test_distance_buckets_by_hand() -> None:
    buckets = distance_buckets(13, 10)
    assert buckets.shape == (13, 13)
    assert buckets[0, 0] == buckets[7, 7] == 10  # distance 0
    assert buckets[5, 3] == 12 and buckets[3, 5] == 8  # distance +2 and -2: the sign is kept
    assert buckets[10, 0] == buckets[11, 0] == buckets[12, 0] == 20  # 10, 11, 12 share one bucket
    assert buckets[0, 10] == buckets[0, 11] == buckets[0, 12] == 0  # -10, -11, -12 likewise
    assert buckets[9, 0] == 19 and buckets[0, 9] == 1  # 9 and -9 have their own
    assert int(buckets.max()) == 20 and int(buckets.min()) == 0  # 21 buckets


@torch.no_grad()
def test_intra_attention_applies_the_distance_bias() -> None:
    intra = IntraSentenceAttention(2, 3, max_distance=1, dropout=0.0)
    intra.ffn[4].weight.zero_()  # F_intra(x) = ReLU(0) = 0: the scores are the bias alone
    intra.ffn[4].bias.zero_()
    intra.distance_bias.copy_(torch.tensor([1.0, 0.0, 2.0]))  # d_{-1}, d_0, d_{+1}
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [9.0, 9.0]]])  # last token: padding
    mask = torch.tensor([[True, True, True, False]])
    out, weights = intra(x, mask)
    # f_ij = d_{clip(i-j)}: row 0 sees distances (0, -1, -2 -> -1), row 2 sees (2 -> 1, 1, 0).
    expected = torch.softmax(
        torch.tensor([[0.0, 1.0, 1.0], [2.0, 0.0, 1.0], [2.0, 2.0, 0.0]]), dim=-1
    )
    torch.testing.assert_close(weights[0, :3, :3], expected)
    assert (weights[0, :, 3] == 0).all() and (weights[0, 3] == 0).all()
    torch.testing.assert_close(out[0, :, :2], x[0])  # [a; a']
    torch.testing.assert_close(out[0, :3, 2:], expected @ x[0, :3])
    torch.testing.assert_close(out[0, 3, 2:], torch.zeros(2))


@torch.no_grad()
def test_aggregation_is_a_masked_sum() -> None:
    """With G's last layer constant at 1, v1 and v2 count each side's real tokens."""
    model = _tiny("decomposable_attention", hidden_size=3).eval()
    model.compare_ffn[4].weight.zero_()
    model.compare_ffn[4].bias.fill_(1.0)
    seen: list[torch.Tensor] = []
    model.aggregate_ffn.register_forward_hook(lambda _m, args, _out: seen.append(args[0]))
    left, right = [[3, 4], [5, 6, 7, 8]], [[9], [10, 11, 12]]
    model(make_batch(left, right, extra_pad=2))
    expected = torch.tensor([[2.0] * 3 + [1.0] * 3, [4.0] * 3 + [3.0] * 3])
    torch.testing.assert_close(seen[0], expected)


def test_presets_differ_only_in_intra_attention() -> None:
    assert get_preset("decomposable_attention").overrides == {"intra_attention": False}
    assert get_preset("decomposable_attention_intra").overrides == {"intra_attention": True}
    vanilla, intra = (_tiny(name).config for name in PRESETS)
    assert not vanilla.intra_attention and intra.intra_attention
    assert dataclasses.replace(vanilla, intra_attention=True) == intra


def test_intra_attention_doubles_the_attend_and_compare_inputs() -> None:
    vanilla, intra = (_tiny(name, hidden_size=5) for name in PRESETS)
    h = 5
    assert vanilla.intra is None and intra.intra is not None
    assert vanilla.attend_ffn[1].in_features == h and intra.attend_ffn[1].in_features == 2 * h
    assert vanilla.compare_ffn[1].in_features == 2 * h
    assert intra.compare_ffn[1].in_features == 4 * h
    assert vanilla.aggregate_ffn[1].in_features == intra.aggregate_ffn[1].in_features == 2 * h
    assert vanilla.projection.bias is None and vanilla.projection.out_features == h


@pytest.mark.parametrize("name", PRESETS)
def test_local_common_checks(name: str) -> None:
    """Shape, padding invariance and gradients under the local tiny config (see TINY above)."""
    model = _tiny(name, num_outputs=3, dropout=0.0).eval()
    left, right = random_pairs(6, seed=1)
    batched = model(make_batch(left, right, extra_pad=3))
    assert batched.shape == (6, 3) and torch.isfinite(batched).all()
    for i in range(6):
        alone = model(make_batch([left[i]], [right[i]]))
        torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)

    model.train()
    logits = model(make_batch(left, right))
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2] * 2)).backward()
    for pname, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, pname


def test_fully_padded_side_gives_finite_scores() -> None:
    model = _tiny("decomposable_attention_intra").eval()
    batch = make_batch([[3, 4], [5]], [[6, 7, 8], [9]])
    batch.right_mask[1] = False
    batch.right_ids[1] = 0
    out = model(batch)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize(
    ("field", "value"),
    [("hidden_size", 0), ("num_outputs", 0), ("max_distance", -1), ("dropout", 1.0)],
)
def test_invalid_config_is_a_clear_error(field: str, value: object) -> None:
    enc = TokenEncoderConfig(vocab_size=10, embedding_dim=4)
    with pytest.raises(ValueError, match=field):
        DecomposableAttentionConfig(encoder=enc, **{field: value})  # type: ignore[arg-type]


def test_paper_defaults() -> None:
    config = DecomposableAttentionConfig(encoder=TokenEncoderConfig(vocab_size=10))
    assert (config.hidden_size, config.max_distance, config.dropout) == (200, 10, 0.2)
    assert not config.intra_attention and config.num_outputs == 1
