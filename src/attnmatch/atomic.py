"""Atomic writes: a crash never leaves a half-written checkpoint, model or result behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file in the same folder and `os.replace`."""
    with _replacing(path, "wb") as f:
        f.write(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


@contextmanager
def open_text_atomic(path: str | Path) -> Iterator[TextIO]:
    """A UTF-8 text file to write in pieces (e.g. a stream of results); it replaces `path`
    through `os.replace` when the body succeeds, and is removed when the body raises."""
    with _replacing(path, "w") as f:
        yield f


@contextmanager
def _replacing(path: str | Path, mode: str) -> Iterator[Any]:
    """A temporary file beside `path`, opened in `mode`, flushed to disk and moved onto `path`
    when the body succeeds; removed when it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    binary = "b" in mode
    try:
        with os.fdopen(
            fd, mode, encoding=None if binary else "utf-8", newline=None if binary else ""
        ) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yields a temporary sibling folder; on success it replaces `path` as a whole.

    If the body raises, `path` is left as it was and the temporary folder is removed. The old
    folder is moved aside before the new one is renamed in, then deleted, so at every moment
    either the old or the new complete folder exists.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if path.exists():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
