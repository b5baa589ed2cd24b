"""`Matcher.predict` / `evaluate` on a split with no pairs: an empty array, then one clear
error."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from attnmatch.data.datasets import DatasetFormatError, load_split
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import PairBatch
from attnmatch.evaluation import evaluate, report_from_outputs
from attnmatch.matcher import Matcher
from attnmatch.tasks import ClassificationTask, RankingTask, RegressionTask, Task


class _Counting(nn.Module):
    """Scores every pair 0 over `num_outputs` columns and counts its forward passes; declares
    `config.num_outputs` like every registered model."""

    def __init__(self, num_outputs: int) -> None:
        super().__init__()
        self.num_outputs = num_outputs
        self.config = SimpleNamespace(num_outputs=num_outputs)
        self.weight = nn.Parameter(torch.zeros(1))  # a device to run on
        self.calls = 0

    def forward(self, batch: PairBatch) -> torch.Tensor:
        self.calls += 1
        return torch.zeros(batch.left_ids.shape[0], self.num_outputs)


def _no_pairs() -> EncodedPairs:
    empty = np.zeros(0, dtype=np.int64)
    return EncodedPairs(
        texts=[],
        left=empty,
        right=empty,
        labels=np.zeros(0, dtype=np.float32),
        group_ids=empty,
        group_names=[],
    )


def _two_pairs() -> EncodedPairs:
    return EncodedPairs(
        texts=[np.array([2, 3]), np.array([4]), np.array([5, 6, 7])],
        left=np.array([0, 0]),
        right=np.array([1, 2]),
        labels=np.array([1.0, 0.0], dtype=np.float32),
        group_ids=np.array([0, 0]),
        group_names=["q"],
    )


def _matcher(model: nn.Module) -> Matcher:
    return Matcher(model=model, model_type="test", inputs=None, task=Task(kind="ranking"))  # type: ignore[arg-type]


def test_predict_on_no_pairs_is_an_empty_array_without_a_forward_pass() -> None:
    model = _Counting(3)
    outputs = _matcher(model).predict(_no_pairs())
    assert outputs.shape == (0, 3) and outputs.dtype == np.float32
    assert model.calls == 0
    # Pairs are still predicted as before.
    assert _matcher(model).predict(_two_pairs()).shape == (2, 3) and model.calls == 1


@pytest.mark.parametrize(
    "protocol",
    [
        RankingTask(name="r"),
        ClassificationTask(name="c", num_classes=3),
        RegressionTask(name="s", min_score=0, max_score=5),
    ],
    ids=["ranking", "classification", "regression"],
)
def test_evaluate_on_no_pairs_is_a_clear_value_error(protocol) -> None:
    model = _Counting(3 if isinstance(protocol, ClassificationTask) else 1)
    with pytest.raises(ValueError, match="nothing to evaluate: the split has no pairs"):
        evaluate(_matcher(model), _no_pairs(), protocol)
    assert model.calls == 0
    with pytest.raises(ValueError, match="the split has no pairs"):
        report_from_outputs(np.zeros((0, 1), dtype=np.float32), _no_pairs(), protocol)


def test_a_header_only_pairs_split_names_its_file(tmp_path: Path) -> None:
    """What `attnmatch evaluate --dataset pairs:test` meets first on an empty split file: one
    ValueError naming the file (the CLI prints it as one `error:` line), no AssertionError."""
    (tmp_path / "test.tsv").write_text("left\tright\tlabel\n\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"test\.tsv: no pairs") as caught:
        load_split("pairs", "test", data_dir=tmp_path)
    assert isinstance(caught.value, ValueError)
    assert "\n" not in str(caught.value)
