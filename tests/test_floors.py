"""Floors: the no-training baselines printed beside a result, computed under the split's
protocol like the model's own metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from attnmatch import floors as floors_module
from attnmatch.data.schema import Example
from attnmatch.floors import compute_floors, encoder_cosines, format_floors
from attnmatch.matcher import Matcher
from attnmatch.models.pretrained import BiEncoder
from attnmatch.tasks import ClassificationTask, RankingTask, RegressionTask, Task
from tests.tiny_transformer import write_tiny_encoder

RANKING = RankingTask(name="toy-ranking")
BINARY = ClassificationTask(name="toy-binary", num_classes=2, class_names=("no", "yes"))
STS = RegressionTask(name="toy-sts", min_score=0, max_score=5)


def _ranking_split(queries: int, candidates: int) -> list[Example]:
    """`queries` questions with one relevant candidate among `candidates` each; the relevant
    one shares the question's words."""
    out = []
    for q in range(queries):
        for c in range(candidates):
            right = f"apple w{q} pear" if c == 0 else f"stone x{q} y{c}"
            out.append(Example(f"apple w{q} pear ?", right, int(c == 0), group=f"q{q}"))
    return out


def test_random_map_with_one_relevant_of_n_is_the_harmonic_mean() -> None:
    """E[AP] = E[1 / rank] = H_N / N for one relevant candidate at a uniform rank."""
    n = 5
    floors = compute_floors(_ranking_split(100, n), RANKING, lexical=(), encoders=())
    expected = sum(1 / k for k in range(1, n + 1)) / n  # 0.4567
    assert list(floors) == ["random"]
    assert floors["random"]["map"] == pytest.approx(expected, abs=0.02)
    assert floors["random"]["mrr"] == floors["random"]["map"]
    assert floors["random"]["num_queries"] == 100 and isinstance(
        floors["random"]["num_queries"], int
    )
    again = compute_floors(_ranking_split(100, n), RANKING, lexical=(), encoders=())
    assert again == floors  # seeded


def test_lexical_ranking_floors_are_the_lexical_matchers_metrics() -> None:
    examples = _ranking_split(6, 4)
    floors = compute_floors(examples, RANKING, lexical=("overlap", "bm25"), encoders=())
    assert list(floors) == ["random", "overlap", "bm25"]
    for kind in ("overlap", "bm25"):
        report = Matcher.from_lexical(kind).evaluate_examples(examples, RANKING)
        assert floors[kind] == report.metrics and floors[kind]["map"] == 1.0


PARAPHRASES = [
    Example("a man plays guitar", "a man plays a guitar", 1),
    Example("the dog runs home", "the dog runs", 1),
    Example("a cat sleeps", "stocks fell sharply", 0),
    Example("rain is coming", "the band played", 0),
    Example("kids eat lunch", "kids eat their lunch", 1),
    Example("the sun is hot", "a cold winter night", 0),
    Example("birds fly south", "birds fly south now", 1),
]


def test_majority_class_and_calibrated_lexical_floors() -> None:
    fit = PARAPHRASES + [Example("one more", "pair", 1)]  # 5 of 8 are "yes"
    test = PARAPHRASES[:4]  # 2 "yes", 2 "no"
    floors = compute_floors(test, BINARY, fit_examples=fit, encoders=())
    assert floors["random"] == {"accuracy": 0.5, "f1": pytest.approx(2 / 3)}
    calibrated = Matcher.from_lexical(
        "overlap", task=Task.of(BINARY), calibration=fit
    ).evaluate_examples(test, BINARY)
    assert floors["overlap"] == calibrated.metrics and floors["overlap"]["accuracy"] == 1.0
    assert "bm25" in floors
    majority_no = compute_floors(test, BINARY, fit_examples=PARAPHRASES[2:4], encoders=())
    assert majority_no["random"] == {"accuracy": 0.5, "f1": 0.0}


