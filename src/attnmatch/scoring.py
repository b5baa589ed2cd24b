"""Scoring a file of text pairs in chunks: what `attnmatch score` does.

Input, a file (`.gz` is read transparently) or stdin, UTF-8, one pair per line, in one of the
`PAIR_FORMATS` (`attnmatch score --format`):

- `tsv-header`: TSV with a header line naming the columns `left` and `right`; other columns
  are kept;
- `tsv`: headerless `LEFT<TAB>RIGHT` lines;
- `jsonl`: one object per line with string values under "left" and "right"; other keys are
  kept;
- CSV with a header (`.csv`, `.csv.gz`) or parquet (`.parquet`), by the file's name, with
  columns `left` and `right` (others kept), read by `attnmatch.data.tabular` (`table_records`).

Without `--format` (`"auto"`), `pairs_format` decides only where nothing else is possible: a
name in `FORMAT_SUFFIXES` (`.jsonl`), a first line that is a JSON object without a tab, or a
header naming both `left` and `right`. Every other first line is ambiguous (a headerless pair
or a header of other names, a header naming only one of left/right, JSON holding a tab) and
an error that says which `--format` to pass: a guess would shift every score by one line.

Blank lines are skipped, a UTF-8 byte order mark is dropped, and every error names the file and
line (`pairs.tsv:7: ...`; `attnmatch.data.textfile` reads the files). JSON is strict: `NaN`,
`Infinity`, numbers beyond a float and a key given twice in one object are errors. Pairs are
read, scored and written `CHUNK_SIZE` at a time, so a file of any length runs in bounded memory.
A score that is not finite (a broken model) stops the run at its pair's line: what is written
is valid TSV or JSON, always.

Candidates for `attnmatch rank` (`read_candidates`): one text per line, stripped, blank lines
skipped, with the line number of each.

Output: TSV (`left`, `right`, the other input columns, `score` and, for classification models,
the predicted class `label`), or JSONL (the input object plus `score` and `label`), written to a
temporary file and moved into place at the end. An input column already called `score` or
`label` is kept; the prediction is then written as `predicted_score` / `predicted_label`.

    >>> with PairsFile("pairs.tsv") as pairs:                          # doctest: +SKIP
    ...     write_scored(matcher, pairs, "scored.tsv")
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from attnmatch.atomic import open_text_atomic
from attnmatch.data.tabular import TableKind, read_table, table_kind, text_value
from attnmatch.data.textfile import (
    GZIP_MAGIC,
    DatasetFormatError,
    TextLines,
    check_file,
    open_text,
    parse_json_line,
)

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.matcher import Matcher
    from attnmatch.runtime import ExportedMatcher

CHUNK_SIZE = 2048  # pairs read, scored and written at a time


@dataclass(frozen=True)
class PairRecord:
    """One input pair, with the other columns (TSV) or keys (JSONL) of its line."""

    left: str
    right: str
    extra: dict[str, Any]
    line: int  # 1-based line number in the input


@dataclass(frozen=True)
class ScoredChunk:
    """Scores (and, for classification models, predicted class names) of consecutive pairs."""

    records: list[PairRecord]
    scores: np.ndarray  # (N,) float32
    labels: list[str] | None
    index: int = 0  # the chunk's place in the file: 0, 1, ...


PAIR_FORMATS: tuple[str, ...] = ("tsv", "tsv-header", "jsonl")  # `--format`, besides "auto"
TABLE_FORMATS: tuple[TableKind, ...] = ("csv", "parquet")  # `--format` too: a file, not stdin
# A file name (less .gz) ending in one of these has that format whatever its first line holds.
FORMAT_SUFFIXES: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl"}


def pairs_format(name: str, first: tuple[int, str] | None, given: str = "auto") -> str:
    """The format of a pairs file: `given`, or ("auto") what its name or first non-blank line
    says where that is unambiguous (the module docstring).

    Args:
        name: the file's name (or "stdin").
        first: its first non-blank line and that line's number (None: no line).
        given: `--format`: "auto" or one of `PAIR_FORMATS`.

    Raises:
        ValueError: an unknown `given`, or an ambiguous first line; the message names the
            line and the `--format` to pass.
    """
    if given != "auto":
        if given not in PAIR_FORMATS:
            choices = ", ".join((*PAIR_FORMATS, *TABLE_FORMATS))
            raise ValueError(f"--format must be auto or one of {choices}")
        return given
    for suffix, kind in FORMAT_SUFFIXES.items():
        if name.removesuffix(".gz").endswith(suffix):
            return kind
    if first is None:
        return "tsv"  # no pairs: nothing to shift
    lineno, text = first
    names = {c.strip().lower() for c in text.split("\t")}
    if text.lstrip().startswith("{"):
        if "\t" not in text:
            return "jsonl"
        fix = "--format jsonl, or --format tsv / tsv-header"
        what = "starts like JSON but holds a tab (TSV fields?)"
    elif {"left", "right"} <= names:
        return "tsv-header"
    elif len(names & {"left", "right"}) == 1:
        (named,) = names & {"left", "right"}
        fix = "--format tsv-header with both columns, or --format tsv if this line is a pair"
        what = f"names {named!r} but no {({'left', 'right'} - {named}).pop()!r} column"
    else:
        fix = "--format tsv for headerless LEFT<TAB>RIGHT lines, or a header naming left and right"
        what = "is no header naming left and right (a headerless pair, or other column names?)"
    raise ValueError(f"{name}:{lineno}: the first line {what}: pass {fix}")


def _table_chunks(
    records: Iterable[PairRecord], size: int, keep: Callable[[int], bool] | None
) -> Iterator[tuple[int, list[PairRecord]]]:
    """`PairsFile.chunks` of a CSV or parquet file's records (parsed as they are read)."""
    chunk: list[PairRecord] = []
    index = 0
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            if keep is None or keep(index):
                yield index, chunk
            index, chunk = index + 1, []
    if chunk and (keep is None or keep(index)):
        yield index, chunk


