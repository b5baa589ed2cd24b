"""HCRN beyond the common suite: the affinities' algebra, masking and the poolings by hand."""

from __future__ import annotations

import math

import pytest
import torch

from attnmatch.inputs import TokenEncoderConfig
from attnmatch.models.hcrn import Affinity, HCRNConfig, HermitianIntraAttention
from attnmatch.nn.coattention import alignment_pool, extractive_pool

from .conftest import make_batch, random_pairs, tiny_model

torch.set_default_dtype(torch.float32)


def _states(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _complex(aff: Affinity, x: torch.Tensor) -> torch.Tensor:
    """x + i ReLU(W x + b) as a torch complex tensor (the reference for the real/imag halves)."""
    return torch.complex(x, torch.relu(aff.complexify.proj(x)))


@torch.no_grad()
def test_hermitian_affinity_is_symmetric_under_swapping_the_texts() -> None:
    torch.manual_seed(0)
    aff = Affinity("hermitian", 4)
    a, b = _states(1, 2, 3, 4), _states(2, 2, 5, 4)
    torch.testing.assert_close(aff(a, b), aff(b, a).transpose(1, 2))


@torch.no_grad()
@pytest.mark.parametrize("kind", ["hermitian_bilinear", "complex_diagonal"])
def test_asymmetric_affinities_are_not_symmetric(kind: str) -> None:
    torch.manual_seed(0)
    aff = Affinity(kind, 4)  # type: ignore[arg-type]
    if kind == "hermitian_bilinear":
        assert not torch.allclose(aff.m_real, aff.m_real.T)
    a, b = _states(1, 2, 3, 4), _states(2, 2, 5, 4)
    assert (aff(a, b) - aff(b, a).transpose(1, 2)).abs().max() > 1e-3


@torch.no_grad()
def test_bilinear_with_a_symmetric_m_is_symmetric() -> None:
    torch.manual_seed(0)
    aff = Affinity("hermitian_bilinear", 4)
    aff.m_real.copy_(aff.m_real + aff.m_real.T)
    aff.m_imag.copy_(aff.m_imag + aff.m_imag.T)
    a, b = _states(1, 2, 3, 4), _states(2, 2, 5, 4)
    torch.testing.assert_close(aff(a, b), aff(b, a).transpose(1, 2))


@torch.no_grad()
def test_hermitian_matches_torch_complex_on_a_hand_example() -> None:
    aff = Affinity("hermitian", 2)
    aff.complexify.proj.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
    aff.complexify.proj.bias.zero_()
    a = torch.tensor([[[1.0, -1.0]]])  # a = (1 + 1i, -1 + 0i)
    b = torch.tensor([[[2.0, 3.0]]])  # b = (2 + 2i, 3 + 6i)
    # Re(conj(a)^T b) = Re((1 - 1i)(2 + 2i) + (-1)(3 + 6i)) = Re(4 + 0i - 3 - 6i) = 1
    assert aff(a, b).item() == pytest.approx(1.0)
    ca, cb = _complex(aff, a), _complex(aff, b)
    ref = (ca.conj() @ cb.transpose(1, 2)).real
    torch.testing.assert_close(aff(a, b), ref)


@torch.no_grad()
def test_complex_affinities_match_torch_complex() -> None:
    torch.manual_seed(0)
    a, b = _states(3, 2, 3, 4), _states(4, 2, 5, 4)
    bil = Affinity("hermitian_bilinear", 4)
    m = torch.complex(bil.m_real, bil.m_imag)  # (D, D)
    ref = (_complex(bil, a) @ m @ _complex(bil, b).transpose(1, 2)).real  # Re(a^T M b)
    torch.testing.assert_close(bil(a, b), ref, atol=1e-5, rtol=1e-5)

    diag = Affinity("complex_diagonal", 4)
    w = torch.complex(diag.w_real, diag.w_imag)  # (D,)
    ref = ((_complex(diag, a) * w) @ _complex(diag, b).conj().transpose(1, 2)).real
    torch.testing.assert_close(diag(a, b), ref, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_real_affinity_is_vanilla_coattention() -> None:
    torch.manual_seed(0)
    aff = Affinity("real", 4)
    a, b = _states(1, 2, 3, 4), _states(2, 2, 5, 4)
    f = lambda x: torch.relu(aff.proj(x))  # noqa: E731
    torch.testing.assert_close(aff(a, b), f(a) @ f(b).transpose(1, 2))


@torch.no_grad()
def test_hermitian_model_affinity_is_transposed_when_texts_swap() -> None:
    model = tiny_model("hcrn_complex").eval()
    left, right = random_pairs(4, seed=3)
    s = model.attention(make_batch(left, right))["affinity"]
    s_swapped = model.attention(make_batch(right, left))["affinity"]
    torch.testing.assert_close(s, s_swapped.transpose(1, 2))


def test_alignment_weights_put_zero_mass_on_padding() -> None:
    affinity = _states(5, 2, 3, 4)
    left, right = _states(6, 2, 3, 2), _states(7, 2, 4, 2)
    lmask = torch.tensor([[True, True, False], [True, True, True]])
    rmask = torch.tensor([[True, False, False, False], [True, True, True, False]])
    out = alignment_pool(affinity, left, lmask, right, rmask)
    cells = lmask.unsqueeze(-1) & rmask.unsqueeze(-2)
    for key in ("left_weights", "right_weights"):
        assert (out[key][~cells] == 0).all()
    # Real rows sum to 1 over real columns, real columns over real rows.
    torch.testing.assert_close(out["left_weights"].sum(-1)[lmask], torch.ones(int(lmask.sum())))
    torch.testing.assert_close(out["right_weights"].sum(-2)[rmask], torch.ones(int(rmask.sum())))
    # Padding values never leak into the aligned vectors.
    moved = alignment_pool(
        affinity.masked_fill(~cells, 1e4),
        left.masked_fill(~lmask.unsqueeze(-1), 1e4),
        lmask,
        right.masked_fill(~rmask.unsqueeze(-1), 1e4),
        rmask,
    )
    torch.testing.assert_close(
        moved["left_aligned"][lmask], out["left_aligned"][lmask], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        moved["right_aligned"][rmask], out["right_aligned"][rmask], atol=1e-5, rtol=1e-5
    )


def test_extractive_pooling_by_hand_on_a_2x3_example() -> None:
    s = torch.tensor([[[1.0, 0.0, 2.0], [0.0, 3.0, -1.0]]])  # (1, 2, 3)
    left = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (1, 2, 2)
    right = torch.tensor([[[1.0, 1.0], [2.0, 0.0], [0.0, 4.0]]])  # (1, 3, 2)
    ones_l, ones_r = torch.ones(1, 2, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool)
    out = extractive_pool(s, left, ones_l, right, ones_r)
    # Row maxima (2, 3): left weights softmax(2, 3) = (1/(1+e), e/(1+e)).
    wl = torch.tensor([1 / (1 + math.e), math.e / (1 + math.e)])
    # Column maxima (1, 3, 2): right weights softmax(1, 3, 2) = (e, e^3, e^2) / Z.
    z = math.e + math.e**3 + math.e**2
    wr = torch.tensor([math.e / z, math.e**3 / z, math.e**2 / z])
    torch.testing.assert_close(out["left_weights"][0], wl)
    torch.testing.assert_close(out["right_weights"][0], wr)
    torch.testing.assert_close(out["left_pooled"][0], wl)  # left rows are the unit vectors
    expected_right = torch.tensor([wr[0] + 2 * wr[1], wr[0] + 4 * wr[2]])
    torch.testing.assert_close(out["right_pooled"][0], expected_right)

    # Masking the third right token: column maxima over real cells only (1, 3), rows (1, 3).
    rmask = torch.tensor([[True, True, False]])
    masked = extractive_pool(s, left, ones_l, right, rmask)
    torch.testing.assert_close(
        masked["left_weights"][0], torch.softmax(torch.tensor([1.0, 3.0]), 0)
    )
    torch.testing.assert_close(
        masked["right_weights"][0],
        torch.cat([torch.softmax(torch.tensor([1.0, 3.0]), 0), torch.zeros(1)]),
    )


@torch.no_grad()
def test_intra_attention_ignores_padding_and_concatenates() -> None:
    torch.manual_seed(0)
    intra = HermitianIntraAttention(3)
    x = _states(8, 2, 4, 3)
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    out, weights = intra(x, mask)
    assert out.shape == (2, 4, 6)
    torch.testing.assert_close(out[..., 3:], x)
    assert (weights[0, :, 2:] == 0).all() and (weights[0, 2:] == 0).all()
    alone, _ = intra(x[:1, :2], mask[:1, :2])
    torch.testing.assert_close(alone[0], out[0, :2])


@torch.no_grad()
@pytest.mark.parametrize(
    ("preset", "pooling"),
    [("hcrn", "alignment"), ("hcrn_real", "extractive"), ("hcrn_diagonal", "alignment")],
)
def test_attention_maps_have_plot_shapes(preset: str, pooling: str) -> None:
    model = tiny_model(preset, pooling=pooling).eval()
    left, right = random_pairs(3, seed=4)
    batch = make_batch(left, right)
    att = model.attention(batch)
    b, lt, rt = 3, batch.left_ids.shape[1], batch.right_ids.shape[1]
    assert att["affinity"].shape == (b, lt, rt)
    if pooling == "alignment":
        assert att["left_weights"].shape == att["right_weights"].shape == (b, lt, rt)
    else:
        assert att["left_weights"].shape == (b, lt) and att["right_weights"].shape == (b, rt)
    if model.config.intra:
        assert att["left_intra"].shape == (b, lt, lt)


def test_cosine_head_with_several_outputs_is_a_config_error() -> None:
    enc = TokenEncoderConfig(vocab_size=10, embedding_dim=4)
    with pytest.raises(ValueError, match="head='cosine'"):
        HCRNConfig(encoder=enc, head="cosine", num_outputs=3)
    assert HCRNConfig(encoder=enc, num_outputs=3).head == "auto"
