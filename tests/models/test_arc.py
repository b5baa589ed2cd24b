"""ARC-I and ARC-II beyond the common suite: layer 1 against the paper's literal windows, masked
pooling by hand, heavy padding, texts shorter than the kernel, config errors."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from attnmatch.inputs import TokenEncoderConfig
from attnmatch.models.arc import (
    ARCIConfig,
    ARCIIConfig,
    ConvTower,
    PairwiseWindowConv,
    masked_max_pool1d,
    masked_max_pool2d,
)

from .conftest import VOCAB, make_batch, random_pairs, tiny_model


def _tiny(name: str, *, num_outputs: int = 1, **overrides: Any) -> torch.nn.Module:
    return tiny_model(name, num_outputs=num_outputs, **overrides).eval()


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
@pytest.mark.parametrize(("left_len", "right_len"), [(5, 6), (2, 4), (1, 1)])
def test_layer1_broadcast_sum_equals_literal_concatenated_windows(
    left_len: int, right_len: int
) -> None:
    """z_ij = ReLU(W [a_{i:i+k}; b_{j:j+k}] + bias) with W = [W_a, W_b], cell by cell; texts
    shorter than k are zero-padded to k words (one window)."""
    e, f, k = 2, 3, 3
    torch.manual_seed(0)
    layer = PairwiseWindowConv(e, f, k)
    a, b = _randn(1, 2, e, left_len), _randn(2, 2, e, right_len)  # (B, E, L), (B, E, R)
    z = layer(a, b)  # (B, F, L', R')

    a_pad = F.pad(a, (0, max(k - left_len, 0)))
    b_pad = F.pad(b, (0, max(k - right_len, 0)))
    n_left, n_right = a_pad.shape[-1] - k + 1, b_pad.shape[-1] - k + 1
    assert z.shape == (2, f, n_left, n_right)
    w = torch.cat(
        [layer.left.weight.reshape(f, e * k), layer.right.weight.reshape(f, e * k)], dim=1
    )  # (F, 2 E k): one linear map over the concatenated windows
    for i in range(n_left):
        for j in range(n_right):
            window = torch.cat(
                [
                    a_pad[:, :, i : i + k].reshape(2, e * k),
                    b_pad[:, :, j : j + k].reshape(2, e * k),
                ],
                dim=1,
            )  # (B, 2 E k) = [a_{i:i+k}; b_{j:j+k}]
            expected = torch.relu(window @ w.T + layer.left.bias)  # (B, F)
            torch.testing.assert_close(z[:, :, i, j], expected)


@torch.no_grad()
def test_masked_max_pool1d_by_hand_and_padding_never_wins() -> None:
    x = torch.tensor([[[1.0, 5.0, 2.0, 0.0, 9.0, 9.0]]])  # (1, 1, 6): 3 real positions
    out, counts = masked_max_pool1d(x, torch.tensor([3]))
    # [1, 5] -> 5, [2, (pad)] -> 2 (the odd last position is pooled alone), the rest invalid -> 0.
    torch.testing.assert_close(out, torch.tensor([[[5.0, 2.0, 0.0]]]))
    assert counts.tolist() == [2]


@torch.no_grad()
def test_masked_max_pool2d_ignores_whatever_is_outside_the_valid_region() -> None:
    x = _randn(3, 2, 4, 5, 7)  # (B, F, H, W)
    rows, cols = torch.tensor([3, 5]), torch.tensor([7, 2])
    out, new_rows, new_cols = masked_max_pool2d(x, rows, cols)
    assert out.shape == (2, 4, 3, 4)
    assert new_rows.tolist() == [2, 3] and new_cols.tolist() == [4, 1]
    # By hand: example 0, valid 3 x 7; pooled cell (1, 3) covers only x[0, :, 2, 6].
    torch.testing.assert_close(out[0, :, 1, 3], x[0, :, 2, 6])
    torch.testing.assert_close(out[0, :, 0, 0], x[0, :, :2, :2].amax(dim=(-1, -2)))
    assert (out[0, :, 2] == 0).all() and (out[1, :, :, 1:] == 0).all()
    # Huge values outside the valid region change nothing.
    inside = (torch.arange(5)[:, None] < rows[:, None, None]) & (
        torch.arange(7)[None, :] < cols[:, None, None]
    )  # (B, H, W)
    moved, _, _ = masked_max_pool2d(x.masked_fill(~inside[:, None], 1e4), rows, cols)
    torch.testing.assert_close(moved, out)


@torch.no_grad()
def test_text_shorter_than_the_kernel_gives_one_window() -> None:
    torch.manual_seed(0)
    tower = ConvTower(3, 4, kernel_size=4, num_layers=1)
    x = _randn(5, 1, 6, 3)  # (B, T, E)
    mask = torch.tensor([[True, True, False, False, False, False]])
    conv = tower.convs[0]
    # One window: the two real words, then zeros.
    expected = torch.relu(torch.einsum("fet,te->f", conv.weight[:, :, :2], x[0, :2]) + conv.bias)
    torch.testing.assert_close(tower(x, mask)[0], expected)
    torch.testing.assert_close(tower(x[:, :2], mask[:, :2])[0], expected)  # unpadded: T < k


@torch.no_grad()
@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("arc_i", {}),
        ("arc_i", {"num_layers": 3, "kernel_size": 2}),
        ("arc_i", {"num_layers": 2, "kernel_size": 5}),
        ("arc_ii", {}),
        ("arc_ii", {"num_conv2d": 2, "pool_size": 3}),
        ("arc_ii", {"num_conv2d": 0, "kernel_size": 2, "pool_size": 1}),
        ("arc_ii", {"num_conv2d": 1, "kernel_size": 5, "pool_size": 4}),
    ],
)
def test_padding_invariance_with_much_padding(name: str, overrides: dict[str, Any]) -> None:
    model = _tiny(name, **overrides)
    g = torch.Generator().manual_seed(9)
    lengths = [(1, 1), (2, 17), (9, 3), (20, 25), (4, 1), (13, 8)]
    left = [torch.randint(2, VOCAB, (n,), generator=g).tolist() for n, _ in lengths]
    right = [torch.randint(2, VOCAB, (m,), generator=g).tolist() for _, m in lengths]
    batched = model(make_batch(left, right, extra_pad=23))
    assert torch.isfinite(batched).all()
    for i in range(len(left)):
        alone = model(make_batch([left[i]], [right[i]]))
        torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_arc_i_towers_share_weights() -> None:
    model = _tiny("arc_i")
    left, right = random_pairs(4, seed=3)
    a, b = model.encode(make_batch(left, right))  # type: ignore[operator]
    b_swapped, a_swapped = model.encode(make_batch(right, left))  # type: ignore[operator]
    torch.testing.assert_close(a, a_swapped)
    torch.testing.assert_close(b, b_swapped)
    assert not any(n.startswith(("left", "right")) for n, _ in model.named_parameters())


@torch.no_grad()
def test_arc_ii_is_not_symmetric_in_its_texts() -> None:
    """The two halves of layer 1's map are distinct (the paper's W over [a; b])."""
    model = _tiny("arc_ii")
    left, right = random_pairs(4, seed=3)
    out = model(make_batch(left, right))
    swapped = model(make_batch(right, left))
    assert (out - swapped).abs().max() > 1e-6


ENC = TokenEncoderConfig(vocab_size=10, embedding_dim=4)


@pytest.mark.parametrize(
    ("cls", "field", "value", "match"),
    [
        (ARCIConfig, "filters", 0, "filters must be >= 1"),
        (ARCIConfig, "kernel_size", 0, "kernel_size must be >= 1"),
        (ARCIConfig, "num_layers", 0, "num_layers must be >= 1"),
        (ARCIConfig, "mlp_hidden", 0, "mlp_hidden must be >= 1"),
        (ARCIConfig, "num_outputs", 0, "num_outputs must be >= 1"),
        (ARCIConfig, "dropout", 1.0, "dropout must be in"),
        (ARCIIConfig, "filters", 0, "filters must be >= 1"),
        (ARCIIConfig, "kernel_size", -1, "kernel_size must be >= 1"),
        (ARCIIConfig, "num_conv2d", -1, "num_conv2d must be >= 0"),
        (ARCIIConfig, "pool_size", 0, "pool_size must be >= 1"),
        (ARCIIConfig, "dropout", -0.1, "dropout must be in"),
    ],
)
def test_config_errors(cls: type, field: str, value: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cls(encoder=ENC, **{field: value})


def test_config_defaults() -> None:
    assert ARCIIConfig(encoder=ENC, num_conv2d=0).num_conv2d == 0
    one = ARCIConfig(encoder=ENC)
    assert (one.filters, one.kernel_size, one.num_layers) == (64, 3, 2)
    two = ARCIIConfig(encoder=ENC)
    assert (two.filters, two.kernel_size, two.num_conv2d, two.pool_size) == (64, 3, 1, 4)
