"""Exact-match features added to any model's outputs."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmatch.matcher import Matcher
from attnmatch.nn.overlap import OverlapFeatures, WithOverlapFeatures, idf_table
from tests.training.test_trainer import tiny_experiment


def test_idf_table_is_bm25_idf_by_id():
    idf = idf_table([np.array([1, 2]), np.array([2, 3]), np.array([2])])
    n = 3
    assert idf.shape == (4,)
    assert idf[2].item() == pytest.approx(math.log1p((n - 3 + 0.5) / 3.5))
    assert idf[1].item() == pytest.approx(math.log1p((n - 1 + 0.5) / 1.5))
    assert idf[0].item() == pytest.approx(math.log1p((n + 0.5) / 0.5))  # never seen: rarest


def test_features_of_a_pair():
    idf = torch.tensor([0.0, 1.0, 2.0, 3.0])
    features = OverlapFeatures(idf)
    left = torch.tensor([[1, 2, 3, 0]])  # 3 tokens, the last is padding
    right = torch.tensor([[2, 3, 0]])
    out = features(left, left != 0, right, right != 0)
    count = 2.0
    expected = [count / 3, (2.0 + 3.0) / (1.0 + 2.0 + 3.0), math.log1p(count)]
    np.testing.assert_allclose(out[0].numpy(), expected, rtol=1e-6)
    # ids beyond the table weigh as the rarest, and padding never matches padding
    wide = features(
        torch.tensor([[9]]),
        torch.tensor([[True]]),
        torch.tensor([[9, 0]]),
        torch.tensor([[True, False]]),
    )
    np.testing.assert_allclose(wide[0].numpy(), [1.0, 1.0, math.log(2)], rtol=1e-6)
    with pytest.raises(ValueError, match="letter trigrams"):
        features(left[:, :, None], left != 0, right[:, :, None], right != 0)


def test_training_with_features_starts_as_the_model_and_round_trips(tmp_path: Path):
    from attnmatch.training import train
    from attnmatch.training.experiment import build_experiment

    plain = tiny_experiment(epochs=2)
    with_features = dataclasses.replace(plain, overlap_features=True)
    a, b = build_experiment(plain), build_experiment(with_features)
    assert isinstance(b.model, WithOverlapFeatures)
    np.testing.assert_allclose(  # zero-initialised head: the same outputs at the start
        a.matcher.predict(a.dev.data), b.matcher.predict(b.dev.data), rtol=1e-6, atol=1e-7
    )
    result = train(with_features, tmp_path / "run", progress=False)
    loaded = Matcher.load(result.model_dir)
    assert isinstance(loaded.model, WithOverlapFeatures)
    assert (loaded.path / "config.json").read_text().count('"overlap"') == 1  # type: ignore[union-attr]
    pairs = [("what bridge window ?", "with and was apple as at in and music on")]
    again = Matcher.load(loaded.save(tmp_path / "copy"))
    np.testing.assert_array_equal(loaded.score(pairs), again.score(pairs))
