"""The HTTP API of `attnmatch serve` on tiny random models: every endpoint, the TEI `/rerank`
shape as a TEI client sends and reads it, scores equal to `Matcher.rank`'s, the limits (413,
422, 404, 400, never a 5xx for client input), `/metrics` and the access log."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from attnmatch.cli.serve import _model_specs
from attnmatch.matcher import Matcher
from attnmatch.serving import ServeSettings, create_app
from attnmatch.tasks import Task
from tests.hostile._util import assert_clear_error, run_cli
from tests.models.conftest import tiny_inputs, tiny_model

QUERY = "w1 w2 w3"
CANDIDATES = ["w4 w5", "w1 w2", "w7 w8 w9 w3", "w6", "w2 w3 w1 w5"]


def _matcher(name: str, task: Task, num_outputs: int = 1) -> Matcher:
    model = tiny_model(name, num_outputs=num_outputs)
    return Matcher(
        model=model.eval(), model_type=name, inputs=tiny_inputs(model), task=task, batch_size=4
    )


def tiny_bi_encoder() -> Matcher:
    """The ranker the ONNX variants of this suite export: a tiny bi-encoder."""
    model = tiny_model("bi_encoder")
    return Matcher(
        model=model.eval(),
        model_type="bi_encoder",
        inputs=tiny_inputs(model),
        task=Task(kind="ranking"),
    )


def beside_torch_models(ranker: Any) -> dict[str, Any]:
    """`ranker` served as "ranker", with aMV-LSTM (attention maps) and a 3-class MV-LSTM on
    torch beside it, as the suite's `models`."""
    classes = Task(kind="classification", class_names=("contradiction", "neutral", "entailment"))
    return {
        "ranker": ranker,
        "amvlstm": _matcher("amvlstm_q", Task(kind="ranking")),
        "nli": _matcher("mvlstm", classes, num_outputs=3),
    }


def check_exported_ranker_listed(client: TestClient) -> None:
    """/v1/models of `beside_torch_models` around a bi-encoder run on ONNX Runtime."""
    rows = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    assert list(rows) == ["ranker", "amvlstm", "nli"]
    assert rows["ranker"]["type"] == "bi_encoder" and rows["ranker"]["attention"] is False
    assert rows["ranker"]["task"] == "ranking" and rows["ranker"]["relevance"] == "score"
    assert rows["amvlstm"]["attention"] is True


@pytest.fixture(scope="module")
def models() -> dict[str, Matcher]:
    """A ranker without attention maps (cbow_mlp), aMV-LSTM with them, and a 3-class model."""
    classes = Task(kind="classification", class_names=("contradiction", "neutral", "entailment"))
    return {
        "ranker": _matcher("cbow_mlp", Task(kind="ranking")),
        "amvlstm": _matcher("amvlstm_q", Task(kind="ranking")),
        "nli": _matcher("mvlstm", classes, num_outputs=3),
    }


@pytest.fixture(scope="module")
def client(models: dict[str, Matcher]) -> Iterator[TestClient]:
    settings = ServeSettings(max_candidates=8, max_text_chars=200, max_request_bytes=4000)
    with TestClient(create_app(models, settings=settings)) as c:
        yield c