def test_without_fitting_pairs_or_with_many_classes_floors_are_left_out() -> None:
    assert compute_floors(PARAPHRASES, BINARY, encoders=()) == {}
    three = ClassificationTask(name="toy-3", num_classes=3)
    fit = [Example("a", "b", i % 3) for i in range(7)]
    floors = compute_floors(PARAPHRASES[:3], three, fit_examples=fit, encoders=())
    assert list(floors) == ["random"]  # one similarity cannot separate 3 classes


def test_regression_floors() -> None:
    fit = [Example(e.left, e.right, 4.0 * e.label + 0.5) for e in PARAPHRASES]
    test = fit[:4]
    gold = np.array([e.label for e in test])
    mean = np.mean([e.label for e in fit])
    floors = compute_floors(test, STS, fit_examples=fit, encoders=())
    assert floors["random"]["pearson"] == 0.0 and floors["random"]["spearman"] == 0.0
    assert floors["random"]["mse"] == pytest.approx(float(np.mean((mean - gold) ** 2)), rel=1e-5)
    assert floors["overlap"]["pearson"] > 0.9 and "bm25" in floors
    unfitted = compute_floors(test, STS, encoders=())  # overlap's [0, 1] onto [0, 5]; no bm25
    assert list(unfitted) == ["overlap"]


def test_floors_skip_an_encoder_that_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def missing(source: str, **_: object) -> Matcher:
        calls.append(source)
        if source == "gone":
            raise ImportError("No module named 'transformers'")
        raise FileNotFoundError(f"encoder {source!r} is not installed")

    monkeypatch.setattr(floors_module.Matcher, "from_encoder", staticmethod(missing))
    floors = compute_floors(_ranking_split(3, 3), RANKING, encoders=("minilm-l6", "gone"))
    assert calls == ["minilm-l6", "gone"] and list(floors) == ["random", "overlap", "bm25"]
    calls.clear()
    compute_floors(_ranking_split(3, 3), RANKING, encoders=("minilm-l6",), max_encoder_pairs=8)
    assert calls == []  # 9 pairs > 8: the encoder is not even built


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny-bert")


def test_encoder_floor_embeds_each_text_once_and_matches_the_matcher(encoder_dir: Path) -> None:
    source = str(encoder_dir)
    matcher = Matcher.from_encoder(source)
    pairs = [("how are glacier caves formed ?", r) for r in ("a cave is in the ice", "war", "")]
    pairs.append(("the man runs", "a dog runs"))
    np.testing.assert_allclose(encoder_cosines(matcher, pairs), matcher.score(pairs), atol=1e-5)
    examples = _ranking_split(3, 3)
    floors = compute_floors(examples, RANKING, lexical=(), encoders=(source,))
    expected = matcher.evaluate_examples(examples, RANKING).metrics
    assert floors[f"{source} zero-shot"] == pytest.approx(expected)
    fit = PARAPHRASES
    binary = compute_floors(PARAPHRASES[:4], BINARY, fit_examples=fit, encoders=(source,))
    calibrated = Matcher.from_encoder(source, task=Task.of(BINARY), calibration=fit)
    assert binary[f"{source} zero-shot"] == calibrated.evaluate_examples(fit[:4], BINARY).metrics


def test_format_floors() -> None:
    floors = {
        "random": {"map": 0.0951, "mrr": 0.1},
        "bm25": {"map": 0.4554},
        "minilm-l6 zero-shot": {"map": 0.8333},
    }
    assert format_floors(floors, "map") == [
        "floors (test map): random .095  bm25 .455  minilm-l6 zero-shot .833"
    ]
    assert format_floors({"random": {"mse": 2.3344}}, "mse", where="dev") == [
        "floors (dev mse): random 2.334"
    ]
    assert format_floors({"random": {"pearson": -0.0123}}, "pearson") == [
        "floors (test pearson): random -.012"
    ]
    assert format_floors({}, "map") == []


