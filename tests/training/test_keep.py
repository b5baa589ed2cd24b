"""RUN/model holds the best on dev of the trained model and the floors (`training.keep`).

- A run whose trained model loses to word overlap on dev (a learning rate too small to learn,
  on answers that share the questions' words) keeps an overlap model folder in RUN/model, which
  `rank`, `score`, `evaluate`, `serve` (the app) and `load_matcher` (what `distill --teacher`
  reads) load; the trained model is in RUN/trained-model; result.json and metrics.json say so.
- `--keep-trained` keeps the trained model there, and says that the floor beats it.
- A run whose trained model beats every floor (the answers are marked by a word the questions
  never hold, and share no word with them) keeps it, with no RUN/trained-model.
- A resumed run puts the trained model back, trains on, and chooses again.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from rich.console import Console

from attnmatch.matcher import Matcher, load_matcher
from attnmatch.serving import create_app
from attnmatch.training import ExperimentConfig, train
from tests.hostile._util import run_cli
from tests.training.test_trainer import FIXTURE, tiny_experiment

QUERY = "what engine tiger ?"
CANDIDATES = ["forest in on as it", "was at engine for a tiger", "music and pencil"]


def _unlearned(**overrides: object) -> ExperimentConfig:
    """2 epochs at a learning rate too small to learn: word overlap (dev MAP 1.0) beats it."""
    return tiny_experiment(
        **{"epochs": 2, "lr": 1e-9, "floors": "lexical", "keep": "best"} | overrides
    )


@pytest.fixture(scope="module")
def floor_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("keep") / "run"
    train(_unlearned(), run, progress=False)
    return run


def test_a_floor_that_beats_the_trained_model_on_dev_is_kept(floor_run: Path) -> None:
    kept = Matcher.load(floor_run / "model")
    assert kept.model_type == "overlap" and kept.inputs is None
    trained = Matcher.load(floor_run / "trained-model")
    assert trained.model_type == "mvlstm"
    result = json.loads((floor_run / "result.json").read_text(encoding="utf-8"))
    record = result["kept"]
    assert record["model"] == "overlap" and record["metric"] == "map"
    assert record["dev"]["map"] == pytest.approx(1.0)
    assert record["trained_dev"] < 1.0
    assert record["line"].startswith(f"kept: the overlap floor in {floor_run / 'model'}: dev map ")
    assert result["metrics"]["kept"]["model"] == "overlap"
    # The run's dev and test stay the trained model's; the floor's folder has its own.
    assert result["dev"]["map"] == pytest.approx(record["trained_dev"])
    assert trained.metrics["kept"]["model"] == "overlap"
    assert kept.metrics["floor"] == "overlap"
    assert kept.metrics["test"] == pytest.approx(result["floors"]["test"]["overlap"])
    assert "overlap" in (floor_run / "model" / "README.md").read_text(encoding="utf-8")
    assert not (floor_run / "floor-model").exists()


def test_the_kept_floor_ranks_scores_evaluates_and_serves(
    floor_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = floor_run / "model"
    overlap = Matcher.from_lexical("overlap")
    expected = [r.index for r in overlap.rank(QUERY, CANDIDATES)]
    assert [r.index for r in Matcher.load(model).rank(QUERY, CANDIDATES)] == expected
    (candidates := tmp_path / "candidates.txt").write_text("\n".join(CANDIDATES) + "\n")
    ranked = run_cli(["rank", model, "--query", QUERY, "--candidates", candidates], capsys)
    assert ranked.code == 0, ranked.stderr
    assert ranked.stdout.index(CANDIDATES[1]) < ranked.stdout.index(CANDIDATES[0])
    (pairs := tmp_path / "pairs.tsv").write_text("".join(f"{QUERY}\t{c}\n" for c in CANDIDATES))
    scored = run_cli(["score", model, pairs, "--format", "tsv", "-o", tmp_path / "s.tsv"], capsys)
    assert scored.code == 0, scored.stderr
    lines = (tmp_path / "s.tsv").read_text().splitlines()
    assert lines[0].split("\t")[-1] == "score"
    scores = [float(line.split("\t")[-1]) for line in lines[1:]]
    assert int(np.argmax(scores)) == 1
    evaluated = run_cli(["evaluate", model, "--dataset", f"pairs:{FIXTURE}:test"], capsys)
    assert evaluated.code == 0 and "1.0000" in evaluated.stdout, evaluated.stderr
    with TestClient(create_app({"run": load_matcher(str(model))})) as client:
        listed = client.get("/v1/models").json()["models"][0]
        assert listed["type"] == "overlap" and listed["inputs"] is None
        got = client.post("/v1/rank", json={"query": QUERY, "candidates": CANDIDATES}).json()
        assert [r["index"] for r in got["results"]] == expected


def test_keep_trained_keeps_the_trained_model_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "exp.toml"
    config.write_text(
        'model = "mvlstm"\nmodel_overrides = { hidden_size = 8, k = 10 }\n'
        f'[data]\ndataset = "pairs"\ndata_dir = "{FIXTURE}"\n'
        '[inputs]\nkind = "word_vectors"\nvectors = "random"\ndim = 8\n'
        "[train]\nepochs = 1\nbatch_size = 4\nnum_negatives = 2\nlr = 1e-9\n"
        'floors = "lexical"\n'
    )
    run = tmp_path / "run"
    outcome = run_cli(["train", config, "-o", run, "--no-progress", "--keep-trained"], capsys)
    assert outcome.code == 0, outcome.stderr
    assert Matcher.load(run / "model").model_type == "mvlstm"
    assert not (run / "trained-model").exists()
    assert "kept: the trained model in " in outcome.stderr
    assert (
        '(train.keep = "trained"), though the overlap floor beats it on dev map' in outcome.stderr
    )
    assert "does not beat the overlap floor" in outcome.stderr
    kept = json.loads((run / "result.json").read_text())["kept"]
    assert kept["model"] == "trained" and kept["best_floor"] == "overlap"


def _marked(folder: Path) -> Path:
    """Ranking pairs whose answer is the one starting with "zeta", a word no question holds;
    the other candidates repeat the question's words: overlap and BM25 rank them first."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    folder.mkdir()
    for split, n in (("train", 24), ("dev", 8), ("test", 8)):
        rows = ["group\tleft\tright\tlabel"]
        for q in range(n):
            a, b = rng.sample(words, 2)
            left = f"what {a} {b} ?"
            rows.append(f"{split}-q{q}\t{left}\tzeta {' '.join(rng.choices(words, k=4))}\t1")
            for _ in range(3):
                rows.append(f"{split}-q{q}\t{left}\t{a} {b} {' '.join(rng.choices(words, k=3))}\t0")
        (folder / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return folder


def test_a_trained_model_that_beats_every_floor_is_kept(tmp_path: Path) -> None:
    config = tiny_experiment(epochs=4, floors="lexical", keep="best").with_overrides(
        {"data": {"data_dir": str(_marked(tmp_path / "marked"))}}
    )
    console = Console(record=True, width=400)
    result = train(config, tmp_path / "run", progress=False, console=console)
    assert result.kept is not None and result.kept["model"] == "trained"
    assert result.kept["trained_dev"] > result.kept["best_floor_dev"]
    assert Matcher.load(result.model_dir).model_type == "mvlstm"
    assert not (tmp_path / "run" / "trained-model").exists()
    text = console.export_text()
    assert f"kept: the trained model in {result.model_dir} (dev map " in text
    assert "; the best floor, " in text


def test_a_resumed_run_puts_the_trained_model_back_and_chooses_again(tmp_path: Path) -> None:
    run = tmp_path / "run"
    train(_unlearned(epochs=1), run, progress=False)
    assert Matcher.load(run / "model").model_type == "overlap"
    result = train(_unlearned(epochs=2), run, resume=True, progress=False)
    assert [h["epoch"] for h in result.history] == [1, 2]
    assert result.kept is not None and result.kept["model"] == "overlap"
    assert Matcher.load(run / "model").model_type == "overlap"
    assert Matcher.load(run / "trained-model").metrics["best_epoch"] == result.best_epoch
    again = train(_unlearned(epochs=2), run, resume=True, progress=False)  # finished: reused
    assert again.kept == result.kept
