"""Indexing and searching a corpus: formats, the index folder, search, bounds and bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from attnmatch.data.textfile import DatasetFormatError
from attnmatch.matcher import Matcher
from attnmatch.retrieval import (
    add_to_index,
    build_index,
    check_query,
    load_index,
    read_corpus,
    rebuild_index,
)
from attnmatch.retrieval import index as index_files
from attnmatch.retrieval.evaluate import query_metrics
from attnmatch.retrieval.fusion import reciprocal_rank_fusion
from attnmatch.retrieval.search import MAX_QUERY_WORDS
from tests.retrieval.conftest import PASSAGES, FakeEncoder


def _lines(tmp_path: Path, texts: list[str] = PASSAGES, name: str = "corpus.txt") -> Path:
    path = tmp_path / name
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return path


def test_corpus_formats_read_alike(tmp_path: Path) -> None:
    plain = read_corpus(_lines(tmp_path))
    assert [p.id for p in plain] == ["1", "2", "3", "4", "5"]
    tsv = tmp_path / "c.tsv"
    tsv.write_text("id\ttext\n" + "".join(f"{p.id}\t{p.text}\n" for p in plain), encoding="utf-8")
    jsonl = tmp_path / "c.jsonl.gz"
    with gzip.open(jsonl, "wt", encoding="utf-8") as f:
        for p in plain:
            f.write(json.dumps({"id": int(p.id), "text": p.text, "title": "x"}) + "\n")
    assert read_corpus(tsv) == plain == read_corpus(jsonl)


@pytest.mark.parametrize(
    ("name", "content", "needles"),
    [
        ("empty.txt", "", ["empty.txt", "the corpus is empty"]),
        (
            "d.tsv",
            "id\ttext\na\tone\nb\ttwo\na\tthree\n",
            ["d.tsv:4", "duplicate passage id 'a'", "line 2"],
        ),
        ("e.txt", "one\n\nthree\n", ["e.txt:2", "empty text"]),
        ("h.tsv", "doc\tbody\n", ["h.tsv:1", "'id'", "'text'"]),
        ("j.jsonl", '{"id": 1}\n', ["j.jsonl:1", "no field 'text'"]),
    ],
)
def test_bad_corpus_is_one_clear_line(
    tmp_path: Path, name: str, content: str, needles: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetFormatError) as caught:
        read_corpus(path)
    message = str(caught.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_bm25_search_ranks_shared_words_first(tmp_path: Path) -> None:
    info = build_index(_lines(tmp_path), tmp_path / "idx")
    assert info.manifest["passages"]["count"] == 5 and info.dense_source is None
    index = load_index(tmp_path / "idx")
    hits = index.search("how are glacier caves formed?", top_k=3)
    assert {h.id for h in hits[:2]} == {"1", "3"}  # "glacier", "caves", "formed"
    assert [h.first_stage_rank for h in hits] == [1, 2, 3][: len(hits)]
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    assert index.search("zzz unknown words", top_k=3) == []  # nothing shares a word


def test_rerank_reorders_the_candidates(tmp_path: Path) -> None:
    build_index(_lines(tmp_path), tmp_path / "idx")
    index = load_index(tmp_path / "idx")
    overlap = Matcher.from_lexical("overlap")
    hits = index.search("glacier cave ice", reranker=overlap, top_k=5)
    expected = overlap.rank("glacier cave ice", [index.texts[int(h.id) - 1] for h in hits])
    assert [h.score for h in hits] == pytest.approx([r.score for r in expected])
    assert hits[0].id == "1"


def test_dense_and_hybrid_use_the_vectors(tmp_path: Path, fake_encoder: type[FakeEncoder]) -> None:
    info = build_index(_lines(tmp_path), tmp_path / "idx", dense_source="fake")
    assert info.manifest["dense"] == {
        "source": "fake",
        "dim": 16,
        "library": "faiss",
        "kind": "flat",
        "normalised": True,
    }
    index = load_index(tmp_path / "idx")
    assert index.default_first_stage == "hybrid"
    dense_hits = index.retrieve("glacier cave", "dense", depth=5)
    assert len(dense_hits) == 5 and dense_hits[0][0] == 0  # passage 1 shares both words
    bm25_rows = [r for r, _ in index.retrieve("glacier cave", "bm25", depth=5)]
    fused = index.retrieve("glacier cave", "hybrid", depth=5)
    assert fused == reciprocal_rank_fusion([bm25_rows, [r for r, _ in dense_hits]])[:5]


def test_reciprocal_rank_fusion_by_hand() -> None:
    fused = dict(reciprocal_rank_fusion([[7, 3], [3, 9]], k=60))
    assert fused == pytest.approx({3: 1 / 62 + 1 / 61, 7: 1 / 61, 9: 1 / 62})
    assert [row for row, _ in reciprocal_rank_fusion([[7, 3], [3, 9]])] == [3, 7, 9]


def test_add_and_rebuild(tmp_path: Path, fake_encoder: type[FakeEncoder]) -> None:
    build_index(_lines(tmp_path), tmp_path / "idx", dense_source="fake")
    more = tmp_path / "more.jsonl"
    more.write_text('{"id": "x1", "text": "Ice caves glow blue."}\n', encoding="utf-8")
    info = add_to_index(more, tmp_path / "idx")
    assert info.num_passages == 6 and len(info.manifest["sources"]) == 2
    index = load_index(tmp_path / "idx")
    assert index.retrieve("glow", "bm25", depth=3)[0][0] == 5
    assert index.search("blue glow", first_stage="dense", top_k=1)[0].id == "x1"
    with pytest.raises(
        DatasetFormatError,
        match=r"more.jsonl:1: duplicate passage id 'x1' \(already at the index\)",
    ):
        add_to_index(more, tmp_path / "idx")
    before = (tmp_path / "idx" / "passages.jsonl").read_bytes()
    rebuilt = rebuild_index(tmp_path / "idx")
    assert rebuilt.num_passages == 6 and rebuilt.dense_source == "fake"
    assert (tmp_path / "idx" / "passages.jsonl").read_bytes() == before


def test_an_existing_index_is_not_overwritten(tmp_path: Path) -> None:
    build_index(_lines(tmp_path), tmp_path / "idx")
    with pytest.raises(FileExistsError, match="--add.*--rebuild"):
        build_index(_lines(tmp_path), tmp_path / "idx")


def test_an_interrupted_build_leaves_no_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(folder: Path, texts: list[str]) -> None:
        (folder / "bm25").mkdir()
        raise KeyboardInterrupt

    build_index(_lines(tmp_path), tmp_path / "old")
    more = tmp_path / "more.jsonl"
    more.write_text('{"id": "n1", "text": "Another passage."}\n', encoding="utf-8")
    old = {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir() if p.is_file()}
    monkeypatch.setattr(index_files, "_write_bm25", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(_lines(tmp_path), tmp_path / "new")
    with pytest.raises(KeyboardInterrupt):
        add_to_index(more, tmp_path / "old")
    assert not (tmp_path / "new").exists()
    assert {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir() if p.is_file()} == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "more.jsonl", "old"]


def test_an_index_of_another_version_is_refused(tmp_path: Path) -> None:
    build_index(_lines(tmp_path), tmp_path / "idx")
    manifest_path = tmp_path / "idx" / "index.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["attnmatch"], manifest["format_version"] = "9.9.9", 2
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError) as caught:
        load_index(tmp_path / "idx")
    message = str(caught.value)
    assert (
        "\n" not in message and "index.json: built by attnmatch 9.9.9 (index format 2)" in message
    )
    assert "attnmatch index --rebuild --output" in message
    rebuild_index(tmp_path / "idx")  # the way out it names
    assert len(load_index(tmp_path / "idx")) == 5


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ("", "the query is empty"),
        ("word " * (MAX_QUERY_WORDS + 1), f"above the bound of {MAX_QUERY_WORDS} words"),
        ("x" * 40_000, "characters long, above the bound"),
    ],
)
def test_queries_out_of_bounds_are_refused(query: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        check_query(query)


def test_query_metrics_by_hand() -> None:
    m = query_metrics(["a", "b", "c"], {"b", "z"})  # z never retrieved
    assert m["recall@100"] == 0.5 and m["mrr@10"] == 0.5
    ideal = 1 + 1 / __import__("math").log2(3)
    assert m["ndcg@10"] == pytest.approx((1 / __import__("math").log2(3)) / ideal)
