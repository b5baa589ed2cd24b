"""`attnmatch index`, `attnmatch search`, `evaluate --pipeline` and `POST /v1/search`, end to end
through the real entry point; every bad input is one clear line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from attnmatch.matcher import Matcher
from attnmatch.retrieval import build_index, load_index
from attnmatch.serving import ServeSettings, create_app
from tests.hostile._util import assert_clear_error, run_cli
from tests.retrieval.conftest import PASSAGES, FakeEncoder


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.tsv"
    rows = "".join(f"d{i}\t{t}\n" for i, t in enumerate(PASSAGES, 1))
    path.write_text("id\ttext\n" + rows, encoding="utf-8")
    return path


def test_index_then_search(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    idx = tmp_path / "idx"
    built = run_cli(["index", _corpus(tmp_path), "--output", idx], capsys)
    assert built.code == 0 and "5 passages indexed" in built.stdout
    found = run_cli(["search", idx, "-q", "glacier caves", "--json", "-k", "2"], capsys)
    assert found.code == 0, found.stderr
    rows = [json.loads(line) for line in found.stdout.splitlines()]
    assert [r["rank"] for r in rows] == [1, 2] and {r["id"] for r in rows} == {"d1", "d3"}
    reranked = run_cli(
        ["search", idx, "-q", "glacier cave", "--rerank", "overlap", "--json"], capsys
    )
    assert json.loads(reranked.stdout.splitlines()[0])["id"] == "d1"
    more = tmp_path / "more.txt"
    more.write_text("Ice caves glow blue.\n", encoding="utf-8")
    added = run_cli(["index", more, "--output", idx, "--add"], capsys)
    assert added.code == 0 and "6 passages" in added.stdout
    assert run_cli(["index", "--rebuild", "--output", idx], capsys).code == 0


@pytest.mark.parametrize(
    ("make", "args", "needles"),
    [
        (lambda p: p.write_text(""), ["index", "{c}", "-o", "{i}"], ["the corpus is empty"]),
        (
            lambda p: p.write_text("id\ttext\na\tone\na\ttwo\n"),
            ["index", "{c}", "-o", "{i}"],
            ["c.tsv:3", "duplicate passage id 'a'"],
        ),
        (
            lambda p: p.write_text("id\ttext\na\tone\n"),
            ["search", "{i}", "-q", "word " * 600],
            ["above the bound of 512 words"],
        ),
        (lambda p: None, ["search", "{i}", "-q", "x"], ["no such index folder"]),
    ],
)
def test_bad_input_is_one_clear_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: object,
    args: list[str],
    needles: list[str],
) -> None:
    corpus, idx = tmp_path / "c.tsv", tmp_path / "idx"
    make(corpus)  # type: ignore[operator]
    if args[0] == "search" and corpus.exists():
        build_index(corpus, idx)
    args = [a.replace("{c}", str(corpus)).replace("{i}", str(idx)) for a in args]
    assert_clear_error(run_cli(args, capsys), *needles)


def test_an_index_of_another_version_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_index(_corpus(tmp_path), tmp_path / "idx")
    manifest = tmp_path / "idx" / "index.json"
    manifest.write_text(manifest.read_text().replace('"format_version": 1', '"format_version": 0'))
    outcome = run_cli(["search", tmp_path / "idx", "-q", "glacier"], capsys)
    assert_clear_error(outcome, "index.json", "index format 0", "--rebuild")


def test_evaluate_pipeline_on_the_faq(capsys: pytest.CaptureFixture[str]) -> None:
    faq = Path(__file__).parents[2] / "examples" / "own_data" / "faq"
    outcome = run_cli(
        ["evaluate", "--pipeline", "bm25", "--dataset", f"pairs:{faq}:test", "--json"], capsys
    )
    assert outcome.code == 0, outcome.stderr
    metrics = json.loads(outcome.stdout)
    assert metrics["passages"] == 50 and metrics["num_queries"] == 50
    assert 0.5 < metrics["recall@100"] <= 1 and 0 < metrics["ndcg@10"] <= metrics["recall@100"]


@pytest.fixture
def client(tmp_path: Path, fake_encoder: type[FakeEncoder]) -> Iterator[TestClient]:
    build_index(_corpus(tmp_path), tmp_path / "idx", dense_source="fake")
    models = {"overlap": Matcher.from_lexical("overlap"), "bm25": Matcher.from_lexical("bm25")}
    app = create_app(
        models, settings=ServeSettings(max_candidates=50), index=load_index(tmp_path / "idx")
    )
    with TestClient(app) as c:
        yield c


def test_search_route_with_the_settings_serve_starts_with(
    tmp_path: Path, fake_encoder: type[FakeEncoder]
) -> None:
    """`attnmatch serve MODEL --index IDX` sets no candidate limit: the search depth is bounded
    by the retrieval's own limit, and every answer is 200 or 4xx."""
    build_index(_corpus(tmp_path), tmp_path / "idx", dense_source="fake")
    app = create_app(
        {"overlap": Matcher.from_lexical("overlap")}, index=load_index(tmp_path / "idx")
    )
    with TestClient(app) as c:
        assert c.post("/v1/search", json={"query": "glacier cave"}).status_code == 200
        too_deep = c.post("/v1/search", json={"query": "glacier cave", "depth": 10_001})
        assert too_deep.status_code == 400 and "at most 10,000" in too_deep.json()["detail"]


def test_search_route(client: TestClient) -> None:
    answer = client.post("/v1/search", json={"query": "glacier cave", "top_k": 2})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["model"] == "overlap" and body["first_stage"] == "hybrid"
    assert [r["id"] for r in body["results"]][:1] == ["d1"] and len(body["results"]) == 2
    plain = client.post(
        "/v1/search", json={"query": "glacier cave", "rerank": False, "first_stage": "bm25"}
    ).json()
    assert plain["model"] is None and plain["results"][0]["first_stage_rank"] == 1
    for payload, status, needle in [
        ({"query": ""}, 400, "the query is empty"),
        ({"query": "x", "depth": 51}, 413, "over the limit of 50"),
        ({"query": "x", "model": "nope"}, 404, "unknown model 'nope'"),
        ({"query": "x", "first_stage": "sparse"}, 422, "first_stage"),
        ({"query": "x", "topk": 3}, 422, "topk"),
    ]:
        response = client.post("/v1/search", json=payload)
        assert response.status_code == status, (payload, response.text)
        assert needle in response.json()["detail"]