class PairsFile:
    """Pair records read lazily from a file or stdin (formats in the module docstring).

    A `.csv` (`.csv.gz`) or `.parquet` name is read by `table_records` (unless `format` names a
    line format). Otherwise the format is `format`, or ("auto") what `pairs_format` reads from the name and the first
    non-blank line. Use it as a context manager, which closes the file.

    Args:
        path: the file; None or "-" reads stdin.
        format: "auto" or one of `PAIR_FORMATS`.

    Raises:
        FileNotFoundError, IsADirectoryError: the file does not exist, or is a folder.
        ValueError: a line is malformed or not UTF-8, a `.gz` file is not gzip or is cut
            short (each names file and line), or stdin is a terminal.
    """

    def __init__(self, path: str | Path | None, format: str = "auto") -> None:
        self._stack = ExitStack()
        self._given = format
        self._table: Generator[PairRecord, None, None] | None = None
        self.format = "tsv"  # or "tsv-header", "jsonl"; "table" for CSV and parquet
        self.columns: list[str] = []  # TSV header: every column; JSONL: the first object's keys
        table = format if format in TABLE_FORMATS else table_kind(path or "-")
        if format in TABLE_FORMATS and (path is None or str(path) == "-"):
            raise ValueError(f"--format {format} reads a file: pass its path, not stdin")
        if format in ("auto", *TABLE_FORMATS) and table in TABLE_FORMATS and path is not None:
            self.source, self.format = str(path), "table"  # CSV or parquet, by name or --format
            self.columns, self._table = table_records(path, table)  # type: ignore[arg-type]
            self._stack.callback(self._table.close)
            return
        if path is None or str(path) == "-":
            lines = _stdin_lines(
                "no pairs: pass a file (PAIRS or --pairs) or pipe LEFT<TAB>RIGHT lines on stdin"
            )
        else:
            lines = open_text(path, what="pairs file")
        self.source = lines.name
        self._stack.enter_context(lines)
        self._lines = _numbered_lines(lines)
        self._pending: tuple[int, str] | None = None
        try:
            self._read_format()
        except BaseException:
            self._stack.close()
            raise

    def _read_format(self) -> None:
        """Sets the format and columns (from the first non-blank line)."""
        self._pending = next(self._lines, None)
        self.format = pairs_format(self.source, self._pending, self._given)
        if self._pending is None:
            return
        lineno, text = self._pending
        if self.format == "jsonl":
            self.columns = list(self._json_object(lineno, text))
        elif self.format == "tsv-header":
            names = [c.strip() for c in text.rstrip("\r\n").split("\t")]
            self.columns = [c.lower() if c.lower() in ("left", "right") else c for c in names]
            missing = [c for c in ("left", "right") if c not in self.columns]
            if missing:
                raise ValueError(
                    f"{self.source}:{lineno}: --format tsv-header, but the header names no "
                    f"{' and no '.join(missing)} column"
                )
            twice = sorted({c for c in self.columns if self.columns.count(c) > 1})
            if twice:
                raise ValueError(f"{self.source}:{lineno}: the header names {twice} twice")
            self._pending = None

    @property
    def extra_columns(self) -> list[str]:
        """The input's columns (or first object's keys) other than left and right."""
        return [c for c in self.columns if c not in ("left", "right")]

    def __iter__(self) -> Iterator[PairRecord]:
        if self._table is not None:
            yield from self._table
            return
        for lineno, text in self._raw():
            yield self._parse(lineno, text)

    def chunks(
        self, size: int, keep: Callable[[int], bool] | None = None
    ) -> Iterator[tuple[int, list[PairRecord]]]:
        """The records `size` at a time, each chunk with its index (0, 1, ...); a chunk whose
        index `keep` refuses is counted, not parsed (another shard's, `attnmatch.bulk`)."""
        if size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {size}")
        if self._table is not None:
            yield from _table_chunks(self._table, size, keep)
            return
        raw: list[tuple[int, str]] = []
        index = 0
        for item in self._raw():
            raw.append(item)
            if len(raw) == size:
                if keep is None or keep(index):
                    yield index, [self._parse(*line) for line in raw]
                index, raw = index + 1, []
        if raw and (keep is None or keep(index)):
            yield index, [self._parse(*line) for line in raw]

    def _raw(self) -> Iterator[tuple[int, str]]:
        if self._pending is not None:
            yield self._pending
            self._pending = None
        yield from self._lines

    def __enter__(self) -> PairsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _parse(self, lineno: int, text: str) -> PairRecord:
        where = f"{self.source}:{lineno}"
        if self.format == "jsonl":
            obj = self._json_object(lineno, text)
            extra = {k: v for k, v in obj.items() if k not in ("left", "right")}
            return PairRecord(obj["left"], obj["right"], extra, lineno)
        if self.format == "tsv":
            fields = text.strip().split("\t")
            if len(fields) != 2:
                raise ValueError(f"{where}: expected LEFT<TAB>RIGHT, got {len(fields)} fields")
            return PairRecord(fields[0], fields[1], {}, lineno)
        fields = text.rstrip("\r\n").split("\t")
        if len(fields) != len(self.columns):
            raise ValueError(
                f"{where}: expected {len(self.columns)} tab-separated fields like the header "
                f"({', '.join(self.columns)}), got {len(fields)}"
            )
        row = dict(zip(self.columns, fields, strict=True))
        left, right = row.pop("left"), row.pop("right")
        return PairRecord(left, right, row, lineno)

    def _json_object(self, lineno: int, text: str) -> dict[str, Any]:
        where = f"{self.source}:{lineno}"
        obj = parse_json_line(text, where)
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object with left and right")
        for key in ("left", "right"):
            if key not in obj:
                raise ValueError(f'{where}: the object has no "{key}" key')
            if not isinstance(obj[key], str):
                raise ValueError(
                    f'{where}: "{key}" must be a string, got {type(obj[key]).__name__}'
                )
        return obj


