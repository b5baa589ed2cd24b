"""MP-CNN's whole-input inference path (`models/fast/mpcnn.py`, `Matcher.predict` on the CPU)
against the plain path: `forward` on one pair at a time."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import attnmatch.models.fast._windows as _windows
import attnmatch.models.fast.mpcnn as fast_mpcnn
import attnmatch.models.mpcnn as mpcnn
from attnmatch.models.fast.mpcnn import _Pooled, features_exact, predict_mpcnn
from attnmatch.models.mpcnn import MPCNN

from .conftest import plain_outputs, ranking_data, tiny_model

CONFIGS: list[dict[str, Any]] = [
    {"attention": True},
    {"attention": False},
    {"attention": True, "widths": (2, 4), "per_dim_widths": (1, 3, 2), "num_outputs": 3},
    {"attention": False, "widths": (1,), "per_dim_widths": (2,)},
    {"attention": True, "widths": (5,), "per_dim_widths": (4, 1), "per_dim_filters": 3},
]


@pytest.mark.parametrize("overrides", CONFIGS)
@pytest.mark.parametrize(
    ("batch_size", "window", "chunk"), [(1, 1, 1), (7, 16, 9), (64, 2048, 512)]
)
def test_whole_input_inference_equals_forward(
    overrides: dict[str, Any],
    batch_size: int,
    window: int,
    chunk: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Small windows (several windows, the same question in each) and small chunks (runs of one
    # length cut into several) as well as one window for everything.
    monkeypatch.setattr(_windows, "INFERENCE_WINDOW", window)
    monkeypatch.setattr(fast_mpcnn, "EXACT_CHUNK_TOKENS", chunk)
    monkeypatch.setattr(fast_mpcnn, "FEATURE_CHUNK", max(chunk // 8, 1))
    torch.manual_seed(0)
    overrides = dict(overrides)
    num_outputs = overrides.pop("num_outputs", 1)
    model = tiny_model("mpcnn", num_outputs=num_outputs, **overrides).eval()
    assert isinstance(model, MPCNN)
    data = ranking_data(40, seed=3)
    with torch.inference_mode():
        fast = predict_mpcnn(model, data, batch_size)
    assert fast.shape == (40, num_outputs)
    torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("preset", ["mpcnn_attention", "mpcnn"])
def test_whole_input_inference_at_the_preset_sizes(preset: str) -> None:
    # The preset's filter counts (many holistic and per-dimension filters), small word vectors.
    torch.manual_seed(2)
    model = tiny_model(preset, holistic_filters=300, per_dim_filters=20, hidden_size=150).eval()
    assert isinstance(model, MPCNN)
    data = ranking_data(30, seed=5, max_right=25)
    with torch.inference_mode():
        fast = predict_mpcnn(model, data, 32)
    torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


def test_similarity_layer_on_grouped_poolings_equals_the_plain_one() -> None:
    torch.manual_seed(0)
    model = tiny_model("mpcnn", widths=(1, 2, 3), per_dim_widths=(1, 2))
    assert isinstance(model, MPCNN)
    cfg = model.config
    dim = cfg.encoder.output_dim

    def pooled(b: int) -> _Pooled:
        holistic = torch.randn(b, 3, len(cfg.widths), cfg.holistic_filters).tanh()
        per_dim = torch.randn(b, 2, len(cfg.per_dim_widths), cfg.per_dim_filters, dim).tanh()
        return _Pooled(holistic, torch.randn(b, 3, dim), per_dim)

    def plain(s: _Pooled) -> dict[str, torch.Tensor]:
        out = {}
        for i, p in enumerate(mpcnn.POOLS_A):
            out[f"A{p}"], out[f"Ainf{p}"] = s.holistic[:, i], s.inf[:, i]
        for i, p in enumerate(mpcnn.POOLS_B):
            out[f"B{p}"] = s.per_dim[:, i].transpose(-1, -2)  # (b, W_B, I, G)
        return out

    s0, s1 = pooled(6), pooled(6)
    s1.holistic[0] = s0.holistic[0]  # equal vectors: zero distances
    want = model._features(plain(s0), plain(s1))
    torch.testing.assert_close(features_exact(s0, s1), want, atol=1e-6, rtol=1e-5)
