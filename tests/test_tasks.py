"""Tasks: the task a protocol implies, its losses and head size, how outputs become scores and
labels, where a model may be evaluated, and the dict saved with a model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.protocol import ClassificationProtocol, RankingProtocol, RegressionProtocol
from attnmatch.evaluation import report_from_outputs
from attnmatch.tasks import TASK_LOSSES, Task, ranking_scores, regression_predictions

RANKING = Task(kind="ranking")
BINARY = Task(kind="classification", class_names=("different", "duplicate"))
NLI = Task(kind="classification", class_names=("neutral", "entailment", "contradiction"))
STS = Task(kind="regression", min_score=0, max_score=5)
SICK = Task(kind="regression", min_score=1, max_score=5)


# --- Task.of ----------------------------------------------------------------------------------


def test_of_a_ranking_protocol() -> None:
    assert Task.of(RankingProtocol(name="wikiqa")) == RANKING


def test_of_a_classification_protocol_keeps_the_class_names() -> None:
    protocol = ClassificationProtocol(
        name="snli", num_classes=3, class_names=("neutral", "entailment", "contradiction")
    )
    assert Task.of(protocol) == NLI
    # Without names, the class indices name the classes.
    unnamed = Task.of(ClassificationProtocol(name="msrp", num_classes=2))
    assert unnamed == Task(kind="classification", class_names=("0", "1"))


def test_of_a_regression_protocol_keeps_the_score_range() -> None:
    task = Task.of(RegressionProtocol(name="sick", min_score=1, max_score=5))
    assert task == SICK and task.num_levels == 5
    assert Task.of(RegressionProtocol(name="sts", min_score=0, max_score=5)).num_levels == 6


def test_invalid_tasks() -> None:
    with pytest.raises(ValueError, match="unknown task 'retrieval'; choose one of ranking"):
        Task(kind="retrieval")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 2 class names"):
        Task(kind="classification", class_names=("yes",))
    with pytest.raises(ValueError, match=r"min_score \(3\) must be < max_score \(3\)"):
        Task(kind="regression", min_score=3, max_score=3)
    with pytest.raises(ValueError, match=r"class name\(s\) \['yes'\] given twice"):
        Task(kind="classification", class_names=("yes", "no", "yes"))
    with pytest.raises(ValueError, match="class names are non-empty strings"):
        Task(kind="classification", class_names=("yes", " "))
    with pytest.raises(ValueError, match="finite"):
        Task(kind="regression", min_score=0, max_score=math.inf)


# --- losses and head sizes --------------------------------------------------------------------


def test_default_loss() -> None:
    assert RANKING.default_loss() == "rank_hinge"
    assert NLI.default_loss() == "cross_entropy"
    assert STS.default_loss() == "kl"


def test_resolve_loss() -> None:
    assert RANKING.resolve_loss("auto") == "rank_hinge"
    assert NLI.resolve_loss("auto") == "cross_entropy"
    assert STS.resolve_loss("auto") == "kl"
    assert STS.resolve_loss("mse") == "mse"
    for kind, losses in TASK_LOSSES.items():
        task = {"ranking": RANKING, "classification": NLI, "regression": STS}[kind]
        assert [task.resolve_loss(loss) for loss in losses] == list(losses)
    with pytest.raises(ValueError, match="cannot train a regression task; use one of kl, mse"):
        STS.resolve_loss("rank_hinge")
    with pytest.raises(ValueError, match="cannot train a classification task; use one of cross_"):
        NLI.resolve_loss("kl")
    with pytest.raises(
        ValueError,
        match="'hinge2' cannot train a ranking task; use one of rank_hinge, listwise, cross_entropy",
    ):
        RANKING.resolve_loss("hinge2")


@pytest.mark.parametrize(
    ("task", "loss", "outputs"),
    [
        (RANKING, "rank_hinge", 1),
        (RANKING, "listwise", 1),
        (RANKING, "cross_entropy", 2),  # pointwise: match / no match
        (BINARY, "cross_entropy", 2),
        (NLI, "cross_entropy", 3),
        (STS, "kl", 6),  # one output per score level 0..5
        (SICK, "kl", 5),  # 1..5
        (STS, "mse", 1),
        (SICK, "mse", 1),
    ],
)
def test_num_outputs(task: Task, loss: str, outputs: int) -> None:
    assert task.num_outputs(loss) == outputs


# --- scores and labels ------------------------------------------------------------------------


def test_ranking_scores_of_class_heads_follow_p_match() -> None:
    logits = torch.tensor([[0.0, 1.0], [2.0, 0.5], [0.0, 0.0]])
    order = ranking_scores(logits).argsort(descending=True).tolist()
    assert order == [0, 2, 1]
    assert torch.equal(ranking_scores(torch.tensor([[0.3], [0.1]])), torch.tensor([0.3, 0.1]))


def test_regression_predictions_of_both_heads() -> None:
    torch.testing.assert_close(
        regression_predictions(torch.tensor([[2.5], [0.1]]), 0), torch.tensor([2.5, 0.1])
    )
    uniform = regression_predictions(torch.zeros(1, 5), 1)  # mean of levels 1..5
    torch.testing.assert_close(uniform, torch.tensor([3.0]))


def test_scores_of_a_ranking_task() -> None:
    one = torch.tensor([[0.3], [-1.2]])
    torch.testing.assert_close(RANKING.scores(one), torch.tensor([0.3, -1.2]))  # (B, 1): itself
    two = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]])  # (B, 2): log P(match)
    torch.testing.assert_close(RANKING.scores(two), torch.tensor([math.log(0.5), math.log(0.75)]))


def test_scores_of_a_classification_task_are_log_p_of_the_last_class() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    expected = torch.log_softmax(logits, dim=-1)[:, -1]
    torch.testing.assert_close(NLI.scores(logits), expected)
    assert NLI.scores(logits)[0] > NLI.scores(logits)[1]
    binary = torch.tensor([[0.0, 1.0], [2.0, 0.5]])
    torch.testing.assert_close(BINARY.scores(binary), torch.log_softmax(binary, dim=-1)[:, 1])


def test_scores_of_both_regression_heads() -> None:
    # MSE head: the value itself, on the task's scale.
    torch.testing.assert_close(STS.scores(torch.tensor([[4.2], [0.5]])), torch.tensor([4.2, 0.5]))
    # KL head: the expected level, min_score + i for output i.
    torch.testing.assert_close(SICK.scores(torch.zeros(1, 5)), torch.tensor([3.0]))  # 1..5
    torch.testing.assert_close(STS.scores(torch.zeros(1, 6)), torch.tensor([2.5]))  # 0..5
    peaked = torch.full((1, 5), -1e4)
    peaked[0, 3] = 0.0  # all mass on level 1 + 3
    torch.testing.assert_close(SICK.scores(peaked), torch.tensor([4.0]))
    probs = torch.tensor([[0.0, 0.0, 0.5, 0.5, 0.0]])  # half on 3, half on 4
    torch.testing.assert_close(SICK.scores(torch.log(probs.clamp(min=1e-12))), torch.tensor([3.5]))


def test_labels() -> None:
    logits = torch.tensor([[0.1, 2.0, -1.0], [0.0, -1.0, 5.0], [3.0, 0.0, 0.0]])
    assert NLI.labels(logits) == ["entailment", "contradiction", "neutral"]
    assert BINARY.labels(torch.tensor([[0.0, 1.0]])) == ["duplicate"]
    for task in (RANKING, STS):
        with pytest.raises(
            ValueError, match=f"need a classification model; this one is {task.kind}"
        ):
            task.labels(torch.zeros(1, 2))


# --- where a model may be evaluated -----------------------------------------------------------


def test_check_evaluable() -> None:
    RANKING.check_evaluable("ranking", "wikiqa:test")
    NLI.check_evaluable("classification", "snli:test")
    STS.check_evaluable("regression", "sts-b:test")
    # A classification head also ranks, by P(last class) (e.g. a duplicate detector).
    BINARY.check_evaluable("ranking", "wikiqa:test")
    with pytest.raises(
        ValueError, match="a regression model cannot be evaluated on wikiqa:test, a ranking split"
    ):
        STS.check_evaluable("ranking", "wikiqa:test")
    with pytest.raises(ValueError, match="a ranking model cannot be evaluated on snli:test"):
        RANKING.check_evaluable("classification", "snli:test")
    with pytest.raises(ValueError, match="a classification model cannot be evaluated on sick"):
        NLI.check_evaluable("regression", "sick:test")


def test_check_evaluable_compares_the_number_of_classes() -> None:
    two = ClassificationProtocol(name="quora", num_classes=2)
    three = ClassificationProtocol(name="snli", num_classes=3)
    NLI.check_evaluable("classification", "snli:test", three)
    with pytest.raises(ValueError, match="a model of 3 classes .* quora:test, which has 2"):
        NLI.check_evaluable("classification", "quora:test", two)
    BINARY.check_evaluable("ranking", "wikiqa:test", RankingProtocol(name="wikiqa"))
    sick = RegressionProtocol(name="sick", min_score=1, max_score=5)
    STS.check_evaluable("regression", "sick:test", sick)


def test_a_regression_model_is_evaluated_on_its_own_score_range() -> None:
    """A SICK model (1-5, five KL levels) evaluated on an STS split (0-5): its outputs are
    read on its own range, so a model that predicts every gold score exactly has MSE 0."""
    gold = np.array([1.0, 2.0, 3.0, 5.0], dtype=np.float32)
    outputs = np.log(np.eye(5, dtype=np.float32)[(gold - 1).astype(int)] + 1e-12)  # (4, 5)
    data = EncodedPairs(
        texts=[np.array([2]), np.array([3])],
        left=np.zeros(4, dtype=np.int64),
        right=np.ones(4, dtype=np.int64),
        labels=gold,
        group_ids=np.zeros(4, dtype=np.int64),
        group_names=["g"],
    )
    protocol = RegressionProtocol(name="sts", min_score=0, max_score=5, metrics=("pearson", "mse"))
    own = report_from_outputs(outputs, data, protocol, task=SICK)
    assert own.metrics["mse"] == pytest.approx(0.0, abs=1e-6)
    assert report_from_outputs(outputs, data, protocol).metrics["mse"] > 0.9  # read as 0..4


# --- saved with the model ---------------------------------------------------------------------


@pytest.mark.parametrize("task", [RANKING, BINARY, NLI, STS, SICK])
def test_to_dict_from_dict_round_trip(task: Task) -> None:
    data = task.to_dict()
    assert Task.from_dict(data) == task

    assert Task.from_dict(json.loads(json.dumps(data))) == task  # JSON-ready (lists, ints)


def test_to_dict_keeps_only_the_kinds_keys() -> None:
    assert RANKING.to_dict() == {"kind": "ranking"}
    assert NLI.to_dict() == {
        "kind": "classification",
        "class_names": ["neutral", "entailment", "contradiction"],
    }
    assert SICK.to_dict() == {"kind": "regression", "min_score": 1, "max_score": 5}


def test_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match=r"unknown task keys \['label_space'\]"):
        Task.from_dict({"kind": "ranking", "label_space": {}})
    with pytest.raises(ValueError, match="unknown task"):
        Task.from_dict({"kind": "sorting"})
    with pytest.raises(ValueError, match="class_names must be a list of names, got 'ab'"):
        Task.from_dict({"kind": "classification", "class_names": "ab"})
