"""Classification and regression end to end on tiny fixtures; task and loss refusals."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attnmatch.configs import ConfigError
from attnmatch.data.encoding import EncodedPairs
from attnmatch.evaluation import report_from_outputs
from attnmatch.matcher import Matcher
from attnmatch.metrics import weighted_pearson
from attnmatch.models import _registry
from attnmatch.tasks import RegressionTask, Task
from attnmatch.training import ExperimentConfig, train

FIXTURES = Path(__file__).parents[1] / "fixtures"


def experiment(folder: str, options: dict[str, Any], **train: Any) -> ExperimentConfig:
    """A tiny MV-LSTM on a fixture; the trained model is kept in RUN/model whatever the
    floors score (train.keep = "trained")."""
    return ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 8, "k": 10},
            "data": {"dataset": "pairs", "data_dir": str(FIXTURES / folder), "options": options},
            "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 8},
            "train": {
                "epochs": 3,
                "batch_size": 8,
                "lr": 0.01,
                "patience": 0,
                "keep": "trained",
                **train,
            },
        }
    )


@pytest.mark.parametrize("loss", ["kl", "mse"])
def test_regression_trains_and_predicts_scores(tmp_path: Path, loss: str) -> None:
    exp = experiment("pairs_sts_tiny", {"task": "regression"}, loss=loss, epochs=12)
    result = train(exp, tmp_path / "run", progress=False)
    assert set(result.dev) == {"pearson", "spearman", "mse"}
    # The fixture's score is the share of shared content words: a working model learns it.
    assert result.dev["pearson"] > 0.5, result.history
    loaded = Matcher.load(result.model_dir)
    assert loaded.task == Task(kind="regression", min_score=0, max_score=5)
    assert (loaded.task.kind, loaded.task.min_score, loaded.task.max_score) == ("regression", 0, 5)
    assert loaded.model.config.num_outputs == (6 if loss == "kl" else 1)
    scores = loaded.score([("river stone", "river stone"), ("river", "lamp")])
    assert scores.shape == (2,)
    if loss == "kl":  # an expectation over the levels 0..5
        assert np.all((scores >= 0) & (scores <= 5))


def test_auto_loss_for_classification(tmp_path: Path) -> None:
    exp = experiment("pairs_tiny", {"task": "classification"}, epochs=8)
    assert exp.train.loss == "auto"
    result = train(exp, tmp_path / "run", progress=False)
    assert set(result.dev) == {"accuracy", "f1"}
    assert result.dev["accuracy"] > 0.75  # 1 in 4 candidates is relevant: beat the majority
    matcher = Matcher.load(result.model_dir)
    assert matcher.task.kind == "classification" and matcher.task.class_names == ("0", "1")
    labels = matcher.classify([("what bridge window ?", "window for by is with bridge")])
    assert labels[0] in ("0", "1")


def test_pointwise_ranking_with_cross_entropy(tmp_path: Path) -> None:
    exp = experiment("pairs_tiny", {}, loss="cross_entropy", epochs=2)
    result = train(exp, tmp_path / "run", progress=False)
    assert "map" in result.dev
    loaded = Matcher.load(result.model_dir)
    assert loaded.model.config.num_outputs == 2 and loaded.task.kind == "ranking"


def test_a_loss_that_cannot_train_the_task_is_refused(tmp_path: Path) -> None:
    exp = experiment("pairs_sts_tiny", {"task": "regression"}, loss="rank_hinge")
    with pytest.raises(ValueError, match="cannot train a regression task; use one of kl, mse"):
        train(exp, tmp_path / "run", progress=False)


def test_a_model_without_the_task_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = _registry.get_model_entry("mvlstm")
    patched = dataclasses.replace(entry, tasks=("ranking",))
    monkeypatch.setitem(_registry._MODELS, "mvlstm", patched)
    exp = experiment("pairs_sts_tiny", {"task": "regression"})
    with pytest.raises(ValueError, match="'mvlstm' does not support the regression task"):
        train(exp, tmp_path / "run", progress=False)


def test_unknown_loss_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="loss"):
        experiment("pairs_tiny", {}, loss="hinge")


def test_grouped_regression_report_is_pair_weighted() -> None:
    rng = np.random.default_rng(3)
    groups = ["2016/a"] * 5 + ["2016/b"] * 15
    gold = rng.uniform(0, 5, 20).astype(np.float32)
    pred = gold + rng.normal(size=20).astype(np.float32)
    data = EncodedPairs(
        texts=[np.array([2])],
        left=np.zeros(20, dtype=np.int64),
        right=np.zeros(20, dtype=np.int64),
        labels=gold,
        group_ids=np.array([0] * 5 + [1] * 15),
        group_names=["2016/a", "2016/b"],
    )
    protocol = RegressionTask(name="sts", min_score=0, max_score=5, by_group=True)
    report = report_from_outputs(pred[:, None], data, protocol)
    mean, per_set, _ = weighted_pearson(pred, gold, groups)
    assert report.metrics["pearson"] == pytest.approx(mean)
    assert report.per_query == [
        {"group": "2016/a", "pairs": 5, "pearson": pytest.approx(per_set["2016/a"])},
        {"group": "2016/b", "pairs": 15, "pearson": pytest.approx(per_set["2016/b"])},
    ]


def test_cli_evaluate_with_dataset_options_and_task_check(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from attnmatch.cli import app

    exp = experiment("pairs_sts_tiny", {"task": "regression"}, loss="mse", epochs=1)
    model_dir = train(exp, tmp_path / "run", progress=False).model_dir
    runner = CliRunner()
    args = ["evaluate", str(model_dir), "--dataset", "pairs:test"]
    args += ["--data-dir", str(FIXTURES / "pairs_sts_tiny"), "--json"]
    result = runner.invoke(app, [*args, "--dataset-option", "task=regression"])
    assert result.exit_code == 0, result.output
    assert '"pearson"' in result.output and '"protocol": "pairs-regression"' in result.output
    result = runner.invoke(app, [*args, "--dataset-option", "task=ranking"])  # refused
    assert result.exit_code != 0
    assert "a regression model cannot be evaluated on pairs:test, a ranking split" in (
        str(result.exception) + result.output
    )
