"""Text files read alike: UTF-8 one line at a time, `.gz` transparently, every error at its line.

Every reader of a file a user gives (the corpus loaders, your pairs, the files `attnmatch score`
and `attnmatch rank` read) opens it with `open_text` (or wraps stdin in `TextLines`), so that
they all agree on:

- encoding: UTF-8, decoded line by line, so that a byte that is not UTF-8 is reported on its
  own line: `pairs.tsv:7: not UTF-8 text (byte 0xff at column 3: invalid start byte); save the
  file as UTF-8`;
- a UTF-8 byte order mark at the start of the file is dropped: the first line reads as if it
  were not there, and line numbers do not move;
- line ends: `\\n`, `\\r\\n` and a lone `\\r` end a line (as `open(..., newline="")` has it) and
  stay on it, so parsers strip them; line numbers count lines as an editor does, from 1;
- compression: a name ending in `.gz` is read as gzip. A file so named that is not gzip, and a
  truncated or corrupt stream, are errors naming the file (and the line reached);
- a missing file or a folder where a file is expected: `FileNotFoundError` or
  `IsADirectoryError` naming the path.

A line of JSON (JSONL) is parsed strictly by `parse_json_line`: `NaN`, `Infinity`, a number
beyond a float's range and a key given twice in one object are errors, so that what is read can
be written back as valid JSON.

Format errors are `DatasetFormatError` (a ValueError); read errors of the disk stay `OSError`,
their message naming the file and line.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections import deque
from pathlib import Path
from typing import Any, Protocol

GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"


class DatasetFormatError(ValueError):
    """A data file (a corpus file, your pairs, a file to score or rank) is not readable text or
    does not follow its format; the message names the file and line."""


class ByteLines(Protocol):
    """What `TextLines` reads: a binary stream of lines (an open file, a GzipFile, stdin)."""

    def readline(self) -> bytes: ...

    def close(self) -> None: ...


class TextLines:
    """The lines of a binary stream decoded one at a time, counted (see the module docstring).

    Iterate it, or call `readline` (which returns "" at the end). Use it as a context manager,
    which closes the stream.

    Args:
        stream: the bytes, e.g. an open file or `sys.stdin.buffer`.
        name: the file's name in messages (its path, or "stdin").
    """

    def __init__(self, stream: ByteLines, name: str) -> None:
        self.name = name
        self.lineno = 0  # lines returned so far
        self._stream = stream
        self._pending: deque[str] = deque()  # the rest of a line split at lone "\r"

    def readline(self) -> str:
        """The next line with its end, "" at the end of the file."""
        if not self._pending:
            raw = self._read_raw()
            if not raw:
                return ""
            text = self._decode(raw)
            if not text:  # a byte order mark and nothing else
                return ""
            end = 2 if text.endswith("\r\n") else 1 if text.endswith(("\n", "\r")) else 0
            if "\r" in text[: len(text) - end]:  # a lone "\r" ends a line too
                self._pending.extend(_split_at_cr(text))
            else:
                self._pending.append(text)
        self.lineno += 1
        return self._pending.popleft()

    def readlines(self) -> list[str]:
        return list(self)

    def __iter__(self) -> TextLines:
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> TextLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_raw(self) -> bytes:
        try:
            return self._stream.readline()
        except (OSError, EOFError, zlib.error) as e:
            raise self._read_error(e) from None

    def _read_error(self, e: OSError | EOFError | zlib.error) -> Exception:
        where = f"{self.name}:{self.lineno + 1}"
        if isinstance(e, gzip.BadGzipFile):
            return DatasetFormatError(
                f"{where}: corrupt gzip data ({e}); copy or download the file again"
            )
        if isinstance(e, EOFError | zlib.error):
            what = "truncated" if isinstance(e, EOFError) else "corrupt"
            return DatasetFormatError(
                f"{where}: the gzip data is {what} ({e}); copy or download the file again"
            )
        return OSError(f"{where}: cannot read: {e.strerror or e}")

    def _decode(self, raw: bytes) -> str:
        if self.lineno == 0 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            column = len(raw[: e.start].decode("utf-8", errors="replace")) + 1
            raise DatasetFormatError(
                f"{self.name}:{self.lineno + 1}: not UTF-8 text (byte {raw[e.start]:#04x} at "
                f"column {column}: {e.reason}); save the file as UTF-8"
            ) from None


def _split_at_cr(text: str) -> list[str]:
    """`text` split after every "\\r" that no "\\n" follows, each piece keeping its end."""
    pieces = []
    start = 0
    for i, char in enumerate(text):
        if char == "\r" and text[i + 1 : i + 2] != "\n":
            pieces.append(text[start : i + 1])
            start = i + 1
    if start < len(text):
        pieces.append(text[start:])
    return pieces


class _StrictJSONError(ValueError):
    """A JSON text that Python's parser accepts but JSON does not (NaN, a repeated key)."""


