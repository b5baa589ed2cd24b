"""DAMM's whole-input inference path (`DAMM.predict_encoded`, `Matcher.predict` on the CPU)
against `forward` on each pair alone, and its pieces against the plain sub-layers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import attnmatch.models._windows as _windows
import attnmatch.models.damm as damm
from attnmatch.matcher import Matcher
from attnmatch.tasks import Task

from .conftest import tiny_model
from .test_mvlstm_inference import plain_outputs, random_data

CONFIGS: list[dict[str, Any]] = [
    {},  # the `damm` preset: 2 blocks
    {"num_blocks": 1},
    {"num_blocks": 3, "positional": "sinusoidal"},
    {"cross_attention": False},
    {"cross_attention": False, "num_blocks": 1, "positional": "sinusoidal"},
    {"residual": False, "cnn_widths": (2, 4), "num_outputs": 3},
]


@pytest.mark.parametrize("overrides", CONFIGS)
@pytest.mark.parametrize(("batch_size", "window", "group"), [(1, 1, 1), (7, 16, 3), (64, 2048, 256)])
def test_predict_encoded_equals_forward(
    overrides: dict[str, Any],
    batch_size: int,
    window: int,
    group: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Small windows (the same question in several) and small text groups, so that texts of
    # different lengths share windows, groups and batches, and padding holds real values.
    monkeypatch.setattr(_windows, "INFERENCE_WINDOW", window)
    monkeypatch.setattr(damm, "_TEXT_GROUP", group)
    torch.manual_seed(0)
    overrides = dict(overrides)
    num_outputs = overrides.pop("num_outputs", 1)
    model = tiny_model("damm", num_outputs=num_outputs, **overrides).eval()
    data = random_data(40, seed=3)
    with torch.inference_mode():
        fast = model.predict_encoded(data, batch_size)
    assert fast.shape == (40, num_outputs)
    torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("batch_size", [5, 512])
def test_matcher_predict_takes_the_encoded_path_in_input_order(batch_size: int) -> None:
    torch.manual_seed(1)
    model = tiny_model("damm")
    data = random_data(90, seed=4)
    matcher = Matcher(
        model=model,
        model_type="damm",
        inputs=None,  # type: ignore[arg-type]  # predict reads ids only
        task=Task(kind="ranking"),
        batch_size=batch_size,
    )
    calls: list[int] = []
    original = model.predict_encoded

    def spy(data: Any, size: int) -> torch.Tensor:
        calls.append(size)
        return original(data, size)

    model.predict_encoded = spy  # type: ignore[method-assign]
    fast = matcher.predict(data)
    assert calls == [batch_size]
    model.encoded_inference = False  # `forward` per batch
    batched = matcher.predict(data)
    assert calls == [batch_size]
    expected = plain_outputs(model, data).numpy()  # pair i alone: the input order
    np.testing.assert_allclose(fast, expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(batched, expected, atol=1e-5, rtol=1e-5)
