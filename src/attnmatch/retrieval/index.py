"""A search index over a corpus: BM25 (bm25s) and, optionally, dense vectors (faiss).

An index is a folder:

    index.json        what built it: format, attnmatch and library versions, BM25 parameters,
                      the dense encoder, the passages' count and sha256, the corpus files added
    passages.jsonl    the passages, {"id", "text"} one a line, in row order
    bm25/             the bm25s index (JSON and .npy arrays, read without pickle)
    dense.faiss       the passages' unit vectors (`attnmatch.retrieval.dense`), if built

Every write builds the whole folder beside it and swaps it in at once
(`attnmatch.atomic.atomic_directory`): an interrupted build (Ctrl-C, an error, a kill) leaves
the old index, or none, never a half-written one. Adding passages rebuilds BM25 (its IDF and
average length are the collection's) and encodes only the new passages; `rebuild` builds again
from the stored passages, with this version of attnmatch.

An index is read only by the attnmatch version and index format that wrote it (a tokenizer or
library change would silently change its scores); any other is refused with the command that
rebuilds it.

Loading does not trust the folder: every file is checked against what index.json recorded when
it was written (`read_passages`, `read_bm25`, `read_vectors`, `check_sizes`): the passages'
count, size and sha256; the BM25 files' presence, sizes and shapes (one column a word, rows
within the passages); the vectors' count and dimension. A mismatch or a damaged file is one
ValueError line naming the file and what differs (a missing one, a FileNotFoundError), and the
command that builds the index again.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch import __version__
from attnmatch.atomic import atomic_directory
from attnmatch.data.textfile import DatasetFormatError, open_text, parse_json_line
from attnmatch.data.tokenize import lexical_words
from attnmatch.retrieval import dense
from attnmatch.retrieval.corpus import Passage, check_passages, read_corpus

INDEX_FORMAT = "attnmatch-index"
INDEX_FORMAT_VERSION = 1
MANIFEST = "index.json"
PASSAGES = "passages.jsonl"
BM25_DIR = "bm25"
DENSE_FILE = "dense.faiss"
BM25_K1, BM25_B, BM25_METHOD = 1.2, 0.75, "lucene"
BM25_PARAMS = "params.index.json"
BM25_VOCAB = "vocab.index.json"
BM25_ARRAYS = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy")
_ENCODE_CHUNK = 4096
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class IndexInfo:
    """An index's manifest (index.json), checked."""

    path: Path
    manifest: dict[str, Any]

    @property
    def dense_source(self) -> str | None:
        entry = self.manifest.get("dense")
        return None if entry is None else str(entry["source"])

    @property
    def num_passages(self) -> int:
        return int(self.manifest["passages"]["count"])


def _words(texts: list[str]) -> list[list[str]]:
    """The lexical matcher's words (`lexical_words`): one tokenizer for BM25."""
    return [lexical_words(t) for t in texts]


def _write_bm25(folder: Path, texts: list[str]) -> None:
    import bm25s

    retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method=BM25_METHOD)
    retriever.index(_words(texts), show_progress=False)
    retriever.save(str(folder / BM25_DIR))


def _encode(encoder: dense.TextEncoder, texts: list[str]) -> np.ndarray:
    """(N, E) float32 unit vectors of `texts`, encoded a chunk at a time."""
    chunks = [
        encoder.encode(texts[i : i + _ENCODE_CHUNK]) for i in range(0, len(texts), _ENCODE_CHUNK)
    ]
    return np.concatenate(chunks) if chunks else np.zeros((0, encoder.dim), dtype=np.float32)


def _passages_bytes(passages: list[Passage]) -> bytes:
    rows = (json.dumps({"id": p.id, "text": p.text}, ensure_ascii=False) for p in passages)
    return "".join(r + "\n" for r in rows).encode("utf-8")


def _manifest(
    passages: bytes,
    count: int,
    sources: list[dict[str, str]],
    dense_entry: dict[str, Any] | None,
    files: dict[str, int],
) -> dict[str, Any]:
    return {
        "format": INDEX_FORMAT,
        "format_version": INDEX_FORMAT_VERSION,
        "attnmatch": __version__,
        "libraries": {"bm25s": version("bm25s"), "faiss": _faiss_version(dense_entry)},
        "bm25": {"k1": BM25_K1, "b": BM25_B, "method": BM25_METHOD, "tokens": "attnmatch.lexical"},
        "dense": dense_entry,
        "passages": {
            "count": count,
            "bytes": len(passages),
            "sha256": hashlib.sha256(passages).hexdigest(),
        },
        "files": files,
        "sources": sources,
    }


