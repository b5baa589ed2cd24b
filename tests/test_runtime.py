"""`attnmatch.runtime`: an exported directory served, ranked and scored without torch, on tiny
exports of each form and task kind: the same numbers as `Matcher.load` of the same directory
(1e-6), the same refusals of changed files, and `attnmatch rank`, `score` and the service's app
run in a process where importing torch fails."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from attnmatch import Matcher, runtime
from attnmatch.calibration import PlattScaling
from attnmatch.export import export_onnx
from attnmatch.tasks import ClassificationTask, RankingTask, RegressionTask, Task
from tests.models.conftest import tiny_inputs, tiny_model

PAIRS = [
    ("w1 w2 w3", "w4 w5"),
    ("w1 w2 w3", "w1 w2"),
    ("w6", "w7 w8 w9 w3 w2 w1"),
    ("how are glacier caves formed ?", "a glacier cave is a cave formed in the ice"),
    ("w2", "w2"),
]
SRC = Path(__file__).resolve().parents[1] / "src"

# A process in which `import torch` fails, as on an install of attnmatch[serve-onnx]; it runs
# the code given after it and says at the end whether torch was imported.
BLOCKER = textwrap.dedent(
    """
    import sys

    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTorch())
    """
)


def _matcher(name: str, task: Task, num_outputs: int = 1) -> Matcher:
    model = tiny_model(name, num_outputs=num_outputs)
    return Matcher(model=model.eval(), model_type=name, inputs=tiny_inputs(model), task=task)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A towers export (a bi-encoder on sub-words, calibrated), pairs exports (IARNN on word
    vectors) of each task kind (classification with a threshold, 3 classes, regression over
    score levels) and a packed export (a cross-encoder, its pairs packed in numpy)."""
    out = tmp_path_factory.mktemp("exports")
    three = ClassificationTask(class_names=("contradiction", "neutral", "entailment"))
    matchers = {
        "bi": _matcher("bi_encoder", RankingTask(calibration=PlattScaling(scale=2.0, shift=-0.5))),
        "pairs-binary": _matcher(
            "iarnn", ClassificationTask(class_names=("no", "yes"), threshold=0.3), 2
        ),
        "pairs-3": _matcher("iarnn", three, 3),
        "pairs-levels": _matcher("iarnn", RegressionTask(min_score=0, max_score=5), 6),
        "packed": _matcher("cross_encoder", RankingTask()),
    }
    return {name: export_onnx(m, out / name) for name, m in matchers.items()}


@pytest.mark.parametrize("name", ["bi", "pairs-binary", "pairs-3", "pairs-levels", "packed"])
def test_the_same_numbers_as_the_matcher(exported: dict[str, Path], name: str) -> None:
    torch_side, onnx_only = Matcher.load(exported[name]), runtime.load(exported[name])
    assert onnx_only.graphs.form == {"bi": "towers", "packed": "packed"}.get(name, "pairs")
    want, got = torch_side.predict_pairs(PAIRS), onnx_only.predict_pairs(PAIRS)
    np.testing.assert_allclose(got.scores, want.scores, rtol=0, atol=1e-6)
    assert got.scores.dtype == np.float32 and got.labels == want.labels
    assert (got.relevance is None) == (want.relevance is None)
    if want.relevance is not None:
        np.testing.assert_allclose(got.relevance, want.relevance, rtol=0, atol=1e-6)
    if want.probabilities is not None:
        np.testing.assert_allclose(got.probabilities, want.probabilities, rtol=0, atol=1e-6)
    query, candidates = PAIRS[0][0], [right for _, right in PAIRS]
    assert onnx_only.rank(query, candidates, top_k=3) == torch_side.rank(query, candidates, 3)
    np.testing.assert_allclose(onnx_only.score(iter(PAIRS)), torch_side.score(PAIRS), atol=1e-6)
    if torch_side.task.has_labels:
        assert onnx_only.classify(PAIRS) == torch_side.classify(PAIRS)


