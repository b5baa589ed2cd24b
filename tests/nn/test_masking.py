"""Masked reductions: padding never counts, fully masked rows give zeros, never NaN."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmatch.nn.masking import masked_kmax, masked_max, masked_mean, masked_min, masked_softmax


def test_masked_softmax_zero_on_padding_and_empty_rows() -> None:
    scores = torch.tensor([[1.0, 2.0, 50.0], [3.0, 4.0, 5.0]], requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    w = masked_softmax(scores, mask)
    e = torch.exp(torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(w[0], torch.cat([e / e.sum(), torch.zeros(1)]))
    assert torch.equal(w[1], torch.zeros(3))
    w.sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_masked_max_min_mean() -> None:
    x = torch.tensor([[1.0, -5.0, 100.0], [-2.0, -3.0, -100.0], [7.0, 8.0, 9.0]])
    mask = torch.tensor([[True, True, False], [True, True, False], [False, False, False]])
    assert masked_max(x, mask, dim=1).tolist() == [1.0, -2.0, 0.0]
    assert masked_min(x, mask, dim=1).tolist() == [-5.0, -3.0, 0.0]
    assert masked_mean(x, mask, dim=1).tolist() == [-2.0, -2.5, 0.0]


def test_masked_kmax_hand_example() -> None:
    # Padded cells hold the largest values; they must never win. Row 2 has 2 real cells < k.
    x = torch.tensor([[0.1, 0.9, 0.5, 9.0, 8.0], [-0.3, -0.1, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[True, True, True, False, False], [True, True, False, False, False]])
    out = masked_kmax(x, mask, k=3)
    torch.testing.assert_close(out, torch.tensor([[0.9, 0.5, 0.1], [-0.1, -0.3, 0.0]]))


def test_masked_kmax_k_larger_than_row() -> None:
    out = masked_kmax(torch.tensor([[2.0, 1.0]]), torch.tensor([[True, True]]), k=4)
    assert out.tolist() == [[2.0, 1.0, 0.0, 0.0]]


@settings(max_examples=50, deadline=None)
@given(
    values=st.lists(st.floats(-10, 10, width=32, allow_subnormal=False), min_size=1, max_size=12),
    data=st.data(),
)
def test_masked_kmax_matches_sorting(values: list[float], data: st.DataObject) -> None:
    mask = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    k = data.draw(st.integers(1, 15))
    out = masked_kmax(torch.tensor([values]), torch.tensor([mask]), k)[0].tolist()
    real = sorted((v for v, m in zip(values, mask, strict=False) if m), reverse=True)[:k]
    expected = real + [0.0] * (k - len(real))
    assert out == [float(torch.tensor(v)) for v in expected]


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 8), pad=st.integers(0, 5), seed=st.integers(0, 1000))
def test_masked_softmax_padding_invariance(n: int, pad: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, generator=g)
    padded = torch.cat([x, torch.randn(1, pad, generator=g) * 100], dim=1)
    mask = torch.tensor([[True] * n + [False] * pad])
    torch.testing.assert_close(masked_softmax(padded, mask)[:, :n], torch.softmax(x, dim=-1))