def table_records(
    path: str | Path, kind: TableKind | None = None
) -> tuple[list[str], Generator[PairRecord, None, None]]:
    """The columns and pair records of a CSV (with a header) or parquet file: text columns
    `left` and `right`, the others kept as they are (`attnmatch.data.tabular`).

    Raises:
        DatasetFormatError: a header without left or right; later, while reading, a row that
            does not fit it or a left or right that is not text (naming file, line, column).
    """
    path = Path(path)
    columns, rows = read_table(path, kind=kind)
    if missing := [c for c in ("left", "right") if c not in columns]:
        rows.close()
        raise DatasetFormatError(
            f"{path}:1: the header lacks column(s) {missing}; it has {', '.join(columns)}"
        )

    def records() -> Generator[PairRecord, None, None]:
        for line, row in rows:
            left = text_value(path, line, "left", row.pop("left"))
            right = text_value(path, line, "right", row.pop("right"))
            yield PairRecord(left, right, row, line)

    return columns, records()


def _stdin_lines(terminal: str) -> TextLines:
    """stdin's lines (`TextLines`); ValueError with the message `terminal` when stdin is a
    terminal, where nothing was piped."""
    if sys.stdin.isatty():
        raise ValueError(terminal)
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream put in place of stdin (tests, notebooks)
        buffer = io.BytesIO(sys.stdin.read().encode("utf-8", errors="surrogateescape"))
    return TextLines(buffer, "stdin")


