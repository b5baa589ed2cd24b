"""The training budget (epochs or steps, automatic for small data), schedules and recipes."""

from __future__ import annotations

import pytest

from attnmatch.tasks import Task
from attnmatch.training.config import ExperimentConfig, TrainConfig
from attnmatch.training.experiment import with_recipe
from attnmatch.training.optim import learning_rate


def test_automatic_budget_gives_a_small_set_enough_steps():
    b = TrainConfig().budget(4)  # a 100-pair FAQ: 4 steps an epoch
    assert b.steps >= 1000 and b.epochs == 250
    assert b.eval_every == 7  # dev every >= 25 steps
    assert b.evaluates(7) and not b.evaluates(8) and b.evaluates(250)


def test_automatic_budget_leaves_a_large_set_at_40_epochs_evaluated_each():
    b = TrainConfig().budget(65)
    assert (b.epochs, b.eval_every) == (40, 1)


def test_explicit_epochs_and_steps_win():
    assert TrainConfig(epochs=3).budget(4).epochs == 3
    assert TrainConfig(epochs=3).budget(4).eval_every == 1
    assert TrainConfig(steps=10).budget(4).epochs == 3  # rounded up to whole epochs
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)


def test_warmup_then_linear_decay():
    t = TrainConfig(lr=1.0, warmup=0.1, lr_schedule="linear")
    rates = [learning_rate(t, s, 100) for s in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert rates[10] == pytest.approx(1.0) and rates[99] == pytest.approx(1 / 90)
    assert all(a >= b for a, b in zip(rates[10:], rates[11:], strict=False))
    # the staircase default does not depend on the run's length
    assert learning_rate(TrainConfig(lr=0.5), 7) == learning_rate(TrainConfig(lr=0.5), 7, 999)


def test_preset_recipe_fills_only_defaults():
    exp = ExperimentConfig.from_dict({"model": "minilm_bi_encoder", "train": {"lr": 0.5}})
    ranking = with_recipe(exp, Task(kind="ranking"))
    assert ranking.train.optimizer == "adamw" and ranking.train.encoder_lr == 2e-5
    assert ranking.train.lr == 0.5  # given: kept
    assert ranking.train.loss == "listwise" and ranking.model_overrides["scale"] == 20.0
    regression = with_recipe(exp, Task(kind="regression", min_score=0, max_score=5))
    assert regression.train.loss == "mse"
    assert (regression.model_overrides["scale"], regression.model_overrides["shift"]) == (5.0, 0.0)
    plain = ExperimentConfig.from_dict({"model": "amvlstm_q"})
    assert with_recipe(plain, Task(kind="ranking")) == plain


def test_a_result_below_its_best_floor_is_a_warning():
    from attnmatch.training.loop import below_floor

    floors = {"random": {"map": 0.09}, "bm25": {"map": 0.46}, "overlap": {"map": 0.34}}
    warning = below_floor("map", 0.225, floors)
    assert warning is not None and "bm25 floor 0.4600" in warning and "0.2250" in warning
    assert below_floor("map", 0.9, floors) is None
    # smaller is better: mse below the mean's is fine, above it is not
    assert below_floor("mse", 0.7, {"random": {"mse": 2.6}}) is None
    assert below_floor("mse", 3.0, {"random": {"mse": 2.6}}) is not None
    assert below_floor("f1", 0.5, {"random": {"accuracy": 0.55}}) is None  # no such floor


def test_the_minilm_cross_encoder_reads_each_texts_states() -> None:
    exp = ExperimentConfig.from_dict({"model": "minilm_cross_encoder"})
    ranking = with_recipe(exp, Task(kind="ranking"))
    assert ranking.model_overrides == {"pooling": "segments", "scale": 20.0}
    assert ranking.train.loss == "listwise" and ranking.train.encoder_lr == 2e-5
    regression = with_recipe(exp, Task(kind="regression", min_score=0, max_score=5))
    assert regression.model_overrides == {
        "pooling": "segments",
        "scale": 5.0,
        "shift": 0.0,
        "cross_bias": -4.0,  # scores: attention between the texts opened by training
    }
    assert regression.train.loss == "mse"
    assert (regression.train.lr, regression.train.encoder_lr) == (0.02, 2e-5)
    assert ranking.train.lr == 1e-3 and "cross_bias" not in ranking.model_overrides
    labels = with_recipe(exp, Task(kind="classification", num_classes=3))
    assert labels.model_overrides == {"pooling": "segments"}  # SBERT's classifier on u, v
    given = ExperimentConfig.from_dict(
        {"model": "minilm_cross_encoder", "model_overrides": {"pooling": "mean"}}
    )
    assert with_recipe(given, Task(kind="ranking")).model_overrides["pooling"] == "mean"
