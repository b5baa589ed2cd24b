"""Atomic writes: a crash never leaves a half-written checkpoint, model or result behind.

A file or folder NAME is written as a temporary sibling, `.NAME.<pid>-<random>.tmp`, and moved
onto NAME when complete:

- a file (`write_bytes_atomic`, `write_text_atomic`, `open_text_atomic`) through `os.replace`;
- a folder (`atomic_directory`) through one `renameat2(RENAME_EXCHANGE)` on Linux, which swaps
  the new folder and the old one at once, so that NAME exists at every moment. Where the
  exchange is not available (another OS, or a filesystem that refuses it), the old folder is
  first moved aside to `.NAME.old-<pid>`, then the new one is renamed in.

A process killed in the middle leaves its temporary or set-aside copies. `recover(NAME)` puts
a set-aside folder back when NAME is missing and removes the leftovers; every atomic write
calls it for its own target first, which touches only leftovers of processes that are gone
(`sweep_folder` clears a whole folder the caller owns, e.g. a locked run folder).

Modes: what is written gets the modes a plain `open()` or `mkdir()` would give under the
current umask (a replaced file keeps its mode, as `open()` does), not the private 0600/0700
of `tempfile`.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


@contextmanager
def file_lock(path: str | Path, *, blocking: bool = True) -> Iterator[bool]:
    """An exclusive advisory lock (`fcntl.flock`) on `path`, created if missing, for the block;
    yields False when `blocking` is False and another process holds it. Where there is no
    fcntl (Windows) it yields True without locking."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux/macOS
        fcntl = None  # type: ignore[assignment]
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
        yield True
    finally:
        os.close(fd)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file in the same folder and `os.replace`.

    Raises:
        OSError: the file cannot be written (no space, read-only folder, ...); the message
            names `path`, and `path` is left as it was.
    """
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
    _make_parent(path)
    recover(path)
    tmp = _temp_path(path)
    binary = "b" in mode
    try:
        fd = _create_file(tmp)
        with os.fdopen(
            fd, mode, encoding=None if binary else "utf-8", newline=None if binary else ""
        ) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if path.is_file():  # `open()` keeps the mode of a file it overwrites
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and _is_write_error(e, tmp, path):
            raise write_error(path, e) from e
        raise


@contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yields a new temporary sibling folder; on success it replaces `path` as a whole.

    If the body raises, `path` is left as it was and the temporary folder is removed. The swap
    is one atomic exchange where the OS offers it, else two renames (module docstring); either
    way the old or the new complete folder exists after a crash at any point, and `recover`
    (called by the next write of `path`) restores a folder left set aside.

    Raises:
        OSError: the folder cannot be written (no space, read-only parent, ...); the message
            names `path`, and `path` is left as it was.
    """
    path = Path(path)
    _make_parent(path)
    recover(path)
    tmp = _temp_path(path)
    try:
        tmp.mkdir(0o777)  # the umask applies, as to a plain mkdir
        yield tmp
        _plain_modes(tmp)
        _swap_in(tmp, path)
    except BaseException as e:
        _remove(tmp)
        if isinstance(e, OSError) and _is_write_error(e, tmp, path):
            raise write_error(path, e) from e
        if (os_error := _foreign_os_error(e)) is not None:
            raise write_error(path, os_error) from e
        raise


# ----------------------------------------------------------------------------- recovery

# `.NAME.<pid>-<hex>.tmp` (a temporary copy) or `.NAME.old-<pid>` (a folder set aside).
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?:(?P<pid>\d+)-[0-9a-f]+\.tmp|old-(?P<old>\d+))")
# Also the temporary names of earlier versions (`tempfile`: `.NAME.<random>.tmp`).
_LEFTOVER_ANY = re.compile(r"\.(?P<name>.+)\.(?:[A-Za-z0-9_-]+\.tmp|old-(?P<old>\d+))")


def is_leftover(name: str) -> bool:
    """Whether a file name is one of the temporary or set-aside copies that atomic writes
    leave when killed."""
    return _LEFTOVER_ANY.fullmatch(name) is not None


def recover(path: str | Path) -> None:
    """Repairs what killed writes of `path` left: a set-aside `.NAME.old-<pid>` is renamed
    back when NAME is missing, and temporary `.NAME.<pid>-*.tmp` and other set-aside copies
    are removed. Only leftovers of processes that no longer run on this machine are touched
    (a live writer's files are its own)."""
    path = Path(path)
    if path.parent.is_dir():
        _recover(path.parent, only=path.name, owned=False)