def _numbered_lines(lines: TextLines) -> Iterator[tuple[int, str]]:
    """(line number, text without its end) of the non-blank lines."""
    for text in lines:
        if text.strip():
            yield lines.lineno, text.rstrip("\r\n")


def read_candidates(path: str | Path | None) -> tuple[list[str], list[int]]:
    """The candidates of a file for `attnmatch rank`: one per line, stripped, blank lines
    skipped, UTF-8 (a byte order mark dropped).

    Args:
        path: the file; "-" (or None) reads stdin. A gzip file is refused (decompress it).

    Returns:
        The candidate texts, and the 1-based line number of each in the file.

    Raises:
        FileNotFoundError, IsADirectoryError: no such file, or a folder.
        ValueError: text that is not UTF-8 (naming file and line), gzip data, or stdin is a
            terminal.
    """
    if path is None or str(path) == "-":
        lines = _stdin_lines("no candidates: pass a file (-c) or pipe one per line on stdin")
    else:
        path = Path(path)
        check_file(path, "candidates file")
        with path.open("rb") as f:
            if f.read(len(GZIP_MAGIC)) == GZIP_MAGIC:
                raise ValueError(
                    f"{path}: gzip-compressed; a candidates file is plain text, one candidate a "
                    "line: decompress it (gunzip)"
                )
        lines = open_text(path)
    with lines:
        numbered = [(n, text.strip()) for n, text in _numbered_lines(lines)]
    return [text for _, text in numbered], [n for n, _ in numbered]


class ChunkScorer(Protocol):
    """Scores chunks of records in order: `matcher_scorer` here, `bulk.WorkerPool` across
    processes."""

    def __call__(
        self, chunks: Iterable[tuple[int, list[PairRecord]]]
    ) -> Iterator[tuple[int, list[PairRecord], np.ndarray, list[str] | None]]: ...


def matcher_scorer(matcher: Matcher | ExportedMatcher) -> ChunkScorer:
    """A `ChunkScorer` running `matcher` in this process: one `predict_pairs` per chunk."""

    def score(
        chunks: Iterable[tuple[int, list[PairRecord]]],
    ) -> Iterator[tuple[int, list[PairRecord], np.ndarray, list[str] | None]]:
        for index, records in chunks:
            predictions = matcher.predict_pairs([(r.left, r.right) for r in records])
            yield index, records, predictions.scores, predictions.labels

    return score


def score_chunks(
    matcher: Matcher | ExportedMatcher,
    records: PairsFile,
    chunk_size: int = CHUNK_SIZE,
    *,
    on_first: Callable[[list[PairRecord]], None] | None = None,
    scorer: ChunkScorer | None = None,
    keep: Callable[[int], bool] | None = None,
) -> Iterator[ScoredChunk]:
    """Scores records `chunk_size` at a time, one forward pass per chunk for scores and labels.

    The chunks are the same whoever scores them (`scorer`: this process, or worker processes,
    `attnmatch.bulk`), so every way of scoring a file gives the same batches and bytes.

    Args:
        on_first: called with the first chunk before it is scored (e.g. to warn about words
            the model does not know).
        scorer: scores the chunks, in order (default: `matcher` in this process).
        keep: which chunk indices to score (default: all; a shard's, `attnmatch.bulk`).
    """
    scorer = scorer if scorer is not None else matcher_scorer(matcher)
    chunks = records.chunks(chunk_size, keep)

    def announced() -> Iterator[tuple[int, list[PairRecord]]]:
        for n, (index, chunk) in enumerate(chunks):
            if n == 0 and on_first is not None:
                on_first(chunk)
            yield index, chunk

    for index, chunk, scores, labels in scorer(announced()):
        yield ScoredChunk(_finite(chunk, scores, records.source), scores, labels, index)


