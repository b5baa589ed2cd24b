"""IARNN's whole-input inference path (`models/fast/iarnn.py`, `Matcher.predict` on the CPU)
against the plain path: `forward` on one pair at a time."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import attnmatch.models.fast._windows as _windows
import attnmatch.models.fast.iarnn as fast_iarnn
import attnmatch.models.iarnn as iarnn
from attnmatch.models.fast import inference_for
from attnmatch.models.fast.iarnn import predict_iarnn

from .conftest import plain_outputs, ranking_data, tiny_model

ENCODED = ("iarnn_gate", "iarnn_context", "iarnn_word")


def iarnn_model(name: str, **overrides: Any) -> iarnn.IARNN:
    """A tiny IARNN preset (`tiny_model`), in eval mode."""
    model = tiny_model(name, **overrides)
    assert isinstance(model, iarnn.IARNN)
    return model.eval()


CONFIGS: list[tuple[str, dict[str, Any]]] = [
    (name, overrides)
    for name in ENCODED
    for overrides in (
        {},
        {"bidirectional": False},
        {"head": "gesd"},
        {"num_outputs": 3},  # the MLP head
    )
] + [
    (name, {"occam": True})  # a training term only: inference is the same
    for name in ("iarnn_word", "iarnn_context")
]


@pytest.mark.parametrize(("name", "overrides"), CONFIGS)
@pytest.mark.parametrize(
    ("batch_size", "window", "chunk"), [(1, 1, 1), (7, 16, 3), (64, 2048, 256)]
)
def test_whole_input_inference_equals_forward(
    name: str,
    overrides: dict[str, Any],
    batch_size: int,
    window: int,
    chunk: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Small windows (several windows, the same question in each) and small scan chunks.
    monkeypatch.setattr(_windows, "INFERENCE_WINDOW", window)
    monkeypatch.setattr(fast_iarnn, "_SCAN_CHUNK", chunk)
    torch.manual_seed(0)
    overrides = dict(overrides)
    num_outputs = overrides.pop("num_outputs", 1)
    model = iarnn_model(name, num_outputs=num_outputs, **overrides)
    data = ranking_data(40, seed=3)
    with torch.inference_mode():
        fast = predict_iarnn(model, data, batch_size)
    assert fast.shape == (40, num_outputs)
    torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ENCODED)
def test_whole_input_inference_in_small_scan_chunks(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fast_iarnn, "_SCAN_CHUNK", 4)
    torch.manual_seed(3)
    model = iarnn_model(name)
    data = ranking_data(30, seed=6)
    with torch.inference_mode():
        fast = predict_iarnn(model, data, 8)
    torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


def test_whole_input_inference_with_trained_biases() -> None:
    # Zero-initialised biases would hide a bias in the wrong place: give every parameter values.
    torch.manual_seed(2)
    for name in ENCODED:
        model = iarnn_model(name)
        with torch.no_grad():
            for param in model.parameters():
                param.add_(0.3 * torch.randn_like(param))
        data = ranking_data(30, seed=5)
        with torch.inference_mode():
            fast = predict_iarnn(model, data, 8)
        torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["gru", "oarnn", "oarnn_uni"])
def test_other_variants_keep_forward(name: str) -> None:
    model = iarnn_model(name)
    assert inference_for(model) is None
    with pytest.raises(ValueError, match="predict_iarnn"):
        predict_iarnn(model, ranking_data(10, seed=0), 4)


def test_packing_reads_each_real_token_once_per_direction() -> None:
    lengths = torch.tensor([2, 0, 3, 1])
    pack = fast_iarnn._packing(lengths, 2)
    assert pack.order.tolist() == [2, 0, 3, 1]
    assert pack.batch_sizes == [3, 2, 1]
    assert pack.seq.tolist() == [2, 0, 3, 2, 0, 2]
    assert pack.pos.tolist() == [[0, 0, 0, 1, 1, 2], [2, 1, 0, 1, 0, 0]]
    # Buffer rows: [h_0; x_0] of sequences 2, 0, 3, then [h_t; x_{t+1}] of each packed row
    # (packed rows 3, 4 after rows 0, 1 of step 0; row 5 after row 3; none after the last ones).
    assert pack.feed.tolist() == [0, 1, 2, 3, 4, 0, 5, 0, 0]