def sweep_folder(folder: str | Path) -> None:
    """`recover` for every entry of `folder`, for a caller that owns the folder (no other
    process writes in it, e.g. a locked run folder): every leftover goes, whatever process
    left it."""
    folder = Path(folder)
    if folder.is_dir():
        _recover(folder, only=None, owned=True)


def _recover(folder: Path, *, only: str | None, owned: bool) -> None:
    pattern = _LEFTOVER_ANY if owned else _LEFTOVER
    for entry in sorted(os.listdir(folder)):
        match = pattern.fullmatch(entry)
        if match is None or (only is not None and match["name"] != only):
            continue
        pid = match["old"] or match.groupdict().get("pid")
        if not owned and pid is not None and _alive(int(pid)):
            continue
        target, leftover = folder / match["name"], folder / entry
        if match["old"] is not None and not os.path.lexists(target):
            try:  # the complete folder that a killed two-step swap had moved aside
                os.rename(leftover, target)
                continue
            except OSError:
                pass
        _remove(leftover)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs on this machine (this process counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists, owned by someone else
        return True
    return True


# ----------------------------------------------------------------------------- helpers


def _temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(path, e) from e


def _create_file(tmp: Path) -> int:
    """A new file opened for writing with the mode `open()` gives (0666 less the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    return os.open(tmp, flags, 0o666)


def _plain_modes(folder: Path) -> None:
    """Gives the files and folders under `folder` the modes plain `open()`/`mkdir()` give
    under the current umask (read from `folder`, made by `mkdir`): some writers (e.g.
    safetensors) create private 0600 files whatever the umask."""
    dir_mode = stat.S_IMODE(folder.stat().st_mode)
    file_mode = dir_mode & 0o666
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), dir_mode)
        for name in files:
            full = os.path.join(root, name)
            if os.path.islink(full):
                continue
            executable = os.stat(full).st_mode & stat.S_IXUSR
            os.chmod(full, dir_mode if executable else file_mode)


def _swap_in(tmp: Path, path: Path) -> None:
    """Moves the complete folder `tmp` onto `path` (module docstring: exchange, else two
    renames), then deletes the old folder."""
    if not os.path.lexists(path):
        os.rename(tmp, path)
        return
    if exchange(tmp, path):  # tmp now holds the old folder
        _remove(tmp)
        return
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    _remove(old)
    os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old, path)
        raise
    _remove(old)


RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


def exchange(a: Path, b: Path) -> bool:
    """Swaps the paths `a` and `b` in one atomic step (Linux `renameat2(RENAME_EXCHANGE)`);
    False where the OS, its C library or the filesystem does not offer it."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _remove(path: Path) -> None:
    """Removes a file or a folder tree, if there; errors are ignored (a leftover is swept by
    the next `recover`)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def _is_write_error(error: OSError, tmp: Path, path: Path) -> bool:
    """Whether `error` comes from writing `path` (it names no file, the temporary copy or a
    file in it, or `path` and its set-aside copy) rather than from something the body read."""
    if error.filename is None:
        return True
    name = Path(os.fsdecode(error.filename))
    return (
        name == tmp
        or tmp in name.parents
        or name.parent == path.parent
        and (name.name == path.name or name.name.startswith(f".{path.name}."))
    )


def _foreign_os_error(error: BaseException) -> OSError | None:
    """The OS error inside a library's own exception type: writers in Rust (safetensors,
    tokenizers) report a failed write as "... (os error 28)"."""
    if isinstance(error, OSError) or not isinstance(error, Exception):
        return None
    match = re.search(r"\(os error (\d+)\)", str(error))
    if match is None:
        return None
    code = int(match[1])
    return OSError(code, os.strerror(code))


_HINTS = {
    errno.ENOSPC: "free some space on that disk or write elsewhere",
    errno.EDQUOT: "free some of your disk quota or write elsewhere",
    errno.EFBIG: "the file is larger than this process may write (ulimit -f)",
    errno.EROFS: "the filesystem is read-only: write elsewhere",
    errno.EACCES: "the folder is not writable: fix its permissions or write elsewhere",
    errno.EPERM: "the folder is not writable: fix its permissions or write elsewhere",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EEXIST: "a part of the path is a file, not a folder",
}


def write_error(path: Path, error: OSError) -> OSError:
    """`error` (same type and errno) as one line that names `path`, what failed and what to
    do."""
    reason = error.strerror or str(error) or type(error).__name__
    hint = _HINTS.get(error.errno or 0)
    message = f"cannot write {path}: {reason}" + (f" ({hint})" if hint else "")
    try:
        out = type(error)(message)
    except TypeError:
        out = OSError(message)
    out.errno = error.errno
    return out