def _finite(records: list[PairRecord], scores: np.ndarray, source: str) -> list[PairRecord]:
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"{source}:{records[i].line}: the model scored this pair {scores[i]} (not a finite "
            f"number; {len(bad)} of the {len(records)} pairs of its chunk): the model is broken "
            "(check its weights), nothing more is written"
        )
    return records


def format_score(value: float) -> str:
    """A score as written to stdout and files: 6 significant digits."""
    return f"{float(value):.6g}"


@dataclass(frozen=True)
class ScoredLayout:
    """The columns of a scored file (module docstring): JSONL, or TSV with a header."""

    as_jsonl: bool
    extra: list[str]
    score_key: str
    label_key: str
    classify: bool

    @classmethod
    def of(
        cls, matcher: Matcher | ExportedMatcher, pairs: PairsFile, output: str | Path
    ) -> ScoredLayout:
        extra = pairs.extra_columns
        return cls(
            as_jsonl=Path(output).name.endswith(".jsonl"),
            extra=extra,
            score_key="predicted_score" if "score" in extra else "score",
            label_key="predicted_label" if "label" in extra else "label",
            classify=matcher.task.has_labels,
        )

    def header(self) -> str:
        """The first line ("" for JSONL)."""
        if self.as_jsonl:
            return ""
        names = ["left", "right", *self.extra, self.score_key] + [self.label_key] * self.classify
        return "\t".join(names) + "\n"

    def lines(self, chunk: ScoredChunk, source: str) -> str:
        """The chunk's lines, one a pair, each ending in a line break."""
        lines = []
        for i, record in enumerate(chunk.records):
            predicted: dict[str, Any] = {self.score_key: float(format_score(chunk.scores[i]))}
            if chunk.labels is not None:
                predicted[self.label_key] = chunk.labels[i]
            if self.as_jsonl:
                row = {"left": record.left, "right": record.right, **record.extra}
                lines.append(json.dumps(row | predicted, ensure_ascii=False, allow_nan=False))
            else:
                lines.append(_tsv_line(source, record, self.extra, predicted))
        return "".join(line + "\n" for line in lines)


def write_scored(
    matcher: Matcher | ExportedMatcher,
    pairs: PairsFile,
    output: str | Path,
    *,
    chunk_size: int = CHUNK_SIZE,
    on_chunk: Callable[[int], None] | None = None,
    on_first: Callable[[list[PairRecord]], None] | None = None,
    scorer: ChunkScorer | None = None,
) -> int:
    """Scores every pair of `pairs` into `output`: JSONL when its name ends in .jsonl, TSV
    otherwise (columns in the module docstring); `output` is replaced only when all went well.

    Args:
        on_chunk: called with the number of pairs of each chunk once it is written.
        on_first, scorer: as `score_chunks`.

    Returns:
        The number of pairs scored.
    """
    layout = ScoredLayout.of(matcher, pairs, output)
    done = 0
    with open_text_atomic(output) as f:
        f.write(layout.header())
        for chunk in score_chunks(matcher, pairs, chunk_size, on_first=on_first, scorer=scorer):
            f.write(layout.lines(chunk, pairs.source))
            done += len(chunk.records)
            if on_chunk is not None:
                on_chunk(len(chunk.records))
    return done


def _tsv_line(
    source: str, record: PairRecord, columns: list[str], predicted: dict[str, Any]
) -> str:
    where = f"{source}:{record.line}"
    unknown = [k for k in record.extra if k not in columns]
    if unknown:
        raise ValueError(
            f"{where}: keys {unknown} are not in the first object ({', '.join(columns) or '-'}): "
            "write JSONL (-o OUT.jsonl) to keep records with varying keys"
        )
    cells = [record.left, record.right, *(_cell(record.extra.get(c)) for c in columns)]
    for cell in cells:
        if "\t" in cell or "\n" in cell or "\r" in cell:
            raise ValueError(
                f"{where}: a value holds a tab or line break, which TSV cannot keep: write JSONL "
                "(-o OUT.jsonl)"
            )
    values = [format_score(v) if isinstance(v, float) else str(v) for v in predicted.values()]
    return "\t".join(cells + values)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, allow_nan=False)
    )
