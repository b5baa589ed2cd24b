"""Zero-shot heads: thresholds and lines fitted on labelled pairs, for lexical and encoder
matchers, never a random head."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnmatch.data.schema import Example
from attnmatch.inputs import TokenEncoderConfig
from attnmatch.matcher import Matcher
from attnmatch.models.pretrained import BiEncoderConfig
from attnmatch.tasks import ClassificationTask, Task
from attnmatch.zero_shot import ScoreHead, fit_line, fit_threshold
from tests.tiny_transformer import write_tiny_encoder

BINARY = Task(kind="classification", class_names=("different", "same"))
STS = Task(kind="regression", min_score=0, max_score=5)


def _brute_force(s: np.ndarray, y: np.ndarray, metric: str) -> float:
    """The best value of `metric` over every threshold, tried one by one."""
    from attnmatch.metrics import accuracy, f1, macro_f1

    fn = {"accuracy": accuracy, "f1": f1, "macro_f1": lambda p, t: macro_f1(p, t, 2)}[metric]
    cuts = np.r_[s.min() - 1, np.unique(s)]
    return max(fn((s > t).astype(int), y) for t in cuts)


@pytest.mark.parametrize("metric", ["accuracy", "f1", "macro_f1"])
def test_fit_threshold_finds_the_best_cut(metric: str) -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = rng.integers(0, 6, 15).astype(float)  # many ties
        y = rng.integers(0, 2, 15)
        t = fit_threshold(s, y, metric=metric)
        p = (s > t).astype(int)
        from attnmatch.metrics import accuracy, f1, macro_f1

        got = {"accuracy": accuracy(p, y), "f1": f1(p, y), "macro_f1": macro_f1(p, y, 2)}
        assert got[metric] == pytest.approx(_brute_force(s, y, metric))


def test_fit_threshold_separates_a_separable_set() -> None:
    s = np.array([0.9, 0.1, 0.75, 0.3, 0.2, 0.8])
    y = np.array([1, 0, 1, 0, 0, 1])
    t = fit_threshold(s, y)
    assert 0.3 < t < 0.75 and t == pytest.approx((0.3 + 0.75) / 2)
    assert fit_threshold([1.0, 2.0], [1, 1]) < 1.0  # everything positive
    assert fit_threshold([1.0, 2.0], [0, 0]) > 2.0  # nothing positive
    with pytest.raises(ValueError, match="metric 'auc'"):
        fit_threshold(s, y, metric="auc")


def test_fit_line_maps_toy_data_exactly() -> None:
    slope, intercept = fit_line([0.0, 0.5, 1.0], [1.0, 3.0, 5.0])
    assert (slope, intercept) == pytest.approx((4.0, 1.0))
    head = STS.zero_shot_head(np.array([0.0, 0.5, 1.0]), np.array([1.0, 3.0, 5.0]))
    np.testing.assert_allclose(head.outputs([0.0, 0.25, 1.0])[:, 0], [1.0, 2.0, 5.0], rtol=1e-6)
    with pytest.raises(ValueError, match="same similarity"):
        fit_line([0.3, 0.3], [1.0, 2.0])


def test_zero_shot_head_without_labels_and_its_errors() -> None:
    head = STS.zero_shot_head(None, None, similarity_range=(-1.0, 1.0))  # cosine onto 0-5
    np.testing.assert_allclose(head.outputs([-1.0, 0.0, 1.0])[:, 0], [0.0, 2.5, 5.0])
    assert Task(kind="ranking").zero_shot_head(None, None) == ScoreHead()
    with pytest.raises(ValueError, match="no fixed range: zero-shot regression needs labelled"):
        STS.zero_shot_head(None, None)
    with pytest.raises(ValueError, match="needs labelled pairs .* threshold"):
        BINARY.zero_shot_head(None, None)
    three = Task(kind="classification", class_names=("e", "n", "c"))
    with pytest.raises(ValueError, match="needs 2 classes; this task has 3 \\(e, n, c\\)"):
        three.zero_shot_head(np.array([0.1, 0.2]), np.array([0, 1]))


def test_two_output_heads_predict_the_last_class_above_the_threshold() -> None:
    head = BINARY.zero_shot_head(np.array([0.1, 0.2, 0.8, 0.9]), np.array([0, 0, 1, 1]))
    assert head.num_outputs == 2 and head.threshold == pytest.approx(0.5)
    out = head.outputs([0.49, 0.51])
    assert out[:, 0].tolist() == [0.0, 0.0] and out.argmax(axis=1).tolist() == [0, 1]


CALIBRATION = [
    ("a b c d", "a b c d", 1),
    ("a b c d", "a b c x", 1),
    ("a b c d", "a x y z", 0),
    ("p q", "r s", 0),
    ("p q r", "p q r", 1),
]


def test_lexical_classifier_is_calibrated_and_deterministic() -> None:
    build = lambda cal: Matcher.from_lexical("overlap", task=BINARY, calibration=cal)  # noqa: E731
    matcher = build(CALIBRATION)
    pairs = [("a b", "a b"), ("a b c d", "a"), ("a b", "z")]
    assert matcher.classify(pairs) == ["same", "different", "different"]
    np.testing.assert_array_equal(matcher.outputs(pairs), build(CALIBRATION).outputs(pairs))
    examples = [Example(a, b, y) for a, b, y in CALIBRATION]
    np.testing.assert_array_equal(matcher.outputs(pairs), build(examples).outputs(pairs))
    low = build([("a b c d", "a", 1), ("a b", "x", 0)])  # a lower threshold: 0.25 is "same"
    assert low.classify(pairs) == ["same", "same", "different"]
    report = matcher.evaluate_examples(examples, ClassificationTask(name="toy", num_classes=2))
    assert report.metrics["accuracy"] == 1.0


def test_calibration_errors_name_the_pair() -> None:
    with pytest.raises(ValueError, match="calibration pair 1: expected an Example or"):
        Matcher.from_lexical("bm25", task=BINARY, calibration=[("a", "b", 1), ("a", "b")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="calibration pair 0: the label must be a number"):
        Matcher.from_lexical("bm25", task=BINARY, calibration=[("a", "b", "same")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="a ranking task needs none"):
        Matcher.from_lexical("bm25", calibration=CALIBRATION)


def test_lexical_regression_maps_overlap_or_fits_bm25() -> None:
    matcher = Matcher.from_lexical("overlap", task=STS)  # [0, 1] onto [0, 5]
    np.testing.assert_allclose(
        matcher.score([("a b", "a b"), ("a b", "a"), ("a", "b")]), [5, 2.5, 0]
    )
    with pytest.raises(ValueError, match="no fixed range"):
        Matcher.from_lexical("bm25", task=STS)
    fitted = Matcher.from_lexical(
        "bm25", task=STS, calibration=[(a, b, 4.0 * y) for a, b, y in CALIBRATION]
    )
    assert fitted.score([("a b c d", "a b c d")])[0] > fitted.score([("a b c d", "x")])[0]


# ----------------------------------------------------------------- encoders (a tiny random BERT)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny-bert")


ENCODER_CAL = [
    ("how are glacier caves formed ?", "how are glacier caves formed ?", 1),
    ("the war ended in 1945 .", "the war ended in 1945 .", 1),
    ("how are glacier caves formed ?", "a dog plays guitar", 0),
    ("what year did the war end ?", "the man runs", 0),
    ("a man plays guitar", "a man plays guitar", 1),
    ("ice melts", "the dog runs", 0),
]
PAIRS = [
    ("a dog plays guitar", "a dog plays guitar"),
    ("the war ended in 1945 .", "how are glacier caves formed ?"),
    ("water melts ice", "a cave is in the ice"),
]


def test_encoder_classifier_is_a_threshold_on_the_cosine(encoder_dir: Path) -> None:
    """Never a random head: two builds agree, and the prediction is cos > t with t fitted on
    the calibration pairs' cosines."""
    source = str(encoder_dir)
    cosine = Matcher.from_encoder(source)
    matcher = Matcher.from_encoder(source, task=BINARY, calibration=ENCODER_CAL)
    assert matcher.model.config.cosine_logits and matcher.model.classifier is None
    np.testing.assert_array_equal(
        matcher.outputs(PAIRS),
        Matcher.from_encoder(source, task=BINARY, calibration=ENCODER_CAL).outputs(PAIRS),
    )
    labels = np.array([y for *_, y in ENCODER_CAL])
    t = fit_threshold(cosine.score([(a, b) for a, b, _ in ENCODER_CAL]), labels)
    assert matcher.model.config.shift == pytest.approx(-matcher.model.config.scale * t)
    cos = cosine.score(PAIRS)
    expected = ["same" if c > t else "different" for c in cos]
    assert matcher.classify(PAIRS) == expected and "same" in expected
    everything = [(a, b, 1) for a, b, _ in ENCODER_CAL]  # a threshold below every cosine
    assert (
        Matcher.from_encoder(source, task=BINARY, calibration=everything).classify(PAIRS)
        == ["same"] * 3
    )