def _faiss_version(dense_entry: dict[str, Any] | None) -> str | None:
    if dense_entry is None:
        return None
    import faiss

    return str(faiss.__version__)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_index(
    output: str | Path,
    passages: list[Passage],
    *,
    dense_source: str | None = None,
    sources: list[dict[str, str]] | None = None,
    vectors: Any = None,
) -> IndexInfo:
    """Writes an index of `passages` to `output` as a whole (module docstring).

    Args:
        dense_source: an encoder source ("minilm-l6") for a dense index, or None.
        sources: the corpus files this index holds, [{"file", "sha256"}], recorded.
        vectors: a faiss index already holding the vectors of the first passages (adding:
            only the rest are encoded).

    Raises:
        DatasetFormatError: no passages.
    """
    if not passages:
        raise DatasetFormatError(f"{output}: no passages to index (the corpus is empty)")
    output = Path(output)
    texts = [p.text for p in passages]
    with atomic_directory(output) as folder:
        data = _passages_bytes(passages)
        (folder / PASSAGES).write_bytes(data)
        _write_bm25(folder, texts)
        dense_entry = None
        if dense_source is not None:
            encoder = dense.TextEncoder(dense_source)
            if vectors is None:
                vectors = dense.build_vector_index(_encode(encoder, texts))
            else:
                if vectors.d != encoder.dim:
                    raise ValueError(
                        f"{output / DENSE_FILE}: vectors of dimension {vectors.d}, but the encoder "
                        f"{dense_source} gives {encoder.dim}; {_rebuild(output)}"
                    )
                vectors.add(_encode(encoder, texts[vectors.ntotal :]))
            dense.write_vector_index(vectors, folder / DENSE_FILE)
            kind = dense.index_kind(vectors)
            dense_entry = {
                "source": dense_source,
                "dim": encoder.dim,
                "library": "faiss",
                "kind": kind,
                "normalised": True,
            }
        files = {
            f.relative_to(folder).as_posix(): f.stat().st_size
            for f in sorted(folder.rglob("*"))
            if f.is_file() and f.name != PASSAGES
        }
        manifest = _manifest(data, len(passages), sources or [], dense_entry, files)
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return IndexInfo(output, manifest)


def build_index(
    corpus: str | Path, output: str | Path, *, dense_source: str | None = None
) -> IndexInfo:
    """A new index of a corpus file (`attnmatch.retrieval.corpus`) at `output`.

    Raises:
        FileExistsError: `output` exists (add to it with `add_to_index`, or `rebuild_index`).
        DatasetFormatError: the corpus is empty, malformed or has a duplicate id.
    """
    output = Path(output)
    if output.exists():
        raise FileExistsError(
            f"{output}: the index exists; add passages with --add, or build it again with --rebuild"
        )
    passages = read_corpus(corpus)
    source = {"file": Path(corpus).name, "sha256": file_digest(Path(corpus))}
    return write_index(output, passages, dense_source=dense_source, sources=[source])


def add_to_index(corpus: str | Path, index: str | Path) -> IndexInfo:
    """Adds a corpus file's passages to an index (ids must be new); BM25 is rebuilt and only
    the new passages are encoded."""
    info = read_manifest(index)
    old = read_passages(info)
    known = {p.id: -1 for p in old}
    new = read_corpus(corpus)
    check_passages(((i, p.id, p.text) for i, p in enumerate(new, 1)), str(corpus), known)
    vectors = None
    if info.dense_source is not None:
        vectors = read_vectors(info)
    check_sizes(info)
    source = {"file": Path(corpus).name, "sha256": file_digest(Path(corpus))}
    return write_index(
        info.path,
        old + new,
        dense_source=info.dense_source,
        sources=[*info.manifest["sources"], source],
        vectors=vectors,
    )


def rebuild_index(index: str | Path, *, dense_source: str | None = None) -> IndexInfo:
    """Builds an index again from its own passages, with this attnmatch (an index of another
    version included); `dense_source` replaces the dense encoder (default: the one it had)."""
    path = Path(index)
    manifest = _read_json(path / MANIFEST)
    passages = read_passages(IndexInfo(path, manifest))
    entry = manifest.get("dense") if isinstance(manifest, dict) else None
    source = dense_source or (entry or {}).get("source")
    sources = manifest.get("sources", []) if isinstance(manifest, dict) else []
    return write_index(path, passages, dense_source=source, sources=sources)


