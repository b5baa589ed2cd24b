"""Files of the command line: outputs checked before any work is done, and errors of reading or
writing a file turned into one line that names the file (or the option)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer


def _first_existing(path: Path) -> Path:
    """`path` or its nearest existing ancestor."""
    here = Path(os.path.abspath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def _check_writable_parent(path: Path, option: str) -> None:
    parent = _first_existing(path.parent)
    if not parent.is_dir():
        raise typer.BadParameter(f"{path}: {parent} is a file, not a folder", param_hint=option)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise typer.BadParameter(
            f"{path}: cannot write into {parent} (permission denied)", param_hint=option
        )


def check_output_file(path: Path, option: str) -> None:
    """Before any work: `path` can be written as a file (it is not a folder, its folder is a
    folder we may write into)."""
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a folder; give a file name", param_hint=option)
    _check_writable_parent(path, option)


def check_output_folder(path: Path, option: str) -> None:
    """Before any work: `path` can be a folder of outputs (it is not a file; the nearest folder
    that exists may be written into)."""
    if path.exists() and not path.is_dir():
        raise typer.BadParameter(f"{path} is a file; give a folder", param_hint=option)
    here = _first_existing(path)
    if not here.is_dir():
        raise typer.BadParameter(f"{path}: {here} is a file, not a folder", param_hint=option)
    if not os.access(here, os.W_OK | os.X_OK):
        raise typer.BadParameter(
            f"{path}: cannot write into {here} (permission denied)", param_hint=option
        )


class OutputError(OSError):
    """An output could not be written; the message names the option and the path."""


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Errors of writing `path` (a full disk, a read-only folder) name the option and the path."""
    try:
        yield
    except OutputError:
        raise
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        reason = e.strerror or str(e) or type(e).__name__
        raise OutputError(f"{option} {path}: cannot write: {reason}") from e


# Errors of reading a file that say nothing of which file: `reading` adds it.
def describe_error(error: BaseException) -> str:
    """One line saying what is wrong, without the file (the caller knows it)."""
    import gzip
    import zipfile

    if isinstance(error, UnicodeDecodeError):
        where = ""
        if isinstance(error.object, bytes | bytearray):
            line = error.object[: error.start].count(b"\n") + 1
            where = f" on line {line}"
        return f"not {error.encoding} text{where} (byte {error.start}: {error.reason})"
    if isinstance(error, json.JSONDecodeError):
        return f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
    if isinstance(error, RecursionError):
        return "nested too deeply (past Python's recursion limit)"
    if isinstance(error, MemoryError):
        return "ran out of memory (is it the right file?)"
    if isinstance(error, zipfile.BadZipFile):
        return f"not a valid zip file ({error})"
    if isinstance(error, gzip.BadGzipFile):
        return f"not a valid gzip file ({error})"
    if isinstance(error, EOFError):
        return "the file ends early (truncated or corrupt)" + (f": {error}" if str(error) else "")
    if type(error).__name__ == "SafetensorError":
        return f"not a valid safetensors file ({error})"
    if isinstance(error, OSError):
        reason = error.strerror or str(error) or type(error).__name__
        names = [n for n in (error.filename, error.filename2) if n is not None]
        return f"{' -> '.join(map(str, names))}: {reason}" if names else reason
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error) or type(error).__name__


def _corrupt_read_errors() -> tuple[type[BaseException], ...]:
    import gzip
    import zipfile

    kinds: list[type[BaseException]] = [
        UnicodeDecodeError,
        json.JSONDecodeError,
        RecursionError,
        MemoryError,
        zipfile.BadZipFile,
        gzip.BadGzipFile,
        EOFError,
    ]
    try:
        from safetensors import SafetensorError

        kinds.append(SafetensorError)
    except ImportError:  # pragma: no cover - safetensors is a dependency
        pass
    return tuple(kinds)


@contextmanager
def reading(what: object) -> Iterator[None]:
    """Errors of reading `what` (a model folder, a config file, a dataset) that do not say which
    file (a decoding error, a corrupt zip or gzip or safetensors file, a truncated file, a file
    nested too deeply, an OS error without a file name) become one ValueError naming it."""
    try:
        yield
    except _corrupt_read_errors() as e:
        raise ValueError(f"{what}: {describe_error(e)}") from e
    except OSError as e:
        # Only the system's own errors (an errno, no file name): ours carry their message.
        bare = e.errno is not None and e.filename is None and str(what) not in str(e)
        if not bare or isinstance(e, BrokenPipeError | OutputError):
            raise
        raise OSError(f"{what}: {describe_error(e)}") from e