def test_calibrated_encoder_matchers_round_trip(encoder_dir: Path, tmp_path: Path) -> None:
    classifier = Matcher.from_encoder(str(encoder_dir), task=BINARY, calibration=ENCODER_CAL)
    regressor = Matcher.from_encoder(
        str(encoder_dir), task=STS, calibration=[(a, b, 5.0 * y) for a, b, y in ENCODER_CAL]
    )
    for name, matcher in (("c", classifier), ("r", regressor)):
        path = matcher.save(tmp_path / name)
        header = json.loads((path / "config.json").read_text())
        assert header["config"]["scale"] == matcher.model.config.scale
        loaded = Matcher.load(path)
        assert loaded.task == matcher.task
        np.testing.assert_array_equal(loaded.outputs(PAIRS), matcher.outputs(PAIRS))


def test_encoder_regression_is_a_line_through_the_cosine(encoder_dir: Path) -> None:
    source = str(encoder_dir)
    cos = Matcher.from_encoder(source).score(PAIRS)
    plain = Matcher.from_encoder(source, task=STS)  # [-1, 1] onto [0, 5]
    np.testing.assert_allclose(plain.score(PAIRS), 2.5 * cos + 2.5, rtol=1e-5)
    calibration = [(a, b, 5.0 * y) for a, b, y in ENCODER_CAL]
    cal_cos = Matcher.from_encoder(source).score([(a, b) for a, b, _ in calibration])
    slope, intercept = fit_line(cal_cos, [y for *_, y in calibration])
    fitted = Matcher.from_encoder(source, task=STS, calibration=calibration)
    np.testing.assert_allclose(fitted.score(PAIRS), slope * cos + intercept, rtol=1e-4, atol=1e-5)
    three = Task(kind="classification", class_names=("e", "n", "c"))
    with pytest.raises(ValueError, match="needs 2 classes"):
        Matcher.from_encoder(source, task=three, calibration=ENCODER_CAL)


def test_bi_encoder_config_checks_cosine_logits() -> None:
    encoder = TokenEncoderConfig(vocab_size=10)  # averaged word vectors
    with pytest.raises(ValueError, match="cosine_logits needs num_outputs = 2"):
        BiEncoderConfig(encoder=encoder, cosine_logits=True)
    with pytest.raises(ValueError, match="scale must be finite and != 0"):
        BiEncoderConfig(encoder=encoder, scale=0.0)
    assert BiEncoderConfig(encoder=encoder, scale=-2.0).scale == -2.0  # a falling line is a line
