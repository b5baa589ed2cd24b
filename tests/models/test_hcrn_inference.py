"""HCRN's whole-input inference path (`models/fast/hcrn.py`, `Matcher.predict` on the CPU)
against the plain path: `forward` on one pair at a time."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import attnmatch.models.fast.hcrn as fast_hcrn
import attnmatch.nn.recurrent as recurrent
from attnmatch.models.fast.hcrn import affinity_factor, predict_hcrn
from attnmatch.models.hcrn import HCRN, Affinity

from .conftest import plain_outputs, ranking_data, tiny_model

PRESETS = ["hcrn", "hcrn_bilinear", "hcrn_complex", "hcrn_real", "hcrn_diagonal"]
VARIANTS: list[dict[str, Any]] = [
    {"pooling": "extractive"},
    {"affinity": "real", "intra": True},
    {"affinity": "hermitian", "intra": True, "pooling": "extractive"},
    {"num_outputs": 3},  # the MLP head
    {"affinity": "complex_diagonal", "intra": False, "num_outputs": 2},
]


def _model(name: str, overrides: dict[str, Any]) -> HCRN:
    overrides = dict(overrides)
    num_outputs = overrides.pop("num_outputs", 1)
    model = tiny_model(name, num_outputs=num_outputs, **overrides).eval()
    assert isinstance(model, HCRN)
    if model.affinity.kind == "complex_diagonal":
        with torch.no_grad():  # away from the plain Hermitian product it starts as
            model.affinity.w_real.normal_()
            model.affinity.w_imag.normal_()
    return model


@pytest.mark.parametrize(
    ("name", "overrides"),
    [(name, {}) for name in PRESETS] + [("hcrn", variant) for variant in VARIANTS],
)
@pytest.mark.parametrize(
    ("batch_size", "window", "chunk"), [(1, 1, 1), (7, 16, 3), (64, 2048, 64), (64, 2048, 5)]
)
def test_whole_input_inference_equals_forward(
    name: str,
    overrides: dict[str, Any],
    batch_size: int,
    window: int,
    chunk: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Several windows (the same question in each), text chunks, right-text chunks and matched
    # chunks of a few texts, and dense groups from 2 sequences up, so both BiLSTM paths run.
    monkeypatch.setattr(fast_hcrn, "_WINDOW", window)
    monkeypatch.setattr(fast_hcrn, "_TEXT_CHUNK", chunk)
    monkeypatch.setattr(fast_hcrn, "_MATCH_CHUNK", max(chunk, 2))
    monkeypatch.setattr(fast_hcrn, "_RIGHT_CHUNK", chunk + 2)
    monkeypatch.setattr(recurrent, "_DENSE_GROUP_MIN", 2)
    torch.manual_seed(0)
    model = _model(name, overrides)
    data = ranking_data(40, seed=3)
    with torch.inference_mode():
        fast = predict_hcrn(model, data, batch_size)
    assert fast.shape == (40, model.config.num_outputs)
    torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["real", "hermitian", "hermitian_bilinear", "complex_diagonal"])
def test_affinity_factors_multiply_to_the_affinity(kind: str) -> None:
    torch.manual_seed(0)
    aff = Affinity(kind, 4)  # type: ignore[arg-type]
    if kind == "complex_diagonal":
        with torch.no_grad():
            aff.w_real.normal_()
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g)
    with torch.no_grad():
        left, right = affinity_factor(aff, a, "left"), affinity_factor(aff, b, "right")
        product = left @ right.transpose(1, 2)
        torch.testing.assert_close(product, aff(a, b), atol=1e-5, rtol=1e-5)
