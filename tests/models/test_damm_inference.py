"""DAMM's whole-input inference path (`models/fast/damm.py`, `Matcher.predict` on the CPU)
against `forward` on each pair alone, and its pieces against the plain sub-layers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import attnmatch.models.damm as damm
import attnmatch.models.fast._windows as _windows
import attnmatch.models.fast.damm as fast_damm

from .conftest import plain_outputs, ranking_data, tiny_model


def tiny_damm(num_outputs: int = 1, **overrides: Any) -> damm.DAMM:
    model = tiny_model("damm", num_outputs=num_outputs, **overrides).eval()
    assert isinstance(model, damm.DAMM)
    return model


CONFIGS: list[dict[str, Any]] = [
    {},  # the `damm` preset: 2 blocks
    {"num_blocks": 1},
    {"num_blocks": 3, "positional": "sinusoidal"},
    {"cross_attention": False},
    {"cross_attention": False, "num_blocks": 1, "positional": "sinusoidal"},
    {"residual": False, "cnn_widths": (2, 4), "num_outputs": 3},
]


@pytest.mark.parametrize("overrides", CONFIGS)
@pytest.mark.parametrize(
    ("batch_size", "window", "group"), [(1, 1, 1), (7, 16, 3), (64, 2048, 256)]
)
def test_whole_input_inference_equals_forward(
    overrides: dict[str, Any],
    batch_size: int,
    window: int,
    group: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Small windows (the same question in several) and small text groups, so that texts of
    # different lengths share windows, groups and batches, and padding holds real values.
    monkeypatch.setattr(_windows, "INFERENCE_WINDOW", window)
    monkeypatch.setattr(fast_damm, "_TEXT_GROUP", group)
    torch.manual_seed(0)
    overrides = dict(overrides)
    num_outputs = overrides.pop("num_outputs", 1)
    model = tiny_damm(num_outputs, **overrides)
    data = ranking_data(40, seed=3)
    with torch.inference_mode():
        fast = fast_damm.predict_damm(model, data, batch_size)
    assert fast.shape == (40, num_outputs)
    torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("residual", [True, False])
def test_attend_equals_the_sub_layers_forward(residual: bool) -> None:
    model = tiny_damm(residual=residual)
    layer = fast_damm._blocks(model)[0].cross
    assert layer is not None
    d = model.config.hidden_size
    g = torch.Generator().manual_seed(5)
    x, memory = torch.randn(3, 4, d, generator=g), torch.randn(3, 6, d, generator=g)
    mask = torch.arange(6) < torch.tensor([[6], [2], [0]])  # (3, 6), an empty memory row
    with torch.inference_mode():
        q, kv = fast_damm.project(layer, x)[..., :d], fast_damm.project(layer, memory)[..., d:]
        got = fast_damm.attend(layer, x, q, kv, fast_damm.key_bias(mask))
        want = layer(x, memory, mask)
        want_empty = layer(x[2:], memory[2:, :1], mask[2:, :1])  # its pair alone
    torch.testing.assert_close(got[:2], want[:2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[2:], want_empty, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("overrides", [{}, {"num_blocks": 3}, {"cnn_widths": (1, 5)}])
def test_match_ignores_padding_holding_garbage(overrides: dict[str, Any]) -> None:
    torch.manual_seed(2)
    model = tiny_damm(**overrides)
    data = ranking_data(12, seed=6)
    pairs, rows = np.arange(12), np.arange(12)
    left = _windows.window_texts(data, data.left[pairs])
    right = _windows.window_texts(data, data.right[pairs])
    weights = fast_damm.inference_weights(model)
    g = torch.Generator().manual_seed(9)
    with torch.inference_mode():
        s_a, a_mask = left.gather(fast_damm.encode_texts(model, left, weights), rows)
        s_b, b_mask = right.gather(fast_damm.encode_texts(model, right, weights), rows)
        short = torch.cat(fast_damm.match(model, s_a, a_mask, s_b, b_mask, weights), dim=-1)

        def pad(s: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            extra = 100 * torch.randn(s.shape[0], 3, s.shape[2], generator=g)
            return torch.cat([s, extra], 1), torch.cat(
                [mask, torch.zeros(len(s), 3, dtype=torch.bool)], 1
            )

        padded = (*pad(s_a, a_mask), *pad(s_b, b_mask))
        long = torch.cat(fast_damm.match(model, *padded, weights), dim=-1)
    assert short.shape == long.shape
    torch.testing.assert_close(short, long, atol=1e-5, rtol=1e-5)
