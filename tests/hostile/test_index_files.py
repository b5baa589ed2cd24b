"""Hostile index folders: `load_index` (`SearchIndex`), `add_to_index` and `attnmatch search`
check every file of an index against what index.json recorded when it was written
(docs/robustness.md, "Files read back").

- c4: a folder changed after indexing is refused, never searched: the first passage removed
  (every hit would name the next passage), a passage edited in place (same count, same size:
  the digest), dense.faiss of 80 vectors for 50 passages or of another dimension, the BM25 files
  of another corpus, a vocabulary or rows that do not fit the arrays, a file of another size, a
  malformed record in index.json; adding to such a folder is refused too.
- c2: a damaged file (a BM25 array or JSON file truncated or garbage, dense.faiss garbage or
  truncated, a file missing) is one line naming it, never a traceback from numpy, bm25s or faiss.
- c7: each refusal is one line naming the file and what differs, from the Python API and from
  `attnmatch search` (exit status 2); the rebuild named in it gives a searchable index again.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from attnmatch.retrieval import add_to_index, build_index, dense, load_index, rebuild_index
from tests.hostile._util import assert_clear_error, assert_clear_exception, run_cli
from tests.retrieval.conftest import DIM, PASSAGES, FakeEncoder

COUNT = 50
BM25 = "bm25"
ARRAYS = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy")
JSONS = ("params.index.json", "vocab.index.json")

Damage = Callable[[Path], None]


def _corpus(folder: Path, count: int = COUNT) -> Path:
    """A TSV corpus of `count` passages d0, d1, ... (the conftest's five texts, numbered)."""
    path = folder / "corpus.tsv"
    rows = "".join(f"d{i}\t{PASSAGES[i % len(PASSAGES)]} Number {i}.\n" for i in range(count))
    path.write_text("id\ttext\n" + rows, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An intact index of 50 passages with BM25 and dense vectors of the fake encoder (16
    dimensions); each test damages a copy."""
    folder = tmp_path_factory.mktemp("built")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dense, "TextEncoder", FakeEncoder)
        build_index(_corpus(folder), folder / "idx", dense_source="fake")
    return folder / "idx"


@pytest.fixture
def idx(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the intact index to damage (the fake encoder stands in for MiniLM)."""
    monkeypatch.setattr(dense, "TextEncoder", FakeEncoder)
    return Path(shutil.copytree(built, tmp_path / "idx"))


# --- damages -----------------------------------------------------------------------------


def _drop_first_passage(idx: Path) -> None:
    path = idx / "passages.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[1:]))


def _edit_passage_in_place(idx: Path) -> None:
    path = idx / "passages.jsonl"
    data = path.read_bytes()
    edited = data.replace(b"Alps", b"Andy", 1)  # same count, same size: only the digest tells
    assert edited != data and len(edited) == len(data)
    path.write_bytes(edited)


def _faiss(idx: Path, rows: int, dim: int = DIM) -> None:
    import faiss

    vectors = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    index = faiss.IndexFlatIP(dim)
    index.add(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    faiss.write_index(index, str(idx / "dense.faiss"))


def _bm25_of_another_corpus(idx: Path) -> None:
    other = idx.parent / "other"
    other.mkdir()
    build_index(_corpus(other, COUNT - 1), other / "idx")
    shutil.rmtree(idx / BM25)
    shutil.copytree(other / "idx" / BM25, idx / BM25)


def _edit_array(name: str, change: Callable[[np.ndarray], None]) -> Damage:
    def damage(idx: Path) -> None:
        path = idx / BM25 / name
        array = np.load(path)
        change(array)
        np.save(path, array)

    return damage


def _set_item(index: int, value: float) -> Callable[[np.ndarray], None]:
    def change(array: np.ndarray) -> None:
        array[index] = value

    return change


def _truncate(relative: str) -> Damage:
    def damage(idx: Path) -> None:
        path = idx / relative
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])

    return damage


def _garbage(relative: str) -> Damage:
    def damage(idx: Path) -> None:
        (idx / relative).write_bytes(b"\x00not what was written\xff" * 20)

    return damage


def _remove(relative: str) -> Damage:
    return lambda idx: (idx / relative).unlink()


def _write(relative: str, text: str) -> Damage:
    def damage(idx: Path) -> None:
        (idx / relative).write_text(text, encoding="utf-8")

    return damage


def _append_space(relative: str) -> Damage:
    def damage(idx: Path) -> None:
        path = idx / relative
        path.write_bytes(path.read_bytes() + b" ")

    return damage


def _manifest_count_as_text(idx: Path) -> None:
    path = idx / "index.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["passages"]["count"] = str(manifest["passages"]["count"])
    path.write_text(json.dumps(manifest), encoding="utf-8")


REBUILD = "attnmatch index --rebuild --output"
FROM_CORPUS = "attnmatch index CORPUS --rebuild --output"

CHANGED: list[tuple[str, Damage, list[str]]] = [
    (
        "c4-first-passage-removed",
        _drop_first_passage,
        ["passages.jsonl", "49 passages, index.json records 50", "changed after", FROM_CORPUS],
    ),
    (
        "c4-passage-edited-in-place",
        _edit_passage_in_place,
        ["passages.jsonl", "50 passages as index.json records", "sha256 differs", FROM_CORPUS],
    ),
    (
        "c4-passages-emptied",
        _write("passages.jsonl", ""),
        ["passages.jsonl", "0 passages, index.json records 50", "0 bytes", FROM_CORPUS],
    ),
    (
        "c4-80-vectors-for-50-passages",
        lambda idx: _faiss(idx, 80),
        ["dense.faiss", "80 vectors for 50 passages", REBUILD],
    ),
    (
        "c4-vectors-of-another-dimension",
        lambda idx: _faiss(idx, COUNT, dim=8),
        ["dense.faiss", "dimension 8, index.json records 16", REBUILD],
    ),
    (
        "c4-bm25-of-another-corpus",
        _bm25_of_another_corpus,
        ["bm25/params.index.json", "num_docs is 49, index.json records 50", REBUILD],
    ),
    (
        "c4-vocabulary-of-no-words",
        _write(f"{BM25}/vocab.index.json", "{}"),
        ["bm25/vocab.index.json", "0 words for the", "columns of indptr.csc.index.npy"],
    ),
    (
        "c4-bm25-row-past-the-passages",
        _edit_array("indices.csc.index.npy", _set_item(0, COUNT)),
        ["bm25/indices.csc.index.npy", "a row outside the 50 passages", REBUILD],
    ),
    (
        "c4-bm25-nan-score",
        _edit_array("data.csc.index.npy", _set_item(0, float("nan"))),
        ["bm25/data.csc.index.npy", "nan or infinite", REBUILD],
    ),
    (
        "c4-file-of-another-size",
        _append_space(f"{BM25}/vocab.index.json"),
        ["bm25/vocab.index.json", "bytes, index.json records", REBUILD],
    ),
    (
        "c4-malformed-record-in-index-json",
        _manifest_count_as_text,
        ["index.json", "field 'passages'", "count (>= 1)"],
    ),
]

DAMAGED: list[tuple[str, Damage, list[str]]] = [
    *(
        (f"c2-{how}-{name}", make(f"{BM25}/{name}"), [f"bm25/{name}", "damaged", REBUILD])
        for name in (*ARRAYS, *JSONS)
        for how, make in (("truncated", _truncate), ("garbage", _garbage))
    ),
    (
        "c2-garbage-dense.faiss",
        _garbage("dense.faiss"),
        ["dense.faiss", "damaged, not a faiss index", REBUILD],
    ),
    (
        "c2-truncated-dense.faiss",
        _truncate("dense.faiss"),
        ["dense.faiss", "damaged, not a faiss index", REBUILD],
    ),
]

MISSING: list[tuple[str, Damage, list[str]]] = [
    ("c2-missing-passages.jsonl", _remove("passages.jsonl"), ["passages.jsonl", "missing"]),
    ("c2-missing-dense.faiss", _remove("dense.faiss"), ["dense.faiss", "missing", REBUILD]),
    (
        "c2-missing-vocab",
        _remove(f"{BM25}/vocab.index.json"),
        ["bm25/vocab.index.json", "missing", REBUILD],
    ),
]


def _params(cases: list[tuple[str, Damage, list[str]]]) -> list[object]:
    return [pytest.param(damage, needles, id=case) for case, damage, needles in cases]


@pytest.mark.parametrize(("damage", "needles"), _params(CHANGED + DAMAGED))
def test_a_changed_or_damaged_index_is_one_line_naming_the_file(
    idx: Path, damage: Damage, needles: list[str]
) -> None:
    damage(idx)
    with pytest.raises(ValueError) as caught:
        load_index(idx)
    assert_clear_exception(caught.value, str(idx), *needles)


@pytest.mark.parametrize(("damage", "needles"), _params(MISSING))
def test_a_missing_file_is_one_line_naming_it(
    idx: Path, damage: Damage, needles: list[str]
) -> None:
    damage(idx)
    with pytest.raises(FileNotFoundError) as caught:
        load_index(idx)
    assert_clear_exception(caught.value, str(idx), *needles)


@pytest.mark.parametrize(
    ("damage", "args", "needles"),
    [
        pytest.param(
            _drop_first_passage,
            [],
            ["passages.jsonl", "49 passages, index.json records 50"],
            id="c7-cli-first-passage-removed",
        ),
        pytest.param(
            _garbage(f"{BM25}/indptr.csc.index.npy"),
            ["--first-stage", "bm25"],
            ["bm25/indptr.csc.index.npy", "damaged"],
            id="c7-cli-garbage-bm25-array",
        ),
        pytest.param(
            _garbage(f"{BM25}/vocab.index.json"),
            ["--first-stage", "bm25"],
            ["bm25/vocab.index.json", "damaged"],
            id="c7-cli-garbage-vocabulary",
        ),
        pytest.param(
            lambda idx: _faiss(idx, 80),
            ["--first-stage", "dense"],
            ["dense.faiss", "80 vectors for 50 passages"],
            id="c7-cli-80-vectors",
        ),
        pytest.param(
            _garbage("dense.faiss"),
            [],
            ["dense.faiss", "damaged, not a faiss index"],
            id="c7-cli-garbage-faiss",
        ),
    ],
)
def test_search_on_a_changed_index_is_one_error_line(
    idx: Path,
    capsys: pytest.CaptureFixture[str],
    damage: Damage,
    args: list[str],
    needles: list[str],
) -> None:
    damage(idx)
    outcome = run_cli(["search", str(idx), "-q", "glacier cave", "--json", *args], capsys)
    assert outcome.stdout == ""
    assert_clear_error(outcome, str(idx), *needles, "attnmatch index")


@pytest.mark.parametrize("case", [pytest.param("c4", id="c4-add-to-a-changed-index")])
def test_adding_to_a_changed_index_is_refused(case: str, idx: Path, tmp_path: Path) -> None:
    _faiss(idx, 80)
    more = tmp_path / "more.txt"
    more.write_text("Ice caves glow blue.\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in idx.rglob("*") if p.is_file()}
    with pytest.raises(ValueError) as caught:
        add_to_index(more, idx)
    assert_clear_exception(caught.value, "dense.faiss", "80 vectors for 50 passages")
    assert {p.name: p.read_bytes() for p in idx.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("case", [pytest.param("c7", id="c7-the-named-rebuild-repairs")])
def test_the_rebuild_it_names_gives_a_searchable_index(case: str, idx: Path) -> None:
    _garbage(f"{BM25}/data.csc.index.npy")(idx)
    _faiss(idx, 80)
    with pytest.raises(ValueError, match="attnmatch index --rebuild"):
        load_index(idx)
    rebuild_index(idx)
    hits = load_index(idx).search("Python programming", first_stage="bm25")
    assert hits[0].text.startswith("Python")


@pytest.mark.parametrize("stage", ["bm25", "dense", "hybrid"])
def test_an_intact_index_still_searches(idx: Path, stage: str) -> None:
    index = load_index(idx)
    assert len(index) == COUNT and index.has_dense
    hits = index.search("Python programming language Number 3", first_stage=stage, top_k=3)
    assert hits and hits[0].id == "d3", [h.id for h in hits]
    manifest = json.loads((idx / "index.json").read_text(encoding="utf-8"))
    sizes = {name: (idx / name).stat().st_size for name in manifest["files"]}
    assert sizes == manifest["files"] and "dense.faiss" in sizes
    assert manifest["passages"]["bytes"] == (idx / "passages.jsonl").stat().st_size