def _read_json(path: Path) -> Any:
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path.parent}: no such index folder")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; is {path.parent} an index (attnmatch index)?")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a valid index manifest ({e})") from e


def read_manifest(index: str | Path) -> IndexInfo:
    """The manifest of an index, refused when another format or attnmatch version wrote it.

    Raises:
        FileNotFoundError: no index there.
        ValueError: not an index manifest, one of another version (the rebuild named), or one
            whose records are malformed.
    """
    path = Path(index)
    manifest = _read_json(path / MANIFEST)
    where = path / MANIFEST
    if not isinstance(manifest, dict) or manifest.get("format") != INDEX_FORMAT:
        raise ValueError(f"{where}: not an attnmatch index manifest (no format {INDEX_FORMAT!r})")
    built = (manifest.get("format_version"), manifest.get("attnmatch"))
    if built != (INDEX_FORMAT_VERSION, __version__):
        raise ValueError(
            f"{where}: built by attnmatch {built[1]} (index format {built[0]}); this is attnmatch "
            f"{__version__} (format {INDEX_FORMAT_VERSION}): build it again with "
            f"`attnmatch index --rebuild --output {path}`"
        )
    _check_manifest(where, manifest)
    return IndexInfo(path, manifest)


def _is_count(value: object, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _check_manifest(where: Path, manifest: dict[str, Any]) -> None:
    """Refuses records of index.json that loading relies on but are missing or malformed."""

    def refuse(field: str, needs: str) -> ValueError:
        shown = repr(manifest.get(field))
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return ValueError(f"{where}: field {field!r} must be {needs}, got {shown}")

    passages = manifest.get("passages")
    if not (
        isinstance(passages, dict)
        and _is_count(passages.get("count"), 1)
        and _is_count(passages.get("bytes", 0))
        and isinstance(passages.get("sha256"), str)
        and _SHA256.fullmatch(passages["sha256"])
    ):
        raise refuse("passages", "an object of count (>= 1), bytes and sha256 (64 hex digits)")
    entry = manifest.get("dense")
    if entry is not None and not (
        isinstance(entry, dict)
        and isinstance(entry.get("source"), str)
        and _is_count(entry.get("dim"), 1)
        and entry.get("kind") in ("flat", "ivf")
    ):
        raise refuse("dense", "null or an object of source, dim (>= 1) and kind (flat or ivf)")
    bm25 = manifest.get("bm25")
    if not (isinstance(bm25, dict) and all(k in bm25 for k in ("k1", "b", "method"))):
        raise refuse("bm25", "an object of k1, b and method")
    files = manifest.get("files", {})
    if not (
        isinstance(files, dict)
        and all(
            isinstance(name, str)
            and name
            and not Path(name).is_absolute()
            and ".." not in Path(name).parts
            and _is_count(size)
            for name, size in files.items()
        )
    ):
        raise refuse("files", "an object of file paths inside the index and their sizes")


def _rebuild(path: Path) -> str:
    return f"build it again with `attnmatch index --rebuild --output {path}`"


def _changed(path: Path) -> str:
    return f"the folder was changed after indexing; {_rebuild(path)}"


def _one_line(error: BaseException) -> str:
    """An error's message on one line, at most 300 characters."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _count_lines(path: Path) -> int:
    count, last = 0, b"\n"
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n")


def _passages_mismatch(info: IndexInfo, where: Path, count: int, differs: str) -> ValueError:
    record = info.manifest.get("passages")
    recorded = record.get("count") if isinstance(record, dict) else None
    said = (
        f"{count:,} passages as index.json records"
        if count == recorded
        else f"{count:,} passages, index.json records {recorded}"
    )
    return ValueError(
        f"{where}: {said} ({differs}): the folder was changed after indexing; build it again "
        f"from the corpus with `attnmatch index CORPUS --rebuild --output {info.path}`"
    )


def read_passages(info: IndexInfo) -> list[Passage]:
    """The stored passages of an index, in row order, checked against index.json: their size
    first, then their sha256 (one pass over the file), then their count.

    Raises:
        FileNotFoundError: no passages.jsonl.
        ValueError: a file that differs from what index.json records, naming what differs, or
            (without such a record) a line that is not a passage.
    """
    where = info.path / PASSAGES
    record = info.manifest.get("passages")
    record = record if isinstance(record, dict) else {}
    if not where.is_file():
        raise FileNotFoundError(f"{where}: missing; {_changed(info.path)}")
    size, recorded_size = where.stat().st_size, record.get("bytes")
    if _is_count(recorded_size) and size != recorded_size:
        differs = f"{size:,} bytes, index.json records {recorded_size:,}"
        raise _passages_mismatch(info, where, _count_lines(where), differs)
    recorded_digest = record.get("sha256")
    if isinstance(recorded_digest, str) and file_digest(where) != recorded_digest:
        raise _passages_mismatch(info, where, _count_lines(where), "sha256 differs")
    out: list[Passage] = []
    name = str(where)
    with open_text(where, what="index passages") as lines:
        for number, line in enumerate(lines, 1):
            row = parse_json_line(line, f"{name}:{number}")
            if not (isinstance(row, dict) and isinstance(row.get("id"), str) and "text" in row):
                raise ValueError(f"{name}:{number}: not a passage (a JSON object with id and text)")
            out.append(Passage(row["id"], str(row["text"])))
    if _is_count(record.get("count")) and len(out) != record["count"]:
        raise _passages_mismatch(info, where, len(out), "count differs")
    return out


def check_sizes(info: IndexInfo) -> None:
    """Refuses a file of the index whose size is not the one index.json records.

    Raises:
        FileNotFoundError: a recorded file is missing.
        ValueError: a size differs (the file and both sizes named).
    """
    for name, size in info.manifest.get("files", {}).items():
        path = info.path / name
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: missing, though index.json records it ({size:,} bytes); "
                f"{_changed(info.path)}"
            )
        actual = path.stat().st_size
        if actual != size:
            raise ValueError(
                f"{path}: {actual:,} bytes, index.json records {size:,}: {_changed(info.path)}"
            )


def _bm25_json(path: Path, info: IndexInfo) -> Any:
    from bm25s.utils import json_functions

    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; {_changed(info.path)}")
    try:
        return json_functions.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError) as e:  # JSON and UTF-8 errors are ValueErrors
        raise ValueError(
            f"{path}: damaged, not the JSON bm25s wrote ({_one_line(e)}); {_rebuild(info.path)}"
        ) from e


def _bm25_array(path: Path, info: IndexInfo, kinds: str) -> np.ndarray:
    """A bm25s array (memory-mapped), 1-D, of a dtype kind in `kinds` ("f", "iu")."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; {_changed(info.path)}")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError, TypeError, OverflowError) as e:
        # numpy reads a file without the .npy header as pickled data, which is refused
        detail = "no .npy header" if "pickle" in str(e) else _one_line(e)
        raise ValueError(
            f"{path}: damaged, not the array bm25s wrote ({detail}); {_rebuild(info.path)}"
        ) from e
    if not isinstance(array, np.ndarray) or array.ndim != 1 or array.dtype.kind not in kinds:
        shape = getattr(array, "shape", None)
        dtype = getattr(array, "dtype", type(array).__name__)
        raise ValueError(
            f"{path}: an array of shape {shape} and dtype {dtype}, not the 1-D "
            f"{'float' if kinds == 'f' else 'integer'} array bm25s wrote; {_rebuild(info.path)}"
        )
    return array


