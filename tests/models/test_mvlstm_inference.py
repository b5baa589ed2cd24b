"""MV-LSTM's whole-input inference path (`models/fast/mvlstm.py`, `Matcher.predict` on the
CPU) and the BiLSTM by exact length against the plain paths: `forward` one batch at a time, and
`nn.LSTM` one unpadded sequence at a time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import attnmatch.models.fast._windows as _windows
import attnmatch.nn.recurrent as recurrent
from attnmatch.models.fast.mvlstm import predict_mvlstm
from attnmatch.nn.recurrent import BiRNN, bilstm_by_length

from .conftest import plain_outputs, ranking_data, tiny_model

CONFIGS: list[dict[str, Any]] = [
    {},
    {"gate": "left"},
    {"gate": "both", "gate_scale": "length"},
    {"directions": "separate"},
    {"interaction": "dot"},
    {"interaction": "bilinear", "directions": "separate"},
    {"interaction": "tensor", "tensor_slices": 3},
    {"shared_encoder": False, "gate": "right", "mlp_hidden": [7], "num_outputs": 3},
]


@pytest.mark.parametrize("overrides", CONFIGS)
@pytest.mark.parametrize(("batch_size", "window"), [(1, 1), (7, 16), (64, 2048)])
def test_whole_input_inference_equals_forward(
    overrides: dict[str, Any], batch_size: int, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small windows (several windows, the same question in each) and dense groups from 2
    # sequences up, so both the fused-kernel groups and the leftovers run.
    monkeypatch.setattr(_windows, "INFERENCE_WINDOW", window)
    monkeypatch.setattr(recurrent, "_DENSE_GROUP_MIN", 2)
    torch.manual_seed(0)
    num_outputs = overrides.pop("num_outputs", 1)
    model = tiny_model("mvlstm", num_outputs=num_outputs, **overrides).eval()
    data = ranking_data(40, seed=3)
    with torch.inference_mode():
        fast = predict_mvlstm(model, data, batch_size)
    assert fast.shape == (40, num_outputs)
    torch.testing.assert_close(fast, plain_outputs(model, data), atol=1e-5, rtol=1e-5)


def per_sequence(birnn: BiRNN, x: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """nn.LSTM on each unpadded sequence alone."""
    out = x.new_zeros(*x.shape[:2], 2 * birnn.hidden_size)  # (B, T, 2H)
    for b, length in enumerate(lengths):
        if length:
            out[b, :length] = birnn.rnn(x[b : b + 1, :length])[0][0]
    return out


@pytest.mark.parametrize("batch", [70, 200])  # either side of the crossover, both grouped
def test_forward_by_length_equals_per_sequence(batch: int) -> None:
    torch.manual_seed(0)
    birnn = BiRNN("lstm", 5, 4).eval()
    g = torch.Generator().manual_seed(batch)
    lengths = torch.randint(0, 13, (batch,), generator=g).tolist()
    lengths[:3] = [17, 16, 15]  # lengths of one sequence each: the leftovers
    x = torch.randn(batch, 19, 5, generator=g)  # random padding, so leaks would show
    mask = torch.arange(19).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    with torch.inference_mode():
        out = birnn(x, mask)
        grouped = birnn._forward_by_length(x, mask)
        expected = per_sequence(birnn, x, lengths)
    assert batch >= recurrent._GROUPED_INFERENCE_BATCH
    torch.testing.assert_close(out, grouped)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("group_max", [7, 256])  # 7: groups of one length in chunks
def test_bilstm_by_length_over_two_batches(group_max: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recurrent, "_DENSE_GROUP_MAX", group_max)
    torch.manual_seed(0)
    birnn = BiRNN("lstm", 5, 4).eval()
    g = torch.Generator().manual_seed(7)
    batches, expected = [], []
    for size, steps in ((30, 6), (50, 11)):
        lengths = np.sort(torch.randint(0, steps + 1, (size,), generator=g).numpy())
        lengths[-1] = steps
        x = torch.randn(size, steps, 5, generator=g)
        batches.append((x, lengths))
        expected.append(per_sequence(birnn, x, lengths.tolist()))

    def double(s: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        return torch.mul(s, 2) if out is None else torch.mul(s, 2, out=out)

    for transform, factor in ((double, 2), (None, 1)):
        with torch.inference_mode():
            # Padding is zero whatever the memory held before (the results are not zero-filled).
            torch.full((4096,), float("nan"))
            states = bilstm_by_length(birnn, batches, transform=transform)
        for got, want in zip(states, expected, strict=True):
            torch.testing.assert_close(got, factor * want, atol=1e-5, rtol=1e-5)