def test_rank_encodes_a_candidate_set_once_and_scores_as_pairs_do(
    encoder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matcher = Matcher.from_encoder(str(encoder_dir))
    candidates = ["a cave is in the ice", "war", "the man runs", "a dog runs"]
    queries = ["how are glacier caves formed ?", "who runs ?"]
    expected = [_forward_scores(matcher, [(q, c) for c in candidates]) for q in queries]
    embedded: list[int] = []
    real_embed = Matcher.embed

    def counting(self: Matcher, texts: list[str]) -> torch.Tensor:
        embedded.append(len(texts))
        return real_embed(self, texts)

    monkeypatch.setattr(Matcher, "embed", counting)
    for query, want in zip(queries, expected, strict=True):
        got = {r.index: r.score for r in matcher.rank(query, candidates)}
        np.testing.assert_allclose([got[i] for i in range(len(candidates))], want, atol=1e-5)
    assert embedded == [4, 1, 1]  # the candidates once, then each query alone
    with torch.no_grad():  # new weights: the kept vectors are stale and computed again
        next(matcher.model.parameters()).add_(0.01)
    matcher.rank(queries[0], candidates)
    assert embedded[-2:] == [4, 1]
    matcher.rank(queries[0], candidates[:2])  # another set
    assert embedded[-2:] == [2, 1]


def _forward_scores(matcher: Matcher, pairs: list[tuple[str, str]]) -> np.ndarray:
    """Scores through the model's pair forward (`Matcher.predict`), not sentence vectors."""
    data = matcher.encode([Example(left=a, right=b, label=0) for a, b in pairs])
    return matcher.task.decode(matcher.predict(data)).scores


def test_bi_encoder_scores_encode_each_distinct_text_once_as_the_forward_does(
    encoder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matcher = Matcher.from_encoder(str(encoder_dir))
    answers = ["a cave is in the ice", "war", "", "the man runs", "a dog runs"] * 3
    pairs = [(q, a) for q in ("how are caves formed ?", "who runs ?") for a in answers]
    expected = _forward_scores(matcher, pairs)
    rows: list[int] = []
    real_embed = BiEncoder.embed

    def counting(self: BiEncoder, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        rows.append(ids.shape[0])
        return real_embed(self, ids, mask)

    monkeypatch.setattr(BiEncoder, "embed", counting)
    np.testing.assert_allclose(matcher.score(pairs), expected, atol=1e-5)
    assert sum(rows) == 2 + 5  # two questions and five distinct answers, of 30 pairs


def test_a_zero_shot_floor_is_kept_as_an_encoder_folder(encoder_dir: Path, tmp_path: Path) -> None:
    """`training.keep.floor_model`: the encoder's cosine, calibrated on dev (a ranking model's
    Platt scaling), saved as an encoder folder that loads and scores as the zero-shot matcher."""
    from types import SimpleNamespace

    from attnmatch.data.encoding import encode_examples
    from attnmatch.training.keep import floor_model

    source = str(encoder_dir)
    dev = _ranking_split(4, 3)
    split = SimpleNamespace(
        examples=dev,
        data=encode_examples(dev, lambda texts: [np.zeros(0, dtype=np.int64) for _ in texts]),
        protocol=RANKING,
    )
    exp = SimpleNamespace(
        matcher=SimpleNamespace(task=RANKING),
        fit_examples=[],
        dev=split,
        config=SimpleNamespace(train=SimpleNamespace(select_metric=None)),
    )
    kept = floor_model(exp, f"{source} zero-shot")  # type: ignore[arg-type]
    assert kept.model_type == "bi_encoder" and kept.task.calibration is not None
    saved = Matcher.load(kept.save(tmp_path / "model"))
    pairs = [("how are glacier caves formed ?", "a cave is in the ice"), ("war", "peace")]
    np.testing.assert_allclose(
        saved.score(pairs), Matcher.from_encoder(source).score(pairs), atol=1e-6
    )
    assert saved.predict_pairs(pairs).relevance is not None  # probabilities, as trained models'
    with pytest.raises(ValueError, match="not a floor"):
        floor_model(exp, "random")  # type: ignore[arg-type]