def test_each_task_kind_decodes_as_it_should(exported: dict[str, Path]) -> None:
    """Not only equal to torch: the calibration, the threshold and the score levels apply."""
    bi = runtime.load(exported["bi"])
    got = bi.predict_pairs(PAIRS)
    assert bi.task.relevance_scale == "probability"
    np.testing.assert_allclose(got.relevance, 1 / (1 + np.exp(-(2.0 * got.scores - 0.5))))
    binary = runtime.load(exported["pairs-binary"])
    outputs = binary.outputs(PAIRS)  # (N, 2) logits
    margin = outputs[:, 1] - outputs[:, 0]
    assert binary.classify(PAIRS) == ["yes" if m > 0.3 else "no" for m in margin]
    levels = runtime.load(exported["pairs-levels"]).predict_pairs(PAIRS).scores
    assert ((levels >= 0) & (levels <= 5)).all()


def test_refusals_are_one_line(exported: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    bi = runtime.load(exported["bi"])
    with pytest.raises(ValueError, match="needs a classification model"):
        bi.classify(PAIRS)
    with pytest.raises(ValueError, match="no attention maps"):
        bi.explain("w1", "w2")
    with pytest.raises(ValueError, match="the query is empty"):
        bi.rank(" ", ["w1"])
    with pytest.raises(ValueError, match="batch_size"):
        runtime.load(exported["bi"], batch_size=0)
    copy = Path(shutil.copytree(exported["pairs-3"], tmp_path / "copy"))
    (copy / "vocab.json").write_text((copy / "vocab.json").read_text() + " ")
    with pytest.raises(ValueError, match=r"vocab\.json: .* bytes, onnx\.json records"):
        runtime.load(copy)
    (copy / "onnx.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"onnx\.json"):
        runtime.load(copy)


def _blocked(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`code` run after `BLOCKER` in a fresh interpreter (the repository's sources first)."""
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )


CLI = """
from attnmatch.cli import main

sys.argv = ["attnmatch", *sys.argv[1:]]
try:
    main()
finally:
    print("torch imported:", "torch" in sys.modules, file=sys.stderr)
"""


def test_rank_and_score_run_without_torch(exported: dict[str, Path], tmp_path: Path) -> None:
    path = exported["pairs-binary"]
    candidates = tmp_path / "candidates.txt"
    candidates.write_text("".join(right + "\n" for _, right in PAIRS))
    done = _blocked(CLI, "rank", str(path), "-q", PAIRS[0][0], "-c", str(candidates), "--json")
    assert done.returncode == 0 and "torch imported: False" in done.stderr, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    want = Matcher.load(path).rank(PAIRS[0][0], [right for _, right in PAIRS])
    assert [r["index"] for r in rows] == [r.index for r in want]
    np.testing.assert_allclose([r["score"] for r in rows], [r.score for r in want], atol=1e-6)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS))
    done = _blocked(CLI, "score", str(path), str(pairs), "--format", "tsv")
    assert done.returncode == 0 and "torch imported: False" in done.stderr, done.stderr
    scores = [float(x) for x in done.stdout.split()]
    np.testing.assert_allclose(scores, Matcher.load(path).score(PAIRS), atol=1e-5)


OWN_DATA = Path(__file__).resolve().parents[1] / "examples" / "own_data"


@pytest.mark.parametrize(("name", "folder"), [("bi", "faq"), ("pairs-binary", "paraphrase")])
def test_evaluate_gives_the_matchers_metrics_without_torch(
    exported: dict[str, Path], name: str, folder: str
) -> None:
    dataset = f"pairs:{OWN_DATA / folder}:test"
    want = Matcher.load(exported[name]).evaluate(dataset).metrics
    got = runtime.load(exported[name]).evaluate(dataset).metrics
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[k] for k in want], list(want.values()), atol=1e-6)
    done = _blocked(CLI, "evaluate", str(exported[name]), "--dataset", dataset, "--json")
    assert done.returncode == 0 and "torch imported: False" in done.stderr, done.stderr
    printed = json.loads(done.stdout)["metrics"]
    np.testing.assert_allclose([printed[k] for k in want], list(want.values()), atol=1e-6)