def read_bm25(info: IndexInfo) -> Any:
    """The index's BM25 retriever (bm25s, its arrays memory-mapped), its files checked: present,
    readable, of the recorded parameters and passages, and of shapes that fit each other.

    Raises:
        FileNotFoundError: a file of bm25/ is missing.
        ValueError: a damaged file or one that does not fit, naming it.
    """
    import bm25s

    folder = info.path / BM25_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: missing; {_changed(info.path)}")
    params = _bm25_json(folder / BM25_PARAMS, info)
    where = folder / BM25_PARAMS
    if not isinstance(params, dict):
        raise ValueError(f"{where}: not a JSON object of parameters; {_rebuild(info.path)}")
    recorded = info.manifest["bm25"]
    expected = {
        "num_docs": info.num_passages,
        **{k: recorded[k] for k in ("k1", "b", "method")},
    }
    for key, value in expected.items():
        if params.get(key) != value:
            raise ValueError(
                f"{where}: {key} is {params.get(key)!r}, index.json records {value!r}: "
                f"{_changed(info.path)}"
            )
    vocab = _bm25_json(folder / BM25_VOCAB, info)
    data, indices, indptr = (
        _bm25_array(folder / name, info, kinds)
        for name, kinds in zip(BM25_ARRAYS, ("f", "iu", "iu"), strict=True)
    )
    _check_bm25_shapes(info, vocab, data, indices, indptr)
    try:
        retriever = bm25s.BM25.load(str(folder), mmap=True, load_vocab=False)
    except (ValueError, TypeError, KeyError, EOFError) as e:
        raise ValueError(
            f"{folder}: bm25s cannot load it ({_one_line(e)}); {_rebuild(info.path)}"
        ) from e
    retriever.vocab_dict = vocab
    retriever.unique_token_ids_set = set(vocab.values())
    return retriever


