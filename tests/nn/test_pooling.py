"""Dynamic max pooling (MatchPyramid, ARC-II): bins and pooled values by hand, and equality with
`F.adaptive_max_pool2d` on each example's real map."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmatch.nn.pooling import dynamic_bins, dynamic_max_pool2d


def test_dynamic_bins_by_hand() -> None:
    bins = dynamic_bins(torch.tensor([3, 1, 0, 4]), size=2, length=5)
    expected = [
        [[1, 1, 0, 0, 0], [0, 1, 1, 0, 0]],  # n = 3: [0, 2) and [1, 3), row 1 shared
        [[1, 0, 0, 0, 0], [1, 0, 0, 0, 0]],  # n = 1 < 2 bins: the one real row repeated
        [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]],  # n = 0: empty bins
        [[1, 1, 0, 0, 0], [0, 0, 1, 1, 0]],  # n = 4: an even split
    ]
    assert bins.tolist() == [[[bool(v) for v in row] for row in ex] for ex in expected]


def test_dynamic_max_pool_by_hand() -> None:
    # A 4 x 3 map whose real part is 3 x 2; padded cells hold 9 and must never win.
    x = torch.tensor([[1.0, 5.0, 9.0], [2.0, 0.0, 9.0], [7.0, 3.0, 9.0], [9.0, 9.0, 9.0]])
    out = dynamic_max_pool2d(x.view(1, 1, 4, 3), torch.tensor([3]), torch.tensor([2]), (2, 3))
    # Row bins {0, 1}, {1, 2}; column bins {0}, {0, 1}, {1}.
    torch.testing.assert_close(out[0, 0], torch.tensor([[2.0, 5.0, 5.0], [7.0, 7.0, 3.0]]))
    # An example with no real column pools to zeros, never -inf.
    empty = dynamic_max_pool2d(x.view(1, 1, 4, 3), torch.tensor([3]), torch.tensor([0]), (2, 3))
    assert torch.equal(empty, torch.zeros(1, 1, 2, 3))


@pytest.mark.parametrize("size", [(3, 10), (2, 2), (5, 1), (4, 4)])
def test_dynamic_max_pool_is_adaptive_max_pool_of_the_real_map(size: tuple[int, int]) -> None:
    g = torch.Generator().manual_seed(0)
    lengths = [(1, 1), (2, 12), (7, 3), (4, 20), (7, 20)]
    x = torch.randn(len(lengths), 2, 7, 20, generator=g)
    rows = torch.tensor([n for n, _ in lengths])
    cols = torch.tensor([m for _, m in lengths])
    out = dynamic_max_pool2d(x, rows, cols, size)
    for b, (n, m) in enumerate(lengths):
        # torch's adaptive pooling uses the same floor/ceil bin edges on the n x m real map.
        expected = F.adaptive_max_pool2d(x[b : b + 1, :, :n, :m], size)[0]
        torch.testing.assert_close(out[b], expected)