def _refuse_constant(name: str) -> Any:
    raise _StrictJSONError(f"{name} is not valid JSON (write a number or null)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _StrictJSONError(f"the number {text[:40]} is beyond a float's range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _StrictJSONError(f"the key {key[:80]!r} is given twice in one object")
        obj[key] = value
    return obj


def parse_json_line(text: str, where: str) -> Any:
    """One line of JSONL parsed strictly: NaN, Infinity, numbers beyond a float's range and a
    key given twice in one object are refused, so that what is read can be written back as
    valid JSON.

    Args:
        text: the line.
        where: its place for messages, "file:line".

    Raises:
        DatasetFormatError: not valid JSON, naming `where` (and the column).
    """
    try:
        return json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except json.JSONDecodeError as e:
        raise DatasetFormatError(f"{where}: not valid JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:
        raise DatasetFormatError(f"{where}: JSON nested too deeply") from None
    except ValueError as e:  # _StrictJSONError, or an integer of too many digits
        raise DatasetFormatError(f"{where}: not valid JSON: {e}") from None


def check_file(path: Path, what: str = "file") -> None:
    """Raises FileNotFoundError or IsADirectoryError, naming `path`, unless it is a file.

    Args:
        what: what the file is, for the message ("pairs file", "candidates file").
    """
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; expected a {what}")
    if not path.is_file():
        if path.exists():
            raise FileNotFoundError(f"{path} is not a regular {what}")
        raise FileNotFoundError(f"{what} not found: {path}")


def open_text(path: str | Path, *, what: str = "file") -> TextLines:
    """Opens a plain or `.gz` text file as UTF-8 lines (see the module docstring).

    Args:
        path: the file; a name ending in `.gz` is read as gzip.
        what: what the file is, for the message of a missing file.

    Raises:
        FileNotFoundError, IsADirectoryError: no such file, or a folder.
        DatasetFormatError: a `.gz` name on a file that is not gzip; later, while reading,
            text that is not UTF-8 or gzip data that is truncated or corrupt.
    """
    path = Path(path)
    check_file(path, what)
    if not path.name.endswith(".gz"):
        return TextLines(path.open("rb"), str(path))
    with path.open("rb") as raw:
        head = raw.read(1024)
    if head and not head.startswith(GZIP_MAGIC):
        plain = "; it is plain text: drop .gz from its name" if _looks_like_text(head) else ""
        raise DatasetFormatError(
            f"{path}: not gzip data although the name ends in .gz (it starts with "
            f"{head[:8]!r}){plain}"
        )
    return TextLines(gzip.open(path, "rb"), str(path))


def _looks_like_text(head: bytes) -> bool:
    """Whether `head` (the first bytes of a file) is UTF-8 text without control characters."""
    text = head.decode("utf-8", errors="ignore")
    return len(text.encode("utf-8")) >= len(head) - 3 and all(
        c.isprintable() or c in "\t\r\n" for c in text
    )
