"""Corpora to index: passages with ids, read from a user's file.

Formats, by the file's name (a `.gz` after it is read as gzip, `attnmatch.data.textfile`):

- `.jsonl`: one JSON object a line with "id" and "text" (other keys are ignored);
- `.tsv`: a header line naming the columns "id" and "text", then one passage a line;
- anything else: one passage a line, its id the line number (from 1).

Every passage has a non-empty text and an id no other passage has: an empty text, a missing
field and a duplicate id are errors naming the file and line (a duplicate also names the line of
the first).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from attnmatch.data.textfile import DatasetFormatError, open_text, parse_json_line


@dataclass(frozen=True, slots=True)
class Passage:
    """One passage of a corpus: its id (unique in the corpus) and its text."""

    id: str
    text: str


def corpus_format(path: str | Path) -> str:
    """ "jsonl", "tsv" or "lines", from the file's name (`.gz` dropped)."""
    name = Path(path).name.lower().removesuffix(".gz")
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.endswith(".tsv"):
        return "tsv"
    return "lines"


def read_corpus(path: str | Path) -> list[Passage]:
    """The passages of a corpus file (module docstring).

    Raises:
        FileNotFoundError: no such file.
        DatasetFormatError: a line that does not parse, an empty text, a duplicate id, or a
            corpus without passages (file and line named).
    """
    path = Path(path)
    kind = corpus_format(path)
    with open_text(path, what="corpus") as lines:
        if kind == "jsonl":
            rows = _jsonl_rows(lines, str(path))
        elif kind == "tsv":
            rows = _tsv_rows(lines, str(path))
        else:
            rows = _line_rows(lines, str(path))
        passages = check_passages(rows, str(path))
    if not passages:
        raise DatasetFormatError(f"{path}: the corpus is empty (no passages to index)")
    return passages


def check_passages(
    rows: Iterable[tuple[int, str, str]], where: str, known: dict[str, int] | None = None
) -> list[Passage]:
    """Passages from (line, id, text) rows, refusing an empty text and a duplicate id (also
    one of `known`: ids already indexed, with their line there, or -1 when unknown)."""
    seen: dict[str, int] = dict(known or {})
    out: list[Passage] = []
    for line, pid, text in rows:
        if not text.strip():
            raise DatasetFormatError(f"{where}:{line}: passage {pid!r} has an empty text")
        if pid in seen:
            first = seen[pid]
            at = f"line {first}" if first > 0 else "the index"
            raise DatasetFormatError(
                f"{where}:{line}: duplicate passage id {pid!r} (already at {at}); ids must be unique"
            )
        seen[pid] = line
        out.append(Passage(pid, text))
    return out


def _line_rows(lines: Iterable[str], where: str) -> Iterator[tuple[int, str, str]]:
    for number, line in enumerate(lines, 1):
        yield number, str(number), line.rstrip("\r\n")


def _tsv_rows(lines: Iterable[str], where: str) -> Iterator[tuple[int, str, str]]:
    columns: list[str] | None = None
    for number, raw in enumerate(lines, 1):
        fields = raw.rstrip("\r\n").split("\t")
        if columns is None:
            columns = fields
            missing = [c for c in ("id", "text") if c not in columns]
            if missing:
                raise DatasetFormatError(
                    f"{where}:1: the header has no column {' or '.join(map(repr, missing))} "
                    f"(found {', '.join(map(repr, columns))}); a TSV corpus needs 'id' and 'text'"
                )
            continue
        if len(fields) != len(columns):
            raise DatasetFormatError(
                f"{where}:{number}: {len(fields)} fields, the header has {len(columns)}"
            )
        row = dict(zip(columns, fields, strict=True))
        yield number, row["id"], row["text"]


def _jsonl_rows(lines: Iterable[str], where: str) -> Iterator[tuple[int, str, str]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        row = parse_json_line(line, f"{where}:{number}")
        if not isinstance(row, dict):
            raise DatasetFormatError(f"{where}:{number}: expected a JSON object with id and text")
        for key in ("id", "text"):
            if key not in row:
                raise DatasetFormatError(f"{where}:{number}: no field {key!r}")
        pid, text = row["id"], row["text"]
        if isinstance(pid, bool) or not isinstance(pid, str | int):
            raise DatasetFormatError(f"{where}:{number}: field 'id' must be a string or integer")
        if not isinstance(text, str):
            raise DatasetFormatError(f"{where}:{number}: field 'text' must be a string")
        yield number, str(pid), text
