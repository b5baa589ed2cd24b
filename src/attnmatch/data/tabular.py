"""Pairs in the formats they are exported in: CSV with a header, JSONL and parquet, read as rows.

Your pairs folders (`attnmatch.data.datasets.pairs`) and `attnmatch score` read these beside TSV;
this module reads each format into the same thing, the table's column names and its rows as
`(line, {column: value})`, so that one set of column rules applies to all of them:

- `.csv` (and `.csv.gz`): UTF-8 (`attnmatch.data.textfile`: byte order mark dropped, every error
  at its line), comma-separated, the first row names the columns, fields quoted as Python's
  `csv` module and spreadsheets write them (a quoted field may hold commas, quotes doubled,
  newlines). A row's line is the line it starts on; blank lines are skipped. Every value is text.
- `.jsonl` (and `.jsonl.gz`): one JSON object per line, parsed strictly (`parse_json_line`); the
  first object's keys are the columns and every other object must have the same keys. Values
  keep their JSON type (a label may be a number).
- `.parquet`: read with pyarrow (imported only here, only for a parquet file). Rows are numbered
  as a spreadsheet numbers them: the header is row 1, the first pair row 2, so that a table
  exported from one format to another keeps its numbers. A null value is an error at its row.

Every error is a `DatasetFormatError` naming the file and line (or row) and, for a value, the
column: `train.csv:7: expected 3 comma-separated fields like the header (left, right, label),
got 2`; `train.parquet:12: column 'label' is null`.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any, Literal

from attnmatch.data.textfile import DatasetFormatError, check_file, open_text, parse_json_line

TableKind = Literal["tsv", "csv", "jsonl", "parquet"]
# The names a table file may end in, in the order a folder's files are looked for.
SUFFIXES: tuple[str, ...] = (
    ".tsv",
    ".tsv.gz",
    ".csv",
    ".csv.gz",
    ".jsonl",
    ".jsonl.gz",
    ".parquet",
)
Row = tuple[int, dict[str, Any]]  # (line or spreadsheet row number, {column: value})
Rows = Generator[Row, None, None]
PAIR_COLUMNS = ("left", "right", "label", "group")  # what `columns` may rename
PARQUET_BATCH_ROWS = 4096  # rows converted to Python at a time


def table_kind(path: str | Path) -> TableKind | None:
    """The format a file's name says (`.gz` aside), None for another name."""
    name = Path(path).name.lower()
    for kind in ("tsv", "csv", "jsonl"):
        if name.endswith((f".{kind}", f".{kind}.gz")):
            return kind  # type: ignore[return-value]
    return "parquet" if name.endswith(".parquet") else None


def read_table(
    path: str | Path, *, what: str = "pairs file", kind: TableKind | None = None
) -> tuple[list[str], Rows]:
    """The columns and rows of a CSV, JSONL or parquet file (the format `kind`, else from its
    name).

    Rows are read lazily; iterate them to the end (or close the iterator) to close the file.

    Raises:
        FileNotFoundError, IsADirectoryError: no such file.
        ValueError: the name is not .csv, .jsonl or .parquet (`.gz` allowed but for parquet).
        DatasetFormatError: an empty file, a header naming a column twice, a row that does not
            fit the header, text that is not UTF-8 or a file that is not parquet, naming
            file and line; later, while reading, a row that does not parse.
    """
    path = Path(path)
    check_file(path, what)
    kind = kind or table_kind(path)
    if kind == "csv":
        return _csv_table(path, what)
    if kind == "jsonl":
        return _jsonl_table(path, what)
    if kind == "parquet":
        return _parquet_table(path)
    raise ValueError(f"{path}: not a .csv, .jsonl or .parquet file")


def _csv_table(path: Path, what: str) -> tuple[list[str], Rows]:
    lines = open_text(path, what=what)
    reader = csv.reader(lines, strict=True)
    try:
        first = _csv_row(path, reader)
        if first is None:
            raise DatasetFormatError(f"{path}: empty file; the first line must name the columns")
        header = [c.strip() for c in first[1]]
        _check_distinct(path, first[0], header)
    except BaseException:
        lines.close()
        raise
    return header, _csv_rows(path, lines, reader, header)


def _csv_row(path: Path, reader: Any) -> tuple[int, list[str]] | None:
    """The next non-blank row and the line it starts on, None at the end."""
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return None
        except csv.Error as e:
            raise DatasetFormatError(f"{path}:{start}: not valid CSV: {e}") from None
        if any(field.strip() for field in row):
            return start, row


def _csv_rows(path: Path, lines: Any, reader: Any, header: list[str]) -> Rows:
    with lines:
        while (found := _csv_row(path, reader)) is not None:
            start, row = found
            if len(row) != len(header):
                raise DatasetFormatError(
                    f"{path}:{start}: expected {len(header)} comma-separated fields like the "
                    f"header ({', '.join(header)}), got {len(row)}"
                )
            yield start, dict(zip(header, row, strict=True))


