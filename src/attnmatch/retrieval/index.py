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
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch import __version__
from attnmatch.atomic import atomic_directory
from attnmatch.data.textfile import DatasetFormatError, open_text, parse_json_line
from attnmatch.retrieval import dense
from attnmatch.retrieval.corpus import Passage, check_passages, read_corpus

INDEX_FORMAT = "attnmatch-index"
INDEX_FORMAT_VERSION = 1
MANIFEST = "index.json"
PASSAGES = "passages.jsonl"
BM25_DIR = "bm25"
DENSE_FILE = "dense.faiss"
BM25_K1, BM25_B, BM25_METHOD = 1.2, 0.75, "lucene"
_ENCODE_CHUNK = 4096


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
    from attnmatch.lexical import LexicalScorer

    scorer = LexicalScorer("bm25")  # the lexical matcher's words: one tokenizer for BM25
    return [scorer.words(t) for t in texts]


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
    passages: bytes, count: int, sources: list[dict[str, str]], dense_entry: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "format": INDEX_FORMAT,
        "format_version": INDEX_FORMAT_VERSION,
        "attnmatch": __version__,
        "libraries": {"bm25s": version("bm25s"), "faiss": _faiss_version(dense_entry)},
        "bm25": {"k1": BM25_K1, "b": BM25_B, "method": BM25_METHOD, "tokens": "attnmatch.lexical"},
        "dense": dense_entry,
        "passages": {"count": count, "sha256": hashlib.sha256(passages).hexdigest()},
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
        manifest = _manifest(data, len(passages), sources or [], dense_entry)
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
        vectors = dense.read_vector_index(info.path / DENSE_FILE)
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
        ValueError: not an index manifest, or one of another version (the rebuild named).
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
    return IndexInfo(path, manifest)


def read_passages(info: IndexInfo) -> list[Passage]:
    """The stored passages of an index, in row order."""
    where = info.path / PASSAGES
    out: list[Passage] = []
    with open_text(where, what="index passages") as lines:
        for number, line in enumerate(lines, 1):
            row = parse_json_line(line, f"{where}:{number}")
            out.append(Passage(str(row["id"]), str(row["text"])))
    return out


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
