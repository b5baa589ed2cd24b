"""Windows of pairs for whole-input inference (attnmatch.models.fast._windows)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnmatch.models.fast._windows as _windows
from attnmatch.models.fast._windows import (
    batch_rows,
    inference_windows,
    run_windows,
    window_texts,
)
from attnmatch.models.fast.mvlstm import predict_mvlstm

from .conftest import plain_outputs, ranking_data, tiny_model


@pytest.mark.parametrize(("pairs", "batch_size", "window"), [(40, 7, 16), (10, 1, 1), (50, 64, 8)])
def test_windows_cover_every_pair_once_in_length_order(
    pairs: int, batch_size: int, window: int
) -> None:
    data = ranking_data(pairs, seed=pairs)
    windows = list(inference_windows(data, batch_size, window))
    order = np.concatenate(windows)
    assert sorted(order.tolist()) == list(range(pairs))
    size = max(batch_size, window)
    assert all(len(w) <= max(size, batch_size) for w in windows)
    assert max(len(w) for w in windows) - min(len(w) for w in windows) <= batch_size
    lengths = data.text_lengths
    keys = list(zip(lengths[data.right[order]], lengths[data.left[order]], strict=True))
    assert keys == sorted(keys)


def test_window_texts_are_distinct_sorted_and_gather_their_rows() -> None:
    data = ranking_data(30, seed=2)
    pairs = np.arange(30)
    texts = window_texts(data, data.left[pairs])
    assert len(texts.lengths) == len(np.unique(data.left))
    assert list(texts.lengths) == sorted(texts.lengths)
    assert texts.mask.sum(1).tolist() == texts.lengths.tolist()
    for i, text in enumerate(data.left[pairs]):  # each pair's row holds its text
        row = texts.rows[i]
        assert texts.ids[row, : texts.lengths[row]].tolist() == data.texts[text].tolist()
    encoded = torch.randn(*texts.ids.shape, 3)  # (U, T, 3)
    rows = np.array([4, 0, 4])
    out, mask = texts.gather(encoded, rows)
    longest = max(int(texts.lengths[texts.rows[r]]) for r in rows)
    assert out.shape == (3, max(longest, 1), 3)
    for j, r in enumerate(rows):
        assert mask[j].sum() == texts.lengths[texts.rows[r]]
        torch.testing.assert_close(out[j], encoded[texts.rows[r], : out.shape[1]])


def test_gather_of_consecutive_rows_is_a_view_equal_to_the_copy() -> None:
    data = ranking_data(30, seed=6, repeated_answers=0)
    pairs = next(inference_windows(data, 30, 30))  # length order: each answer once
    texts = window_texts(data, data.right[pairs])
    positions = np.arange(10, 20)
    assert np.array_equal(texts.rows[positions], np.arange(texts.rows[10], texts.rows[10] + 10))
    encoded = torch.randn(*texts.ids.shape, 3)  # (U, T, 3)
    out, mask = texts.gather(encoded, positions)
    assert out.data_ptr() == encoded[texts.rows[10]].data_ptr()  # no copy
    rows = torch.from_numpy(texts.rows[positions])
    torch.testing.assert_close(out, encoded[:, : out.shape[1]].index_select(0, rows))
    assert mask.sum(1).tolist() == texts.lengths[texts.rows[positions]].tolist()


def test_batch_rows() -> None:
    assert [b.tolist() for b in batch_rows(5, 2)] == [[0, 1], [2, 3], [4]]
    assert list(batch_rows(0, 3)) == []


def test_run_windows_on_two_threads_equals_one_and_restores_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_windows, "INFERENCE_WINDOW", 8)  # several windows
    torch.manual_seed(0)
    model = tiny_model("mvlstm", gate="left", k=7).eval()
    data = ranking_data(60, seed=5)
    before = torch.get_num_threads()
    try:
        outputs = {}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            with torch.inference_mode():
                outputs[threads] = predict_mvlstm(model, data, 4)
            assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(outputs[2], outputs[1], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(outputs[2], plain_outputs(model, data), atol=1e-5, rtol=1e-5)


def test_run_windows_raises_a_failing_window_and_restores_the_setting() -> None:
    before = torch.get_num_threads()
    seen: list[int] = []

    def work(pairs: np.ndarray) -> None:
        seen.append(int(pairs[0]))
        if pairs[0] == 2:
            raise ValueError("window 2 failed")

    try:
        torch.set_num_threads(2)
        with pytest.raises(ValueError, match="window 2 failed"):
            run_windows(work, [np.array([i]) for i in range(4)])
        assert torch.get_num_threads() == 2
        assert sorted(seen) == [0, 1, 2, 3]  # every window ran
    finally:
        torch.set_num_threads(before)