def _jsonl_table(path: Path, what: str) -> tuple[list[str], Rows]:
    lines = open_text(path, what=what)
    try:
        first = _next_object(path, lines)
    except BaseException:
        lines.close()
        raise
    if first is None:
        lines.close()
        raise DatasetFormatError(f"{path}: empty file; expected one JSON object per line")
    header = list(first[1])
    return header, _jsonl_rows(path, lines, header, first)


def _next_object(path: Path, lines: Any) -> Row | None:
    for text in lines:
        if not text.strip():
            continue
        where = f"{path}:{lines.lineno}"
        obj = parse_json_line(text, where)
        if not isinstance(obj, dict):
            raise DatasetFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        return lines.lineno, obj
    return None


def _jsonl_rows(path: Path, lines: Any, header: list[str], first: Row) -> Rows:
    with lines:
        row: Row | None = first
        while row is not None:
            lineno, obj = row
            if set(obj) != set(header):
                raise DatasetFormatError(
                    f"{path}:{lineno}: the keys {sorted(obj)} differ from the first object's "
                    f"{sorted(header)}; every line has the same keys"
                )
            yield row
            row = _next_object(path, lines)


def _parquet_table(path: Path) -> tuple[list[str], Rows]:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError(
            f"{path}: reading parquet needs pyarrow: pip install 'attnmatch[formats]'",
            name="pyarrow",
        ) from e
    try:
        file = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises ArrowInvalid (a ValueError) or OSError
        raise DatasetFormatError(f"{path}: not a readable parquet file ({e})") from None
    header = list(file.schema_arrow.names)
    _check_distinct(path, 1, header)
    return header, _parquet_rows(path, file, header)


def _parquet_rows(path: Path, file: Any, header: list[str]) -> Rows:
    row = 2  # spreadsheet numbering: the header is row 1
    try:
        for batch in file.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            columns = {name: batch.column(name).to_pylist() for name in header}
            for i in range(batch.num_rows):
                values = {name: columns[name][i] for name in header}
                for name, value in values.items():
                    if value is None:
                        raise DatasetFormatError(f"{path}:{row + i}: column {name!r} is null")
                yield row + i, values
            row += batch.num_rows
    finally:
        file.close()


def _check_distinct(path: Path, line: int, header: list[str]) -> None:
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise DatasetFormatError(f"{path}:{line}: column(s) {twice} named twice")


def text_value(path: Path, line: int, column: str, value: Any) -> str:
    """A text field of a row: a string as it is (an integer id, for a group, as its digits).

    Raises:
        DatasetFormatError: another type, naming file, line and column.
    """
    if isinstance(value, str):
        return value
    if column == "group" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise DatasetFormatError(
        f"{path}:{line}: column {column!r} must be text, got {type(value).__name__} {value!r}"
    )


def table_columns(
    data: Any,
    name: str,
    *,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    columns: dict[str, str] | None = None,
) -> dict[str, list[Any]] | None:
    """The columns of a pandas DataFrame or a Hugging Face `datasets.Dataset` as lists.

    Neither package is imported here: an object is one of them only when its package is
    already loaded (the caller built it), so `datasets` stays an optional extra.

    Args:
        data: the table; anything else gives None.
        name: what it is, for messages ("train").
        required, optional: the columns read (optional ones only when present).
        columns: {our column: the table's column}, for tables whose columns are named otherwise,
            e.g. {"left": "question", "right": "answer"}; a pairs column not read here (label,
            when scoring) may be named too, and is ignored.

    Raises:
        ValueError: a required column missing, a mapping of a column that is not read, a
            `DatasetDict` (one split is meant), or `columns` given for data that is no table.
    """
    wanted = required + optional
    mapping = {c: c for c in wanted} | dict(columns or {})
    if unknown := sorted(set(mapping) - {*wanted, *PAIR_COLUMNS}):
        raise ValueError(
            f"{name}: columns maps {unknown}; the columns are {', '.join(PAIR_COLUMNS)}"
        )
    datasets = sys.modules.get("datasets")
    pandas = sys.modules.get("pandas")
    if datasets is not None and isinstance(data, datasets.DatasetDict):
        splits = ", ".join(map(repr, data))
        raise ValueError(f"{name}: a DatasetDict ({splits}); pass one split, e.g. data['train']")
    if datasets is not None and isinstance(data, datasets.Dataset):
        kind, have = "Dataset", list(data.column_names)
    elif pandas is not None and isinstance(data, pandas.DataFrame):
        kind, have = "DataFrame", [str(c) for c in data.columns]
    elif columns:
        raise ValueError(f"{name}: columns is for a DataFrame or a datasets.Dataset")
    else:
        return None
    if missing := [mapping[c] for c in required if mapping[c] not in have]:
        raise ValueError(
            f"{name}: the {kind} lacks column(s) {missing} (it has {have}); name yours with "
            "columns={'left': ..., 'right': ..., 'label': ...}"
        )
    read = [c for c in wanted if mapping[c] in have]
    if kind == "Dataset":
        values = data.select_columns([mapping[c] for c in read]).to_dict()
        return {c: list(values[mapping[c]]) for c in read}
    return {c: data[mapping[c]].tolist() for c in read}