def test_commands_that_need_torch_say_so(exported: dict[str, Path]) -> None:
    done = _blocked(CLI, "train", "--dataset", "wikiqa")
    assert done.returncode == 2
    assert "error: attnmatch train needs torch: pip install 'attnmatch[torch]'" in done.stderr
    done = _blocked(CLI, "rank", str(exported["bi"]), "-q", "w1", "--backend", "torch")
    assert done.returncode == 2 and "is an exported directory" in done.stderr
    done = _blocked(CLI, "rank", str(exported["bi"]), "-q", "w1", "--device", "cuda")
    assert done.returncode == 2 and "CPU in fp32" in done.stderr
    assert "torch imported: False" in done.stderr


def test_the_service_runs_without_torch(exported: dict[str, Path]) -> None:
    code = """
    import json

    from fastapi.testclient import TestClient

    from attnmatch.serving import create_app
    from attnmatch.serving.server import load_models

    specs = [("ranker", sys.argv[1]), ("nli", sys.argv[2])]
    answers = {}
    with TestClient(create_app(load_models(specs, None, "fp32"))) as client:
        body = {"query": "w1 w2 w3", "candidates": ["w4 w5", "w1 w2", "w6"]}
        answers["rank"] = client.post("/v1/rank", json=body).json()
        answers["rerank"] = client.post("/rerank", json={"query": "w1", "texts": ["w2", "w6"]}).json()
        pairs = [["w1 w2", "w3"], ["w6", "w6"]]
        answers["classify"] = client.post("/v1/classify", json={"model": "nli", "pairs": pairs}).json()
        answers["health"] = client.get("/healthz").json()
    print(json.dumps(answers))
    print("torch imported:", "torch" in sys.modules, file=sys.stderr)
    """
    done = _blocked(code, str(exported["bi"]), str(exported["pairs-3"]))
    assert done.returncode == 0 and "torch imported: False" in done.stderr, done.stderr
    answers = json.loads(done.stdout)
    want = Matcher.load(exported["bi"]).rank("w1 w2 w3", ["w4 w5", "w1 w2", "w6"])
    assert [r["index"] for r in answers["rank"]["results"]] == [r.index for r in want]
    relevance = Matcher.load(exported["bi"]).predict_pairs([("w1", "w2"), ("w1", "w6")]).relevance
    assert sorted(r["score"] for r in answers["rerank"]) == pytest.approx(sorted(relevance))
    nli = Matcher.load(exported["pairs-3"]).classify([("w1 w2", "w3"), ("w6", "w6")])
    assert answers["classify"]["labels"] == nli and answers["health"] == {"status": "ok"}


def test_a_bm25_index_serves_without_torch(exported: dict[str, Path], tmp_path: Path) -> None:
    """`serve --index` of a BM25 index with an exported reranker: retrieval is bm25s and
    numpy, the reranking the runtime's (a dense index still encodes queries with torch)."""
    from attnmatch.retrieval import build_index

    corpus = tmp_path / "corpus.jsonl"
    texts = ["w1 w2 w3 w4", "w4 w5", "w1 w2", "w6 w7", "w2 w9 w1"]
    corpus.write_text(
        "".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    build_index(corpus, tmp_path / "index")
    code = """
    import json

    from fastapi.testclient import TestClient

    from attnmatch.retrieval.search import load_index
    from attnmatch.serving import create_app
    from attnmatch.serving.server import load_models

    app = create_app(load_models([("ranker", sys.argv[1])], None, "fp32"), index=load_index(sys.argv[2]))
    with TestClient(app) as client:
        print(json.dumps(client.post("/v1/search", json={"query": "w1 w2", "top_k": 3}).json()))
    print("torch imported:", "torch" in sys.modules, file=sys.stderr)
    """
    done = _blocked(code, str(exported["bi"]), str(tmp_path / "index"))
    assert done.returncode == 0 and "torch imported: False" in done.stderr, done.stderr
    answer = json.loads(done.stdout)
    assert answer["first_stage"] == "bm25" and len(answer["results"]) == 3
    found = [r["text"] for r in answer["results"]]
    scores = Matcher.load(exported["bi"]).predict_pairs([("w1 w2", t) for t in found])
    assert [r["score"] for r in answer["results"]] == pytest.approx(
        sorted(scores.scores, reverse=True), abs=1e-6
    )
