"""The MiniLM bi-encoder's recipe for 2 classes: a cosine head fitted zero-shot before training
(`training.experiment._cosine_start`, `models.pretrained._BI_ENCODER_HEAD`)."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import numpy as np
import pytest

from attnmatch.matcher import Matcher
from attnmatch.models.pretrained import BiEncoder
from attnmatch.training import ExperimentConfig, build_experiment, train
from tests.tiny_transformer import write_tiny_encoder

WORDS = ("red", "blue", "green", "cat", "dog", "bird", "big", "small", "runs", "sleeps", "eats")


def _pairs(seed: int, n: int, classes: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        left = rng.sample(WORDS, 4)
        label = rng.randrange(classes)
        right = left[:3] + [rng.choice(WORDS)] if label else rng.sample(WORDS, 4)
        rows.append((" ".join(left), " ".join(right), label))
    return rows


def _folder(root: Path, classes: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, split in enumerate(("train", "dev", "test")):
        with (root / f"{split}.tsv").open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, delimiter="\t")
            writer.writerow(["left", "right", "label"])
            rows = _pairs(i, 48 if split == "train" else 24, classes)
            # Class names, not numbers: 0/1/2 would read as a score (regression).
            writer.writerows(rows if classes == 2 else [(a, b, "abc"[y]) for a, b, y in rows])
    return root


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny-bert", extra_words=WORDS)


def _config(encoder: Path, data: Path, **overrides: object) -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "model": "minilm_bi_encoder",
            "model_overrides": dict(overrides),
            "data": {"dataset": "pairs", "data_dir": str(data)},
            "inputs": {"kind": "transformer", "source": str(encoder), "trainable": True},
            "train": {"epochs": 1, "batch_size": 8, "keep": "trained", "seed": 3},
        }
    )


def test_two_classes_start_from_the_zero_shot_head(encoder_dir: Path, tmp_path: Path) -> None:
    data = _folder(tmp_path, classes=2)
    exp = build_experiment(_config(encoder_dir, data))
    config = exp.matcher.model.config
    assert config.cosine_logits and exp.matcher.model.classifier is None
    # The head is the zero-shot classifier's, fitted on the training pairs to the primary metric.
    train_rows = _pairs(0, 48, 2)
    zero_shot = Matcher.from_encoder(
        str(encoder_dir), task=exp.matcher.task, calibration=train_rows, metric="accuracy"
    )
    assert config.scale == pytest.approx(zero_shot.model.config.scale, rel=1e-5)
    assert config.shift == pytest.approx(zero_shot.model.config.shift, rel=1e-5, abs=1e-6)
    assert config.scale != 1.0  # fitted, not the config's default
    # The encoder is trainable: the head is weightless, so training moves the encoder alone.
    assert any(p.requires_grad for p in exp.matcher.model.parameters())
    # Before training the model predicts what the zero-shot classifier predicts.
    pairs = [(left, right) for left, right, _ in _pairs(1, 24, 2)]
    np.testing.assert_allclose(
        exp.matcher.outputs(pairs), zero_shot.outputs(pairs), rtol=1e-4, atol=1e-5
    )


def test_the_trained_cosine_head_round_trips(encoder_dir: Path, tmp_path: Path) -> None:
    data = _folder(tmp_path / "data", classes=2)
    result = train(_config(encoder_dir, data), tmp_path / "run", progress=False)
    loaded = Matcher.load(result.model_dir)
    assert isinstance(loaded.model, BiEncoder) and loaded.model.config.cosine_logits
    assert set(loaded.classify([("red cat runs big", "red cat runs dog")])) <= {"0", "1"}


def test_a_given_head_or_more_classes_keep_the_classifier(
    encoder_dir: Path, tmp_path: Path
) -> None:
    two, three = _folder(tmp_path / "two", classes=2), _folder(tmp_path / "three", classes=3)
    # Asked for SBERT's classifier: no cosine head.
    exp = build_experiment(_config(encoder_dir, two, cosine_logits=False))
    assert exp.matcher.model.classifier is not None
    # A scale and shift given are kept, not fitted.
    exp = build_experiment(_config(encoder_dir, two, cosine_logits=True, scale=7.0, shift=-3.0))
    assert (exp.matcher.model.config.scale, exp.matcher.model.config.shift) == (7.0, -3.0)
    # 3 classes cannot be read off one cosine: SBERT's classifier.
    exp = build_experiment(_config(encoder_dir, three))
    assert exp.matcher.model.classifier is not None and exp.matcher.task.num_classes == 3