def _check_bm25_shapes(
    info: IndexInfo, vocab: Any, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray
) -> None:
    """The arrays of bm25s' word-by-passage matrix (CSC: a column a word) fit each other, the
    vocabulary and the passages."""
    folder = info.path / BM25_DIR
    names = dict(zip(("data", "indices", "indptr"), BM25_ARRAYS, strict=True))

    def refuse(name: str, what: str) -> ValueError:
        return ValueError(f"{folder / name}: {what}; {_changed(info.path)}")

    if len(indices) != len(data):
        raise refuse(
            names["indices"], f"{len(indices):,} entries, {names['data']} has {len(data):,}"
        )
    if len(indptr) == 0 or indptr[0] != 0 or indptr[-1] != len(data):
        raise refuse(names["indptr"], f"does not span the {len(data):,} entries of {names['data']}")
    if len(indptr) > 1 and bool((np.diff(indptr) < 0).any()):
        raise refuse(names["indptr"], "its offsets decrease")
    n = info.num_passages
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= n):
        raise refuse(names["indices"], f"a row outside the {n:,} passages")
    if not bool(np.isfinite(data).all()):
        raise refuse(names["data"], "a score that is NaN or infinite")
    if not (isinstance(vocab, dict) and all(type(v) is int for v in vocab.values())):
        raise refuse(BM25_VOCAB, "not a JSON object of words and column numbers")
    columns = len(indptr) - 1
    ids = [v for k, v in vocab.items() if k != ""]  # bm25s' empty token has no column
    if len(ids) != columns or (ids and (min(ids) < 0 or max(ids) >= columns)):
        raise refuse(
            BM25_VOCAB, f"{len(ids):,} words for the {columns:,} columns of {names['indptr']}"
        )
    if len(set(ids)) != len(ids):
        raise refuse(BM25_VOCAB, "two words share a column")


def read_vectors(info: IndexInfo) -> Any:
    """The index's dense vectors (faiss), checked: readable, one a passage, of the recorded
    dimension and kind.

    Raises:
        FileNotFoundError: no dense.faiss though index.json records dense vectors.
        ValueError: a damaged file or one that does not fit, naming it.
    """
    path = info.path / DENSE_FILE
    entry = info.manifest["dense"]
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: missing, though index.json records dense vectors ({entry['source']}); "
            f"{_changed(info.path)}"
        )
    try:
        vectors = dense.read_vector_index(path)
    except ValueError as e:
        raise ValueError(f"{e}; {_rebuild(info.path)}") from e
    n = info.num_passages
    if vectors.ntotal != n:
        raise ValueError(
            f"{path}: {vectors.ntotal:,} vectors for {n:,} passages (index.json records "
            f"{n:,}): {_changed(info.path)}"
        )
    if vectors.d != entry["dim"]:
        raise ValueError(
            f"{path}: vectors of dimension {vectors.d}, index.json records {entry['dim']} "
            f"(encoder {entry['source']}): {_changed(info.path)}"
        )
    kind = dense.index_kind(vectors)
    if kind != entry["kind"]:
        raise ValueError(
            f"{path}: a {kind} index, index.json records {entry['kind']}: {_changed(info.path)}"
        )
    return vectors


def check_encoder(info: IndexInfo, encoder: dense.TextEncoder) -> None:
    """Refuses an encoder whose vectors are not of the dimension the index's vectors have."""
    entry = info.manifest["dense"]
    if encoder.dim != entry["dim"]:
        raise ValueError(
            f"{info.path / DENSE_FILE}: vectors of dimension {entry['dim']}, but the encoder "
            f"{entry['source']} gives {encoder.dim}; {_rebuild(info.path)}"
        )


def passage_vectors_dim(info: IndexInfo) -> int | None:
    entry = info.manifest.get("dense")
    return None if entry is None else int(entry["dim"])


def bm25_scores(retriever: Any, words: list[str]) -> np.ndarray:
    """BM25 of every passage for a query's words (N,) float32 (words unseen in the corpus
    score nothing)."""
    ids = retriever.get_tokens_ids(words)
    if not ids:
        return np.zeros(retriever.scores["num_docs"], dtype=np.float32)
    return np.asarray(retriever.get_scores_from_ids(ids), dtype=np.float32)