def _detail(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    return detail


# ----------------------------------------------------------------- endpoints


def test_health_ready_and_page(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {
        "status": "ready",
        "models": ["ranker", "amvlstm", "nli"],
    }
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower()


def test_models_lists_type_task_inputs_and_attention(client: TestClient) -> None:
    rows = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    assert list(rows) == ["ranker", "amvlstm", "nli"]
    assert rows["ranker"] == {
        "name": "ranker",
        "type": "cbow_mlp",
        "task": "ranking",
        "relevance": "score",  # no calibration: /rerank gives the raw score
        "inputs": "word_vectors",
        "metrics": {},
        "attention": False,
    }
    assert rows["amvlstm"]["attention"] is True
    assert rows["nli"]["task"] == "classification" and rows["nli"]["relevance"] == "probability"


@pytest.mark.parametrize("name", ["ranker", "amvlstm", "nli"])
def test_rank_equals_matcher_rank(
    client: TestClient, models: dict[str, Matcher], name: str
) -> None:
    body = {"model": name, "query": QUERY, "candidates": CANDIDATES}
    got = client.post("/v1/rank", json=body).json()
    want = models[name].rank(QUERY, CANDIDATES)
    assert got["model"] == name
    assert [r["index"] for r in got["results"]] == [r.index for r in want]
    assert [r["text"] for r in got["results"]] == [r.text for r in want]
    np.testing.assert_allclose(
        [r["score"] for r in got["results"]], [r.score for r in want], rtol=1e-5, atol=1e-5
    )


def test_rank_default_model_and_top_k(client: TestClient, models: dict[str, Matcher]) -> None:
    got = client.post("/v1/rank", json={"query": QUERY, "candidates": CANDIDATES, "top_k": 2})
    assert got.json()["model"] == "ranker"
    want = models["ranker"].rank(QUERY, CANDIDATES, top_k=2)
    assert [r["index"] for r in got.json()["results"]] == [r.index for r in want]


def test_score_equals_matcher_score(client: TestClient, models: dict[str, Matcher]) -> None:
    pairs = [[QUERY, c] for c in CANDIDATES]
    got = client.post("/v1/score", json={"model": "amvlstm", "pairs": pairs}).json()
    want = models["amvlstm"].score([(QUERY, c) for c in CANDIDATES])
    assert got["model"] == "amvlstm"
    np.testing.assert_allclose(got["scores"], want, rtol=1e-5, atol=1e-5)


def test_classify_labels_and_probabilities(client: TestClient, models: dict[str, Matcher]) -> None:
    pairs = [[QUERY, c] for c in CANDIDATES]
    got = client.post("/v1/classify", json={"model": "nli", "pairs": pairs}).json()
    assert got["labels"] == models["nli"].classify([(QUERY, c) for c in CANDIDATES])
    logits = models["nli"].outputs([(QUERY, c) for c in CANDIDATES])
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    for row, want in zip(got["probabilities"], probs, strict=True):
        assert list(row) == ["contradiction", "neutral", "entailment"]
        np.testing.assert_allclose(list(row.values()), want, rtol=1e-5, atol=1e-6)
    assert all(
        max(row, key=row.__getitem__) == label
        for row, label in zip(got["probabilities"], got["labels"], strict=True)
    )


def test_classify_refuses_a_ranking_model(client: TestClient) -> None:
    detail = _detail(client.post("/v1/classify", json={"pairs": [["a", "b"]]}), 400)
    assert "classification" in detail and "'ranker'" in detail


def test_explain_gives_maps_over_the_tokens(client: TestClient, models: dict[str, Matcher]) -> None:
    body = {"model": "amvlstm", "left": "w1 w2 w3", "right": "w4 w5"}
    got = client.post("/v1/explain", json=body).json()
    assert got["left_tokens"] == ["w1", "w2", "w3"]
    assert got["right_tokens"] == ["w4", "w5"]
    want = models["amvlstm"].explain("w1 w2 w3", "w4 w5")
    assert set(got["maps"]) == set(want) - {"left_tokens", "right_tokens"}
    gate = got["maps"]["left_gate"]
    assert gate["shape"] == [3]
    np.testing.assert_allclose(gate["values"], want["left_gate"], rtol=1e-5, atol=1e-6)
    inter = got["maps"]["interaction"]
    assert inter["shape"][1:] == [3, 2]
    assert np.asarray(inter["values"]).shape == tuple(inter["shape"])


def test_explain_refuses_a_model_without_attention(client: TestClient) -> None:
    detail = _detail(client.post("/v1/explain", json={"left": "w1", "right": "w2"}), 400)
    assert "'ranker'" in detail and "attention" in detail


# ----------------------------------------------------------------- TEI /rerank


def test_rerank_as_a_tei_client(client: TestClient, models: dict[str, Matcher]) -> None:
    """The request and response of text-embeddings-inference's /rerank, byte for byte in shape."""
    response = client.post(
        "/rerank", json={"query": QUERY, "texts": CANDIDATES, "return_text": True}
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    got = response.json()
    assert isinstance(got, list) and len(got) == len(CANDIDATES)
    for row in got:
        assert set(row) == {"index", "score", "text"}
        assert isinstance(row["index"], int) and isinstance(row["score"], float)
        assert row["text"] == CANDIDATES[row["index"]]
    scores = [row["score"] for row in got]
    assert scores == sorted(scores, reverse=True)
    want = models["ranker"].rank(QUERY, CANDIDATES)
    assert [row["index"] for row in got] == [r.index for r in want]
    # raw_scores false, but the ranker has no calibration: its raw score, never a sigmoid of an
    # unbounded score (tests/serving/test_relevance.py has a calibrated one)
    np.testing.assert_allclose(scores, [r.score for r in want], rtol=1e-5, atol=1e-6)


def test_rerank_raw_scores_without_text(client: TestClient, models: dict[str, Matcher]) -> None:
    body = {
        "query": QUERY,
        "texts": CANDIDATES,
        "raw_scores": True,
        "truncate": True,
        "truncation_direction": "Right",
    }
    got = client.post("/rerank", json=body).json()
    assert all(set(row) == {"index", "score"} for row in got)
    want = models["ranker"].rank(QUERY, CANDIDATES)
    np.testing.assert_allclose([r["score"] for r in got], [r.score for r in want], atol=1e-5)


# ----------------------------------------------------------------- limits and errors


def test_unknown_model_is_404(client: TestClient) -> None:
    detail = _detail(
        client.post("/v1/rank", json={"model": "bert", "query": "q", "candidates": ["a"]}), 404
    )
    assert "'bert'" in detail and "'ranker'" in detail


def test_too_many_candidates_is_413(client: TestClient) -> None:
    detail = _detail(client.post("/v1/rank", json={"query": "q", "candidates": ["a"] * 9}), 413)
    assert detail.startswith("candidates:") and "8" in detail
    detail = _detail(client.post("/rerank", json={"query": "q", "texts": ["a"] * 9}), 413)
    assert detail.startswith("texts:")
    detail = _detail(client.post("/v1/score", json={"pairs": [["a", "b"]] * 9}), 413)
    assert detail.startswith("pairs:")


def test_too_long_text_is_413_naming_it(client: TestClient) -> None:
    long = "w1 " * 100
    detail = _detail(client.post("/v1/rank", json={"query": "q", "candidates": ["a", long]}), 413)
    assert detail.startswith("candidates[1]:") and "200" in detail
    detail = _detail(client.post("/v1/rank", json={"query": long, "candidates": ["a"]}), 413)
    assert detail.startswith("query:")
    detail = _detail(client.post("/v1/score", json={"pairs": [["a", "b"], ["c", long]]}), 413)
    assert detail.startswith("pairs[1][1]:")
    body = {"model": "amvlstm", "left": "a", "right": long}
    assert _detail(client.post("/v1/explain", json=body), 413).startswith("right:")


def test_too_large_body_is_413(client: TestClient) -> None:
    body = json.dumps({"query": "q", "candidates": ["w1 " * 60] * 30})
    response = client.post("/v1/rank", content=body, headers={"content-type": "application/json"})
    assert "4000 bytes" in _detail(response, 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield body[:2000].encode()
        yield body[2000:].encode()

    response = client.post(
        "/v1/rank", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "4000 bytes" in _detail(response, 413)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/rank", {"query": "q"}, "candidates"),
        ("/v1/rank", {"query": "q", "candidates": []}, "candidates"),
        ("/v1/rank", {"query": "q", "candidates": ["a", 3]}, "candidates[1]"),
        ("/v1/rank", {"query": 7, "candidates": ["a"]}, "query"),
        ("/v1/rank", {"query": "q", "candidates": ["a"], "top_k": 0}, "top_k"),
        ("/v1/rank", {"query": "q", "candidates": ["a"], "top_k": "2"}, "top_k"),
        ("/v1/rank", {"query": "q", "candidate": ["a"]}, "candidate"),
        ("/v1/score", {"pairs": [["a", "b", "c"]]}, "pairs[0]"),
        ("/v1/score", {"pairs": "a b"}, "pairs"),
        ("/v1/explain", {"left": "a"}, "right"),
        ("/rerank", {"query": "q", "texts": "a"}, "texts"),
        ("/rerank", {"query": "q", "texts": ["a"], "return_text": "yes"}, "return_text"),
    ],
)
def test_schema_errors_are_422_naming_the_field(
    client: TestClient, path: str, body: dict[str, Any], field: str
) -> None:
    detail = _detail(client.post(path, json=body), 422)
    assert detail.startswith(f"{field}:"), detail


def test_invalid_json_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/rank", content=b'{"query": "q",', headers={"content-type": "application/json"}
    )
    assert "not valid JSON" in _detail(response, 422)


def test_empty_query_is_400(client: TestClient) -> None:
    detail = _detail(client.post("/v1/rank", json={"query": "  ", "candidates": ["a"]}), 400)
    assert "query" in detail and "empty" in detail


def test_odd_texts_are_answered_not_5xx(client: TestClient) -> None:
    """Unknown words, control characters, markup and an empty candidate are texts like others."""
    texts = [
        "",
        "\x00\x1b[31m<b>",
        "zzz unknown",
        "w1 🙂",
        "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    ]
    response = client.post("/v1/rank", json={"query": "w1", "candidates": texts})
    assert response.status_code == 200, response.text
    assert sorted(r["index"] for r in response.json()["results"]) == list(range(len(texts)))


def test_create_app_refuses_no_models() -> None:
    with pytest.raises(ValueError, match="no models"):
        create_app({}, settings=ServeSettings())
    with pytest.raises(ValueError, match="max_candidates"):
        ServeSettings(max_candidates=0)
    with pytest.raises(ValueError, match="max_wait_ms"):
        ServeSettings(max_wait_ms=float("nan"))
    for threads in (0, 1.5, True):
        with pytest.raises(ValueError, match="threads"):
            ServeSettings(threads=threads)  # type: ignore[arg-type]


def test_threads_set_torch_threads_on_the_model_thread_only(models: dict[str, Matcher]) -> None:
    import asyncio

    import torch

    before = torch.get_num_threads()
    wanted = before + 2
    app = create_app(models, settings=ServeSettings(threads=wanted))
    batcher = app.state.batchers["ranker"]

    async def on_model_thread() -> int:
        try:
            return int(await batcher.call(torch.get_num_threads))
        finally:
            await batcher.aclose()

    assert asyncio.run(on_model_thread()) == wanted
    assert torch.get_num_threads() == before  # this thread keeps its own setting


def test_answers_are_utf8_json(client: TestClient) -> None:
    """The batched endpoints' answers: application/json, texts as sent (not escaped)."""
    texts = ["w1 🙂 naïve", "w2"]
    response = client.post("/v1/rank", json={"model": "ranker", "query": "w1", "candidates": texts})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert "🙂 naïve".encode() in response.content
    assert {r["text"] for r in response.json()["results"]} == set(texts)
    rows = client.post("/rerank", json={"query": "w1", "texts": texts, "return_text": True}).json()
    assert {r["text"] for r in rows} == set(texts)


# ----------------------------------------------------------------- metrics and log


def test_metrics_count_requests_latency_and_batches(models: dict[str, Matcher]) -> None:
    with TestClient(create_app(models, settings=ServeSettings())) as client:
        client.post("/v1/rank", json={"query": QUERY, "candidates": CANDIDATES})
        client.post("/v1/rank", json={"model": "nope", "query": QUERY, "candidates": ["a"]})
        text = client.get("/metrics").text
    assert 'attnmatch_requests_total{endpoint="/v1/rank",status="200"} 1.0' in text
    assert 'attnmatch_requests_total{endpoint="/v1/rank",status="404"} 1.0' in text
    assert 'attnmatch_request_duration_seconds_count{endpoint="/v1/rank"} 2.0' in text
    assert 'attnmatch_batch_pairs_count{model="ranker"} 1.0' in text
    assert 'attnmatch_batch_pairs_sum{model="ranker"} 5.0' in text


def test_access_log_is_one_json_line(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="attnmatch.serve"):
        client.post("/v1/score", json={"model": "amvlstm", "pairs": [["a", "b"], ["c", "d"]]})
    lines = [r.getMessage() for r in caplog.records if r.name == "attnmatch.serve"]
    record = json.loads(lines[-1])
    assert record["method"] == "POST" and record["path"] == "/v1/score"
    assert record["status"] == 200 and record["model"] == "amvlstm" and record["pairs"] == 2
    assert record["ms"] >= 0


# ----------------------------------------------------------------- the CLI


def test_serve_names_models_and_refuses_duplicates(capsys: pytest.CaptureFixture[str]) -> None:
    assert _model_specs(["runs/faq/model", "lex=bm25", "bm25"]) == [
        ("faq", "runs/faq/model"),
        ("lex", "bm25"),
        ("bm25", "bm25"),
    ]
    assert_clear_error(run_cli(["serve", "bm25", "bm25"], capsys), "two models are named 'bm25'")


def test_serve_without_the_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    assert_clear_error(run_cli(["serve", "bm25"], capsys), "pip install 'attnmatch[serve]'")


def test_serve_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        outcome = run_cli(["serve", "bm25", "--port", str(port)], capsys)
    assert_clear_error(outcome, f"127.0.0.1:{port}", "--port")


def test_serve_loads_the_models_and_runs_uvicorn(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import uvicorn

    seen: dict[str, Any] = {}

    def run(server: uvicorn.Server) -> None:  # instead of listening
        seen["config"] = server.config
        with TestClient(server.config.app, base_url="http://localhost") as c:
            seen["ready"] = c.get("/readyz").json()
        with TestClient(server.config.app) as c:  # Host: testserver, not a loopback name
            seen["other host"] = c.get("/readyz").status_code

    monkeypatch.setattr(uvicorn.Server, "run", run)
    outcome = run_cli(
        ["serve", "lex=bm25", "overlap", "--port", "0", "--no-batching", "--threads", "1"], capsys
    )
    assert outcome.code == 0, outcome.stderr
    assert "serving lex, overlap on http://127.0.0.1:0" in outcome.stderr
    config = seen["config"]
    assert (config.host, config.port, config.timeout_graceful_shutdown) == ("127.0.0.1", 0, 10)
    assert seen["ready"] == {"status": "ready", "models": ["lex", "overlap"]}
    settings = config.app.state.settings
    assert (settings.batching, settings.threads) == (False, 1)
    assert seen["other host"] == 400
    assert settings.allowed_hosts == ("localhost", "127.0.0.1", "[::1]")
    assert config.http == "attnmatch.serving.limits:LimitedHttpTools"
