"""What `/rerank`'s score means, per task: a ranking model's probability of relevance only where
it carries a calibration fitted on dev (never a bare sigmoid of an unbounded score), P(last
class) for a classifier, the score range mapped onto [0, 1] for a regression model; the raw
score with `raw_scores`, and for a ranking model without calibration."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from attnmatch.calibration import PlattScaling
from attnmatch.matcher import Matcher
from attnmatch.serving import create_app
from attnmatch.tasks import ClassificationTask, RankingTask, RegressionTask, Task
from attnmatch.training import ExperimentConfig, train
from tests.models.conftest import tiny_inputs, tiny_model

FIXTURES = Path(__file__).parents[1] / "fixtures"
QUERY = "w1 w2 w3"
TEXTS = ["w4 w5", "w1 w2", "w7 w8 w9 w3", "w6"]


def _matcher(task: Task, num_outputs: int = 1) -> Matcher:
    model = tiny_model("cbow_mlp", num_outputs=num_outputs)
    return Matcher(model=model.eval(), model_type="cbow_mlp", inputs=tiny_inputs(model), task=task)


def _rerank(matcher: Matcher, raw_scores: bool = False) -> list[float]:
    """/rerank's scores in input order."""
    with TestClient(create_app({"m": matcher})) as client:
        body = {"query": QUERY, "texts": TEXTS, "raw_scores": raw_scores}
        rows = client.post("/rerank", json=body).json()
    return [row["score"] for row in sorted(rows, key=lambda row: row["index"])]


def test_a_calibrated_ranker_returns_its_probability() -> None:
    platt = PlattScaling(scale=1.5, shift=-0.5)
    matcher = _matcher(RankingTask(calibration=platt))
    scores = matcher.score([(QUERY, t) for t in TEXTS])
    np.testing.assert_allclose(_rerank(matcher), platt.probability(scores), rtol=1e-6)
    np.testing.assert_allclose(_rerank(matcher, raw_scores=True), scores, rtol=1e-6)


def test_a_ranker_without_calibration_returns_its_raw_score() -> None:
    matcher = _matcher(RankingTask())
    scores = matcher.score([(QUERY, t) for t in TEXTS])
    np.testing.assert_allclose(_rerank(matcher), scores, rtol=1e-6)
    np.testing.assert_allclose(_rerank(matcher, raw_scores=True), scores, rtol=1e-6)


def test_a_classifier_returns_p_of_the_last_class() -> None:
    matcher = _matcher(ClassificationTask(class_names=("no", "yes")), num_outputs=2)
    scores = matcher.score([(QUERY, t) for t in TEXTS])  # log P(yes)
    np.testing.assert_allclose(_rerank(matcher), np.exp(scores), rtol=1e-5)


def test_a_regression_model_returns_its_range_mapped_onto_0_1() -> None:
    matcher = _matcher(RegressionTask(min_score=-1, max_score=1))
    scores = matcher.score([(QUERY, t) for t in TEXTS])
    np.testing.assert_allclose(_rerank(matcher), np.clip((scores + 1) / 2, 0, 1), rtol=1e-5)


# ------------------------------------------------------------------ a trained ranking model


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny MV-LSTM ranker trained on the pairs fixture, selected (and calibrated) on its dev
    split: 10 queries of 4 candidates, one relevant each."""
    config = ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 8, "k": 10},
            "data": {"dataset": "pairs", "data_dir": str(FIXTURES / "pairs_tiny")},
            "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 8},
            "train": {"epochs": 6, "batch_size": 8, "lr": 0.01, "patience": 0, "floors": "none"},
        }
    )
    run = tmp_path_factory.mktemp("runs") / "run"
    return train(config, run, progress=False).model_dir


def _dev_query() -> tuple[str, list[str], list[float]]:
    lines = (FIXTURES / "pairs_tiny" / "dev.tsv").read_text().splitlines()
    rows = [line.split("\t") for line in lines[1:]]  # group, left, right, label
    group = [r for r in rows if r[0] == rows[0][0]]
    return group[0][1], [r[2] for r in group], [float(r[3]) for r in group]


ClientOf = Callable[[Matcher], TestClient]


@pytest.fixture
def client_of() -> Iterator[ClientOf]:
    """Opens a test client of a one-model app; every one is closed after the test."""
    clients: list[TestClient] = []

    def open_client(matcher: Matcher) -> TestClient:
        client = TestClient(create_app({"m": matcher}))
        clients.append(client.__enter__())
        return client

    yield open_client
    for client in clients:
        client.__exit__(None, None, None)


def test_training_calibrates_a_ranker_on_dev(trained: Path, client_of: ClientOf) -> None:
    task = json.loads((trained / "config.json").read_text())["task"]
    assert task["kind"] == "ranking" and set(task["calibration"]) == {"scale", "shift"}
    matcher = Matcher.load(trained)
    assert isinstance(matcher.task, RankingTask) and matcher.task.calibration is not None
    query, texts, labels = _dev_query()
    client = client_of(matcher)
    rows = client.post("/rerank", json={"query": query, "texts": texts}).json()
    relevance = {row["index"]: row["score"] for row in rows}
    irrelevant = [relevance[i] for i, label in enumerate(labels) if label == 0]
    # One relevant candidate in four: a probability, not sigmoid(score), keeps them under .5.
    assert max(irrelevant) < 0.5
    assert all(0.0 <= p <= 1.0 for p in relevance.values())
    ranked = matcher.rank(query, texts)
    assert [row["index"] for row in rows] == [r.index for r in ranked]
    models = client.get("/v1/models").json()["models"]
    assert models[0]["relevance"] == "probability"


def test_a_model_without_calibration_still_loads_and_serves(
    trained: Path, tmp_path: Path, client_of: ClientOf
) -> None:
    old = tmp_path / "old"
    old.mkdir()
    for file in trained.iterdir():
        (old / file.name).write_bytes(file.read_bytes())
    header = json.loads((old / "config.json").read_text())
    header["task"] = {"kind": "ranking"}  # as saved before calibration existed
    (old / "config.json").write_text(json.dumps(header))
    matcher = Matcher.load(old)
    assert matcher.task == RankingTask()
    query, texts, _ = _dev_query()
    client = client_of(matcher)
    rows = client.post("/rerank", json={"query": query, "texts": texts}).json()
    want = matcher.rank(query, texts)
    assert [row["index"] for row in rows] == [r.index for r in want]
    np.testing.assert_allclose([row["score"] for row in rows], [r.score for r in want], rtol=1e-5)
    assert client.get("/v1/models").json()["models"][0]["relevance"] == "score"
