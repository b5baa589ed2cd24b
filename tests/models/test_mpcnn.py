"""Attention MP-CNN: the attention input layer by hand, the similarity layer's size, the
grouped per-dimension convolution against a loop, masked pooling."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from attnmatch.models.mpcnn import MPCNN, attention_input, similarity_feature_count

from .conftest import make_batch, random_pairs, tiny_model


def test_attention_input_layer_by_hand_on_a_2x3_example() -> None:
    s0 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (1, 2, 2)
    s1 = torch.tensor([[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])  # (1, 3, 2)
    # D = [[1, 1/sqrt2, 0], [0, 1/sqrt2, 1]]; E0 = rows summed, E1 = columns summed.
    r = 1 / math.sqrt(2)
    e0 = [1 + r, r + 1]
    e1 = [1.0, 2 * r, 1.0]
    a0 = [math.exp(v) / sum(math.exp(u) for u in e0) for v in e0]  # [0.5, 0.5]
    a1 = [math.exp(v) / sum(math.exp(u) for u in e1) for v in e1]
    out0, out1, got0, got1 = attention_input(
        s0, torch.ones(1, 2, dtype=torch.bool), s1, torch.ones(1, 3, dtype=torch.bool)
    )
    torch.testing.assert_close(got0[0], torch.tensor(a0))
    torch.testing.assert_close(got1[0], torch.tensor(a1))
    # attenEmb = [S; A . S]
    want1 = torch.cat([s1[0], torch.tensor(a1).unsqueeze(-1) * s1[0]], dim=-1)
    torch.testing.assert_close(out1[0], want1)
    torch.testing.assert_close(out0[0, :, 2:], 0.5 * s0[0])
    # A padded column (a 4th right token, masked out) changes nothing and gets weight 0.
    s1p = torch.cat([s1, torch.tensor([[[5.0, -3.0]]])], dim=1)
    mask = torch.tensor([[True, True, True, False]])
    _, out1p, got0p, got1p = attention_input(s0, torch.ones(1, 2, dtype=torch.bool), s1p, mask)
    torch.testing.assert_close(got0p, got0)
    torch.testing.assert_close(got1p[0, :3], got1[0])
    assert got1p[0, 3] == 0


@pytest.mark.parametrize("attention", [True, False])
@pytest.mark.parametrize(
    ("widths", "per_dim_widths", "filters", "per_dim"),
    [((1, 2, 3), (1, 2), 5, 2), ((2,), (1,), 3, 1), ((1, 3, 4, 5), (1, 2, 3), 4, 3)],
)
def test_similarity_feature_count_matches_the_formula(
    attention: bool, widths: tuple, per_dim_widths: tuple, filters: int, per_dim: int
) -> None:
    model = tiny_model(
        "mpcnn",
        attention=attention,
        widths=widths,
        per_dim_widths=per_dim_widths,
        holistic_filters=filters,
        per_dim_filters=per_dim,
    )
    assert isinstance(model, MPCNN)
    left, right = random_pairs(3, seed=1)
    with torch.no_grad():
        features = model._encode(make_batch(left, right))["features"]
    # horizontal 3 poolings x F x 2; vertical A 3 x (W^2 + 1) x 3; vertical B 2 x W_B x G x 3
    w = len(widths)
    want = 3 * filters * 2 + 3 * (w * w + 1) * 3 + 2 * len(per_dim_widths) * per_dim * 3
    assert features.shape == (3, want) == (3, similarity_feature_count(model.config))


def test_grouped_per_dimension_convolution_equals_a_loop_over_dimensions() -> None:
    model = tiny_model("mpcnn_attention")
    conv = model.per_dim[1]  # width 2
    dim, g = conv.in_channels, model.config.per_dim_filters
    x = torch.randn(2, dim, 6)
    with torch.no_grad():
        fast = conv(x).view(2, dim, g, -1)
        for d in range(dim):
            for f in range(g):
                k = d * g + f
                ref = torch.nn.functional.conv1d(
                    x[:, d : d + 1], conv.weight[k : k + 1], conv.bias[k : k + 1]
                )[:, 0]
                torch.testing.assert_close(fast[:, d, f], ref)


def test_padding_never_wins_a_pooling_and_short_texts_keep_one_window() -> None:
    model = tiny_model("mpcnn_attention")
    short = make_batch([[3]], [[4, 5]])  # one token: shorter than widths 2 and 3
    padded = make_batch([[3]], [[4, 5]], extra_pad=4)
    with torch.no_grad():
        a = model._encode(short)["features"]
        b = model._encode(padded)["features"]
    torch.testing.assert_close(a, b)
    assert torch.isfinite(a).all() and a.abs().max() < 1e3  # no +-1e4 sentinel leaked


def test_plain_mpcnn_has_no_attention_and_half_the_input() -> None:
    plain = tiny_model("mpcnn")
    full = tiny_model("mpcnn_attention")
    assert plain.holistic[0].in_channels * 2 == full.holistic[0].in_channels
    left, right = random_pairs(2, seed=3)
    assert plain.attention(make_batch(left, right)) == {}
    att = full.attention(make_batch(left, right))
    torch.testing.assert_close(att["left_attention"].sum(-1), torch.ones(2))


def test_config_errors() -> None:
    config = tiny_model("mpcnn").config
    with pytest.raises(ValueError, match="widths"):
        dataclasses.replace(config, widths=(1, 1))
    with pytest.raises(ValueError, match="per_dim_widths"):
        dataclasses.replace(config, per_dim_widths=())


def _reference_sentence(model: MPCNN, x: torch.Tensor, n: int) -> dict[str, torch.Tensor]:
    """Blocks A and B of one text of n real tokens, written literally: every window convolved
    on its own, tanh, then max/min/mean over the windows. Shape: x (n, I) -> as `_sentence`."""
    cfg = model.config
    out: dict[str, list[torch.Tensor]] = {}
    for width, conv in zip(cfg.widths, model.holistic, strict=True):
        padded = torch.nn.functional.pad(x[:n], (0, 0, 0, max(width - n, 0)))  # (max(n, ws), I)
        windows = [
            torch.tanh(conv.weight.flatten(1) @ padded[t : t + width].T.flatten() + conv.bias)
            for t in range(max(n - width + 1, 1))
        ]  # each (F,)
        h = torch.stack(windows)  # (T', F)
        for p, v in (("max", h.amax(0)), ("min", h.amin(0)), ("mean", h.mean(0))):
            out.setdefault(f"A{p}", []).append(v)
    ref = {k: torch.stack(v) for k, v in out.items()}  # (W, F)
    real = x[:n]  # (n, I)
    ref |= {"Ainfmax": real.amax(0), "Ainfmin": real.amin(0), "Ainfmean": real.mean(0)}
    g = cfg.per_dim_filters
    per_dim: dict[str, list[torch.Tensor]] = {}
    for width, conv in zip(cfg.per_dim_widths, model.per_dim, strict=True):
        padded = torch.nn.functional.pad(x[:n], (0, 0, 0, max(width - n, 0)))
        w = conv.weight.view(-1, g, width)  # (I, G, ws)
        b = conv.bias.view(-1, g)  # (I, G)
        windows = [
            torch.tanh((w * padded[t : t + width].T.unsqueeze(1)).sum(-1) + b)
            for t in range(max(n - width + 1, 1))
        ]  # each (I, G)
        z = torch.stack(windows)  # (T', I, G)
        per_dim.setdefault("Bmax", []).append(z.amax(0))
        per_dim.setdefault("Bmin", []).append(z.amin(0))
    return ref | {k: torch.stack(v) for k, v in per_dim.items()}  # B*: (W_B, I, G)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
def test_sentence_model_matches_a_literal_reference_with_gradients(fast: bool) -> None:
    """Both pooling paths (fast: gathered arg-max/min, block B's width-1 filters pooled from
    ws = inf; reference: masked amax/amin over full maps) equal the literal definition, values
    and gradients, on ragged padded texts."""
    model = tiny_model("mpcnn_attention", trainable=True, fast_pooling=fast)
    torch.manual_seed(4)
    lengths = [5, 1, 2, 3]
    dim = model.holistic[0].in_channels
    x = torch.randn(len(lengths), 7, dim, requires_grad=True)  # padded to 7 tokens
    mask = torch.arange(7).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    fast = model._sentence(x, mask)
    refs = [_reference_sentence(model, x[i], n) for i, n in enumerate(lengths)]
    weights = {k: torch.randn_like(v) for k, v in fast.items()}
    with torch.inference_mode():  # the no-autograd pooling branch
        inference = model._sentence(x.detach(), mask)
    for key in fast:
        torch.testing.assert_close(fast[key], torch.stack([r[key] for r in refs]), msg=key)
        torch.testing.assert_close(inference[key], fast[key].detach(), msg=key)
    params = [x, *model.holistic.parameters(), *model.per_dim.parameters()]
    loss_fast = sum((fast[k] * weights[k]).sum() for k in fast)
    loss_ref = sum((torch.stack([r[k] for r in refs]) * weights[k]).sum() for k in fast)
    grads_fast = torch.autograd.grad(loss_fast, params)
    grads_ref = torch.autograd.grad(loss_ref, params)
    for got, want in zip(grads_fast, grads_ref, strict=True):
        torch.testing.assert_close(got, want)
