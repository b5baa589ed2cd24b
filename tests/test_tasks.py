"""Tasks: the task a protocol implies, its losses and head size, how outputs become scores and
labels, where a model may be evaluated, and the dict saved with a model."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from attnmatch.calibration import PlattScaling
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import Example
from attnmatch.evaluation import report_from_outputs
from attnmatch.tasks import (
    GROUP_LOSSES,
    TASKS,
    ClassificationTask,
    Predictions,
    RankingTask,
    RegressionTask,
    Task,
    among,
    for_task,
    item_values,
    migrate_v1_task,
    ranking_scores,
    regression_predictions,
    same_kind,
)

RANKING = RankingTask()
BINARY = ClassificationTask(class_names=("different", "duplicate"))
NLI = ClassificationTask(class_names=("neutral", "entailment", "contradiction"))
STS = RegressionTask(min_score=0, max_score=5)
SICK = RegressionTask(min_score=1, max_score=5)
CALIBRATED = RankingTask(calibration=PlattScaling(scale=2.0, shift=-1.0))


def test_task_of_a_kind_builds_its_class() -> None:
    assert Task(kind="ranking") == RANKING and type(Task(kind="ranking")) is RankingTask
    assert Task(kind="classification", class_names=("different", "duplicate")) == BINARY
    assert Task(kind="regression", min_score=1, max_score=5) == SICK
    with pytest.raises(ValueError, match="a RankingTask is of kind 'ranking', not 'regression'"):
        RankingTask(kind="regression")
    assert dataclasses.replace(SICK, max_score=4).num_levels == 4  # replace keeps the class


# --- Task.of ----------------------------------------------------------------------------------


def test_of_a_ranking_protocol() -> None:
    assert Task.of(RankingTask(name="wikiqa")) == RANKING


def test_of_a_classification_protocol_keeps_the_class_names() -> None:
    protocol = ClassificationTask(
        name="snli", num_classes=3, class_names=("neutral", "entailment", "contradiction")
    )
    assert Task.of(protocol) == NLI
    # Without names, the class indices name the classes.
    unnamed = Task.of(ClassificationTask(name="msrp", num_classes=2))
    assert unnamed == Task(kind="classification", class_names=("0", "1"))


def test_of_a_regression_protocol_keeps_the_score_range() -> None:
    task = Task.of(RegressionTask(name="sick", min_score=1, max_score=5))
    assert task == SICK and task.num_levels == 5
    assert Task.of(RegressionTask(name="sts", min_score=0, max_score=5)).num_levels == 6


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


def test_resolve_loss() -> None:
    assert RANKING.resolve_loss("auto") == "rank_hinge"
    assert NLI.resolve_loss("auto") == "cross_entropy"
    assert STS.resolve_loss("auto") == "kl"
    assert STS.resolve_loss("mse") == "mse"
    assert RegressionTask(min_score=0.5, max_score=2.5).resolve_loss("auto") == "mse"
    for task in (RANKING, NLI, STS):
        assert [task.resolve_loss(loss) for loss in task.LOSSES] == list(task.LOSSES)
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


def scores(task: Task, outputs: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(task.decode(outputs.numpy()).scores)


def test_scores_of_a_ranking_task() -> None:
    one = torch.tensor([[0.3], [-1.2]])
    torch.testing.assert_close(scores(RANKING, one), torch.tensor([0.3, -1.2]))  # (B, 1): itself
    two = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]])  # (B, 2): log P(match)
    expected = torch.tensor([math.log(0.5), math.log(0.75)])
    torch.testing.assert_close(scores(RANKING, two), expected)


def test_scores_of_a_classification_task_are_log_p_of_the_last_class() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    expected = torch.log_softmax(logits, dim=-1)[:, -1]
    torch.testing.assert_close(scores(NLI, logits), expected)
    assert scores(NLI, logits)[0] > scores(NLI, logits)[1]
    binary = torch.tensor([[0.0, 1.0], [2.0, 0.5]])
    torch.testing.assert_close(scores(BINARY, binary), torch.log_softmax(binary, dim=-1)[:, 1])


def test_scores_of_both_regression_heads() -> None:
    # MSE head: the value itself, on the task's scale.
    torch.testing.assert_close(scores(STS, torch.tensor([[4.2], [0.5]])), torch.tensor([4.2, 0.5]))
    # KL head: the expected level, min_score + i for output i.
    torch.testing.assert_close(scores(SICK, torch.zeros(1, 5)), torch.tensor([3.0]))  # 1..5
    torch.testing.assert_close(scores(STS, torch.zeros(1, 6)), torch.tensor([2.5]))  # 0..5
    peaked = torch.full((1, 5), -1e4)
    peaked[0, 3] = 0.0  # all mass on level 1 + 3
    torch.testing.assert_close(scores(SICK, peaked), torch.tensor([4.0]))
    probs = torch.tensor([[0.0, 0.0, 0.5, 0.5, 0.0]])  # half on 3, half on 4
    half = scores(SICK, torch.log(probs.clamp(min=1e-12)))
    torch.testing.assert_close(half, torch.tensor([3.5]))


def test_labels() -> None:
    logits = np.array([[0.1, 2.0, -1.0], [0.0, -1.0, 5.0], [3.0, 0.0, 0.0]], dtype=np.float32)
    assert NLI.decode(logits).labels == ["entailment", "contradiction", "neutral"]
    assert BINARY.decode(np.array([[0.0, 1.0]], dtype=np.float32)).labels == ["duplicate"]
    for task in (RANKING, STS):
        assert task.decode(np.zeros((1, 1), dtype=np.float32)).labels is None


# --- where a model may be evaluated -----------------------------------------------------------


def test_check_evaluable() -> None:
    RANKING.check_evaluable(RankingTask(name="wikiqa"), "wikiqa:test")
    NLI.check_evaluable(NLI, "snli:test")
    STS.check_evaluable(STS, "sts-b:test")
    # A classification head also ranks, by P(last class) (e.g. a duplicate detector).
    BINARY.check_evaluable(RANKING, "wikiqa:test")
    with pytest.raises(
        ValueError, match="a regression model cannot be evaluated on wikiqa:test, a ranking split"
    ):
        STS.check_evaluable(RANKING, "wikiqa:test")
    with pytest.raises(ValueError, match="a ranking model cannot be evaluated on snli:test"):
        RANKING.check_evaluable(NLI, "snli:test")
    with pytest.raises(ValueError, match="a classification model cannot be evaluated on sick"):
        NLI.check_evaluable(SICK, "sick:test")


def test_check_evaluable_compares_the_number_of_classes() -> None:
    two = ClassificationTask(name="quora", num_classes=2)
    three = ClassificationTask(name="snli", num_classes=3)
    NLI.check_evaluable(three, "snli:test")
    with pytest.raises(ValueError, match="a model of 3 classes .* quora:test, which has 2"):
        NLI.check_evaluable(two, "quora:test")
    BINARY.check_evaluable(RankingTask(name="wikiqa"), "wikiqa:test")
    sick = RegressionTask(name="sick", min_score=1, max_score=5)
    STS.check_evaluable(sick, "sick:test")  # read on its own range


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
    protocol = RegressionTask(name="sts", min_score=0, max_score=5, metrics=("pearson", "mse"))
    own = report_from_outputs(outputs, data, protocol, task=SICK)
    assert own.metrics["mse"] == pytest.approx(0.0, abs=1e-6)
    assert report_from_outputs(outputs, data, protocol).metrics["mse"] > 0.9  # read as 0..4


# --- saved with the model ---------------------------------------------------------------------


@pytest.mark.parametrize("task", [RANKING, CALIBRATED, BINARY, NLI, STS, SICK])
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

    with pytest.raises(ValueError, match="a calibration belongs to a ranking task"):
        Task.from_dict({"kind": "regression", "calibration": {"scale": 1.0, "shift": 0.0}})
    with pytest.raises(ValueError, match="a scale and a shift"):
        Task.from_dict({"kind": "ranking", "calibration": {"scale": 1.0}})


def test_a_ranking_task_saves_its_calibration() -> None:
    assert CALIBRATED.to_dict() == {
        "kind": "ranking",
        "calibration": {"scale": 2.0, "shift": -1.0},
    }
    # A protocol's task keeps what a model saves and drops the protocol's fields.
    assert Task.of(RankingTask(name="wikiqa-official", primary="mrr")) == RANKING


def test_classes_by_number() -> None:
    assert ClassificationTask(name="msrp", num_classes=2).class_names == ("0", "1")
    assert ClassificationTask(class_names=("a", "b", "c")).num_classes == 3
    with pytest.raises(ValueError, match="msrp: num_classes must be >= 2, got 1"):
        ClassificationTask(name="msrp", num_classes=1)
    with pytest.raises(ValueError, match="snli: 2 class_names for 3 classes"):
        ClassificationTask(name="snli", num_classes=3, class_names=("a", "b"))


def test_first_format_tasks() -> None:
    assert migrate_v1_task("ranking", {}, 1) == {"kind": "ranking"}
    assert migrate_v1_task("classification", {}, 3) == {
        "kind": "classification",
        "class_names": ["0", "1", "2"],
    }
    named = migrate_v1_task("classification", {"class_names": ["no", "yes"]}, 2)
    assert named["class_names"] == ["no", "yes"]
    assert migrate_v1_task("regression", {"min_score": 1}, 5) == {
        "kind": "regression",
        "min_score": 1,
        "max_score": 5,
    }
    assert migrate_v1_task("sorting", {}, 1) == {"kind": "sorting"}  # refused when loaded


# --- decoding: Predictions ---------------------------------------------------------------------


def test_a_ranking_task_has_a_relevance_only_when_calibrated() -> None:
    outputs = np.array([[0.5], [-2.0], [3.0]], dtype=np.float32)
    plain = RANKING.decode(outputs)
    np.testing.assert_array_equal(plain.scores, outputs[:, 0])
    assert plain.relevance is None and plain.labels is None and RANKING.relevance_scale == "score"
    np.testing.assert_array_equal(plain.tei_scores(raw_scores=False), plain.scores)
    calibrated = CALIBRATED.decode(outputs)
    np.testing.assert_allclose(calibrated.relevance, 1 / (1 + np.exp(-(2 * outputs[:, 0] - 1))))
    assert CALIBRATED.relevance_scale == "probability"
    np.testing.assert_array_equal(calibrated.tei_scores(raw_scores=True), calibrated.scores)


def test_a_classification_task_decodes_labels_probabilities_and_p_last() -> None:
    logits = np.array([[0.1, 2.0, -1.0], [0.0, -1.0, 5.0]], dtype=np.float32)
    predictions = NLI.decode(logits)
    assert predictions.labels == ["entailment", "contradiction"]
    probabilities = torch.softmax(torch.from_numpy(logits), dim=-1).numpy()
    np.testing.assert_allclose(predictions.probabilities, probabilities, rtol=1e-6)
    np.testing.assert_allclose(predictions.relevance, probabilities[:, -1], rtol=1e-6)
    np.testing.assert_allclose(np.exp(predictions.scores), probabilities[:, -1], rtol=1e-5)
    rows = predictions.class_probabilities()
    assert rows is not None and list(rows[0]) == ["neutral", "entailment", "contradiction"]
    assert NLI.relevance_scale == "probability"


def test_a_regression_task_maps_its_range_onto_0_1() -> None:
    predictions = SICK.decode(np.array([[1.0], [3.0], [5.0], [6.5], [0.0]], dtype=np.float32))
    np.testing.assert_allclose(predictions.relevance, [0.0, 0.5, 1.0, 1.0, 0.0])
    assert predictions.labels is None and SICK.relevance_scale == "similarity"


def test_predictions_are_cut_by_rows() -> None:
    predictions = NLI.decode(np.zeros((4, 3), dtype=np.float32))
    part = predictions[1:3]
    assert isinstance(part, Predictions) and len(part) == 2 and part.labels is not None
    assert part.probabilities is not None and part.probabilities.shape == (2, 3)
    assert part.class_names == NLI.class_names


# --- what each kind answers ---------------------------------------------------------------------


def test_label_and_head_checks() -> None:
    RANKING.check_label(3.0)
    BINARY.check_label(1)
    with pytest.raises(ValueError, match=r"class index, 0 \(different\) or 1 \(duplicate\), got 2"):
        BINARY.check_label(2)
    with pytest.raises(ValueError, match="the label 6 is outside the task's score range 1..5"):
        SICK.check_label(6)
    NLI.check_num_outputs(3)
    with pytest.raises(ValueError, match="names 3 classes, but the model has 2 outputs"):
        NLI.check_num_outputs(2)
    SICK.check_num_outputs(5)
    with pytest.raises(ValueError, match="has 1 output or one per integer level, not 4"):
        SICK.check_num_outputs(4)


def test_a_classifier_reads_a_ranking_split_as_its_classes() -> None:
    examples = [Example("q", "a", 1.0, "g"), Example("q", "b", 0.0, "g")]
    protocol = BINARY.protocol_for(RankingTask(name="wikiqa"), examples, "wikiqa:test")
    assert isinstance(protocol, ClassificationTask) and protocol.primary == "f1"
    assert protocol.name == "wikiqa read as classification"
    assert STS.protocol_for(SICK, examples, "sick:test") is SICK
    with pytest.raises(ValueError, match="labels .* are not class indices 0..1"):
        BINARY.protocol_for(RANKING, [Example("q", "a", 2.0, "g")], "trec:test")


def test_training_answers() -> None:
    assert set(GROUP_LOSSES) < set(RankingTask.LOSSES)  # only ranking trains on groups
    assert not set(GROUP_LOSSES) & {*ClassificationTask.LOSSES, *RegressionTask.LOSSES}
    assert among(RANKING, ("ranking", "classification")) and not among(STS, ("ranking",))
    assert same_kind(RANKING, CALIBRATED) and not same_kind(RANKING, BINARY)


def test_for_task_reads_a_table_keyed_by_task_class() -> None:
    table = {RankingTask: "r", Task: "any"}
    assert for_task(table, CALIBRATED) == "r" and for_task(table, RankingTask) == "r"
    assert for_task(table, STS) == "any"  # the nearest base class with an entry
    assert list(TASKS.values()) == [RankingTask, ClassificationTask, RegressionTask]
    with pytest.raises(KeyError, match="no entry for RegressionTask in a table of RankingTask"):
        for_task({RankingTask: 1}, STS)


def test_calibrated_on_dev_outputs() -> None:
    outputs = np.array([[3.0], [0.5], [-1.0], [2.5], [-2.0], [0.0]], dtype=np.float32)
    labels = np.array([1, 0, 0, 1, 0, 0], dtype=np.float32)
    calibrated = RANKING.calibrated_on(outputs, labels)
    assert isinstance(calibrated, RankingTask) and calibrated.calibration is not None
    relevance = calibrated.decode(outputs).relevance
    assert relevance is not None and relevance[[0, 3]].min() > 0.5 > relevance[[2, 4]].max()
    assert NLI.calibrated_on(np.zeros((6, 3)), labels) is NLI


def test_item_values_of_each_kind() -> None:
    queries = {"kind": "ranking", "queries": [{"group": "q1", "map": 0.5}, {"group": 2, "map": 1}]}
    keys, values = item_values(queries, "map")
    assert keys == ["q1", "2"] and values.tolist() == [0.5, 1.0]
    pairs = {"kind": "classification", "labels": [0, 1, 1], "predicted": [0, 0, 1]}
    assert item_values(pairs, "accuracy")[1].tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="f1: only accuracy is a mean over pairs"):
        item_values(pairs, "f1")
    with pytest.raises(ValueError, match="pearson on regression items is not a mean over items"):
        item_values({"kind": "regression"}, "pearson")


def test_a_threshold_fitted_on_dev_decides_and_is_saved() -> None:
    task = ClassificationTask(class_names=("no", "yes"), primary="f1")
    # margins (yes - no): the positives sit at 0.2 .. 0.6, above a threshold the argmax misses
    outputs = np.array([[0.0, m] for m in (-2.0, -1.5, -1.0, -0.6, -0.4, -0.2)], dtype=np.float32)
    labels = np.array([0, 0, 0, 1, 1, 1])
    calibrated = task.calibrated_on(outputs, labels)
    assert isinstance(calibrated, ClassificationTask)
    assert -1.0 < calibrated.threshold < -0.6
    assert calibrated.decode(outputs).labels == ["no", "no", "no", "yes", "yes", "yes"]
    assert task.decode(outputs).labels == ["no"] * 6
    probabilities = calibrated.decode(outputs).probabilities
    assert probabilities is not None and (probabilities[3:, 1] > 0.5).all()
    data = EncodedPairs(
        texts=[np.zeros(1, dtype=np.int64)],
        left=np.zeros(6, dtype=np.int64),
        right=np.zeros(6, dtype=np.int64),
        labels=labels.astype(np.float32),
        group_ids=np.arange(6),
        group_names=[str(i) for i in range(6)],
    )
    metrics = report_from_outputs(outputs, data, task, task=calibrated).metrics
    assert metrics["f1"] == 1.0 and metrics["accuracy"] == 1.0
    saved = calibrated.to_dict()
    loaded = Task.from_dict(json.loads(json.dumps(saved)))
    assert isinstance(loaded, ClassificationTask) and loaded.threshold == calibrated.threshold
    assert "threshold" not in task.to_dict()  # an argmax model saves as before
    good = np.array([[0.0, m] for m in (-2.0, -1.0, 1.0, 2.0)], dtype=np.float32)
    assert task.calibrated_on(good, np.array([0, 0, 1, 1])).threshold == 0.0  # argmax is best
    with pytest.raises(ValueError, match="threshold"):
        ClassificationTask(class_names=("a", "b", "c"), threshold=1.0)
