"""MatchPyramid beyond the common suite: dynamic pooling by hand and against adaptive pooling of
the real map, masked "same" convolutions, padding, config errors."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from attnmatch import configs
from attnmatch.inputs import TokenEncoderConfig
from attnmatch.models.matchpyramid import (
    MaskedConv2d,
    MatchPyramid,
    MatchPyramidConfig,
    interaction_matrix,
)

from .conftest import make_batch, random_pairs, tiny_model

PRESETS = ["matchpyramid", "matchpyramid_cosine"]


def _tiny(name: str = "matchpyramid", *, num_outputs: int = 1, **overrides: Any) -> MatchPyramid:
    model = tiny_model(name, num_outputs=num_outputs, **overrides)
    assert isinstance(model, MatchPyramid)
    return model


def test_interaction_matrix_by_hand() -> None:
    a = torch.tensor([[[1.0, 2.0], [0.0, 0.0]]])  # the second left word is padding (zero)
    b = torch.tensor([[[3.0, 4.0], [-2.0, 1.0]]])
    dot = torch.tensor([[[11.0, 0.0], [0.0, 0.0]]])
    torch.testing.assert_close(interaction_matrix(a, b, "dot"), dot)
    cosine = torch.tensor([[[11.0 / (5**0.5 * 5.0), 0.0], [0.0, 0.0]]])
    torch.testing.assert_close(interaction_matrix(a, b, "cosine"), cosine)


@torch.no_grad()
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("kernel", [(3, 3), (2, 4), (1, 5)])
def test_masked_conv_is_same_conv_of_the_real_map(kernel: tuple[int, int]) -> None:
    torch.manual_seed(0)
    conv = MaskedConv2d(2, 3, kernel)
    x = torch.randn(1, 2, 6, 8)
    n, m = 4, 5
    cells = torch.zeros(1, 1, 6, 8, dtype=torch.bool)
    cells[..., :n, :m] = True
    out = conv(x * cells, cells)  # the model zeroes padded cells before the first layer
    expected = torch.relu(
        F.conv2d(x[..., :n, :m], conv.conv.weight, conv.conv.bias, padding="same")
    )
    torch.testing.assert_close(out[..., :n, :m], expected)
    assert (out[..., n:, :] == 0).all() and (out[..., :, m:] == 0).all()


@torch.no_grad()
@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("num_outputs", [1, 3])
def test_padding_invariance_with_a_lot_of_padding(name: str, num_outputs: int) -> None:
    # Two layers, an even kernel, and texts shorter than the kernel and the pooling grid.
    model = _tiny(
        name,
        num_outputs=num_outputs,
        kernel_sizes=[[3, 3], [2, 4]],
        filters=[3, 2],
        pool_size=[3, 4],
    ).eval()
    left, right = random_pairs(5, seed=21)
    left[0], right[0] = [5], [7]
    left[1], right[1] = [5, 6], [5, 6, 8]
    batched = model(make_batch(left, right, extra_pad=30))
    assert batched.shape == (5, num_outputs)
    for i in range(5):
        alone = model(make_batch([left[i]], [right[i]]))
        torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_attention_maps_have_plot_shapes() -> None:
    model = _tiny().eval()
    left, right = random_pairs(3, seed=22)
    batch = make_batch(left, right)
    att = model.attention(batch)
    assert att["matrix"].shape == (3, batch.left_ids.shape[1], batch.right_ids.shape[1])
    assert att["pooled"].shape == (3, 3, 2, 3)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"filters": []}, "at least one"),
        ({"kernel_sizes": [[3, 3], [3, 3]]}, "one entry per layer"),
        ({"kernel_sizes": [[0, 3]]}, "kernel_sizes"),
        ({"filters": [0]}, "filters must all"),
        ({"pool_size": [3, 0]}, "pool_size"),
        ({"mlp_hidden": 0}, "mlp_hidden"),
        ({"dropout": -0.1}, "dropout"),
        ({"interaction": "indicator"}, "interaction"),
    ],
)
def test_config_errors(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(configs.ConfigError, match=message):
        _tiny(**overrides)


def test_config_defaults() -> None:
    config = MatchPyramidConfig(encoder=TokenEncoderConfig(vocab_size=10))
    assert (config.interaction, config.kernel_sizes, config.filters) == ("dot", ((3, 3),), (8,))
    assert config.pool_size == (3, 10)
