"""Classification metrics: hand-computed values and input checks."""

from __future__ import annotations

import numpy as np
import pytest

from attnmatch.metrics import accuracy, classification_metrics, f1, macro_f1

PRED = [1, 0, 1, 1]
GOLD = [1, 0, 0, 1]

# 3 classes; per class (tp, fp, fn): 0: (1, 1, 0), 1: (1, 1, 1), 2: (1, 1, 2)
PRED3 = [0, 1, 2, 2, 1, 0]
GOLD3 = [0, 1, 1, 2, 2, 2]
F1_PER_CLASS3 = [2 / 3, 2 / 4, 2 / 5]  # 2tp / (2tp + fp + fn)


def test_accuracy() -> None:
    assert accuracy(PRED, GOLD) == pytest.approx(0.75)
    assert accuracy(PRED3, GOLD3) == pytest.approx(3 / 6)
    assert accuracy(np.array([2]), np.array([2])) == 1.0


def test_binary_f1() -> None:
    # positive 1: tp=2, fp=1, fn=0 -> 4/5
    assert f1(PRED, GOLD) == pytest.approx(0.8)
    # positive 0: tp=1, fp=0, fn=1 -> 2/3
    assert f1(PRED, GOLD, positive=0) == pytest.approx(2 / 3)
    assert f1([0, 0, 0], [1, 1, 0]) == 0.0  # no true positive
    assert f1([0, 0], [0, 0]) == 0.0  # class 1 neither predicted nor true: 0/0 -> 0.0


def test_macro_f1() -> None:
    assert macro_f1(PRED3, GOLD3, 3) == pytest.approx(np.mean(F1_PER_CLASS3))
    assert macro_f1(PRED3, GOLD3, 3) == pytest.approx(0.5222222)
    # an absent fourth class counts as 0.0
    assert macro_f1(PRED3, GOLD3, 4) == pytest.approx(sum(F1_PER_CLASS3) / 4)
    assert macro_f1(PRED, GOLD, 2) == pytest.approx((2 / 3 + 0.8) / 2)


def test_classification_metrics_uses_argmax() -> None:
    logits = np.array([[0.1, 2.0], [3.0, -1.0], [0.0, 0.5], [-2.0, 1.0]])  # argmax = PRED
    assert classification_metrics(logits, GOLD) == pytest.approx({"accuracy": 0.75, "f1": 0.8})
    probs3 = np.eye(3)[PRED3] * 0.5 + 0.1  # argmax = PRED3
    result = classification_metrics(probs3, GOLD3, metrics=("f1", "macro_f1", "accuracy"))
    assert result == pytest.approx({"f1": 0.5222222, "macro_f1": 0.5222222, "accuracy": 0.5})
    assert classification_metrics(logits, GOLD, metrics=("macro_f1",)) == pytest.approx(
        {"macro_f1": (2 / 3 + 0.8) / 2}
    )


def test_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        accuracy([], [])
    with pytest.raises(ValueError, match="empty"):
        classification_metrics(np.zeros((0, 2)), [])
    with pytest.raises(ValueError, match="length"):
        f1([1, 0], [1])
    with pytest.raises(ValueError, match="length"):
        classification_metrics(np.zeros((3, 2)), [0, 1])
    with pytest.raises(ValueError, match="1-D"):
        accuracy([[1]], [[1]])
    with pytest.raises(ValueError, match="integer"):
        accuracy([0.5, 1.0], [0, 1])
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        macro_f1([0, 3], [0, 1], 3)
    with pytest.raises(ValueError, match="C >= 2"):
        classification_metrics(np.zeros((2, 1)), [0, 0])
    with pytest.raises(ValueError, match="unknown classification metrics"):
        classification_metrics(np.zeros((2, 2)), [0, 0], metrics=("accuracy", "auc"))
