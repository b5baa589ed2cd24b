"""Dataset specs, data location, checksums and download: what every corpus module shares.

A corpus module (e.g. `wikiqa.py`) declares one `DatasetSpec`: its files with their sha256, its
splits, options and official evaluation protocol, and a loader that parses verified files into
`Example`s. This module finds the files (`find_dataset_dir`), checks them (`verified_paths`,
`verify_files`) and downloads them (`download_dataset`). It parses no corpus format itself, but
holds what the corpus modules share: text files opened alike (`open_text`), tab-separated rows
checked alike (`tsv_rows`), bundled `.gz` copies declared alike (`bundled`) and the non-standard
"train on dev" splits (`with_dev_training`, `split_dev_for_training`, `dev_training_fields`).
"""

from __future__ import annotations

import csv
import hashlib
import lzma
import os
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Literal
from urllib.parse import urlparse

import numpy as np

from attnmatch.atomic import atomic_directory
from attnmatch.data.schema import Example
from attnmatch.data.textfile import DatasetFormatError, open_text
from attnmatch.tasks import Task

# loader(paths, split, options): `paths` maps each of the split's file names (as declared in the
# spec) to a verified file on disk; `options` is complete (defaults filled in) and validated.
Loader = Callable[[Mapping[str, Path], str, Mapping[str, Any]], list[Example]]
ProtocolFactory = Callable[[str, Mapping[str, Any]], Task | None]

ENV_VAR = "ATTNMATCH_DATA"


class DatasetNotFoundError(FileNotFoundError):
    """A dataset folder or one of its files is not where attnmatch looked."""


class ChecksumError(ValueError):
    """A data file's sha256 differs from the one in its dataset spec."""


class DownloadError(OSError):
    """A dataset's official URL could not be read (no connection, a server error, a timeout);
    the message says where to put the files by hand instead."""


@dataclass(frozen=True)
class FileSpec:
    """One data file and its checksum.

    Args:
        name: the file name in a dataset folder (the bundled name, e.g. `WikiQA-dev.tsv.gz`).
        sha256: its hex digest, or "" when no trustworthy digest is published (corpora we
            have never had locally): such a file is read without a check and reported as
            "unverified".
        alternatives: other accepted `(name, sha256)` for the same content, tried in order when
            `name` is absent, e.g. the uncompressed file of the official download.
    """

    name: str
    sha256: str
    alternatives: tuple[tuple[str, str], ...] = ()

    @property
    def candidates(self) -> tuple[tuple[str, str], ...]:
        """Every accepted `(name, sha256)`, the bundled one first."""
        return ((self.name, self.sha256), *self.alternatives)


def bundled(name: str, gz_sha256: str, original_sha256: str) -> FileSpec:
    """A file bundled gzipped as `<name>.gz`, its original uncompressed `name` accepted instead.

    Args:
        name: the original file name, e.g. `WikiQA-dev.tsv`; the spec's name is `WikiQA-dev.tsv.gz`.
        gz_sha256: the digest of the bundled `.gz`.
        original_sha256: the digest of the original file ("" when none is known: read unverified).
    """
    return FileSpec(f"{name}.gz", gz_sha256, alternatives=((name, original_sha256),))


@dataclass(frozen=True, kw_only=True, eq=False)
class DatasetSpec:
    """Everything attnmatch knows about a corpus, as data.

    Args:
        name: registry name (`attnmatch datasets ...`, `load_split(name, ...)`).
        title: human-readable name.
        task: what a model trained on the corpus predicts (`Task.of` its official protocol).
        splits: split names, in their usual order.
        split_files: the `FileSpec` names each split reads.
        files: every file of the dataset (including license and reference files).
        folder: sub-folder name under a data root (e.g. "wikiqa").
        license: one line; the license file itself is among `files`.
        citation: the paper to cite.
        url: the official download URL (used by `attnmatch datasets fetch`).
        archive_sha256: sha256 of the archive at `url`, if known.
        manual_download: why and how to download by hand when no single archive at `url`
            holds the files in our layout (e.g. a login-only page, several sources);
            `attnmatch datasets fetch` then prints this instead of downloading.
        protocol_description: how the official evaluation protocol selects groups and metrics.
        options: loader options and their allowed values; the first value is the default.
        loader: parses a split's verified files into examples (see `Loader`).
        make_protocol: `(split, options) -> protocol` (a task with its name, metrics and kept
            groups); use `protocol()` instead.
        split_sizes: the published number of pairs of each split (default options), for
            `datasets list` and the loader tests.
        non_standard_splits: splits that are not part of the corpus's official protocol (e.g.
            "train-on-dev"); results trained or evaluated on them are labelled non-standard.
        notes: gotchas a user should know (shown by `datasets info`).
    """

    name: str
    title: str
    task: Task
    splits: tuple[str, ...]
    split_files: Mapping[str, tuple[str, ...]]
    files: tuple[FileSpec, ...]
    folder: str
    license: str
    citation: str
    url: str
    archive_sha256: str | None = None
    manual_download: str = ""
    protocol_description: str = ""
    options: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    loader: Loader
    make_protocol: ProtocolFactory
    split_sizes: Mapping[str, int] = field(default_factory=dict)
    non_standard_splits: tuple[str, ...] = ()
    notes: str = ""

    def __post_init__(self) -> None:
        if set(self.split_files) != set(self.splits):
            raise ValueError(f"{self.name}: split_files must cover exactly {self.splits}")
        names = {f.name for f in self.files}
        for split, wanted in self.split_files.items():
            if unknown := sorted(set(wanted) - names):
                raise ValueError(f"{self.name}: split {split!r} reads undeclared files {unknown}")
        if unknown := sorted(set(self.split_sizes) - set(self.splits)):
            raise ValueError(f"{self.name}: split_sizes names unknown splits {unknown}")
        if unknown := sorted(set(self.non_standard_splits) - set(self.splits)):
            raise ValueError(f"{self.name}: non_standard_splits names unknown splits {unknown}")
        if not all(self.options.values()):
            raise ValueError(f"{self.name}: every option needs at least one allowed value")

    def file(self, name: str) -> FileSpec:
        """The `FileSpec` called `name`."""
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no file {name!r}")

    def check_split(self, split: str) -> None:
        """Raises ValueError naming the valid splits if `split` is not one."""
        if split not in self.splits:
            raise ValueError(
                f"{self.name} has no split {split!r}; valid splits: {', '.join(self.splits)}"
            )

    def resolve_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """`options` completed with defaults; unknown names or values raise ValueError."""
        if unknown := sorted(set(options) - set(self.options)):
            valid = ", ".join(self.options) or "none"
            raise ValueError(f"{self.name}: unknown option(s) {unknown}; valid options: {valid}")
        resolved = {key: allowed[0] for key, allowed in self.options.items()}
        for key, value in options.items():
            # Type-strict, so that 1 is not taken for True.
            if not any(type(value) is type(a) and value == a for a in self.options[key]):
                raise ValueError(
                    f"{self.name}: option {key}={value!r} is not one of {self.options[key]}"
                )
            resolved[key] = value
        return resolved

    def protocol(self, split: str, **options: Any) -> Task | None:
        """The official evaluation protocol of `split` under `options`."""
        self.check_split(split)
        return self.make_protocol(split, self.resolve_options(options))


@dataclass(frozen=True)
class FileCheck:
    """The result of checking one file: status "ok", "missing", "mismatch" or "unverified" (no
    published digest to check against)."""

    file: str
    status: Literal["ok", "missing", "mismatch", "unverified"]
    detail: str


def default_cache_dir() -> Path:
    """`~/.cache/attnmatch`: where `download_dataset` writes by default."""
    return Path.home() / ".cache" / "attnmatch"


def _has_any_file(spec: DatasetSpec, folder: Path) -> bool:
    return any((folder / name).is_file() for f in spec.files for name, _ in f.candidates)


def checkout_data_dir() -> Path | None:
    """The `data/` folder of the source checkout this package runs from (an editable install:
    the folder beside `src/`), where the bundled datasets are; None when there is none."""
    package = Path(__file__).resolve().parents[2]  # src/attnmatch
    if package.parent.name != "src":
        return None
    data = package.parent.parent / "data"
    return data if data.is_dir() else None


def find_dataset_dir(spec: DatasetSpec, data_dir: str | Path | None = None) -> Path:
    """The folder that holds `spec`'s files.

    An explicit `data_dir` wins: it may be the dataset folder itself or its parent. Otherwise
    the first of `$ATTNMATCH_DATA/<folder>`, `./data/<folder>`, `<checkout>/data/<folder>` (the
    bundled copies of the source checkout the package runs from, found from any working
    directory; see `checkout_data_dir`) and `~/.cache/attnmatch/<folder>` that holds at least
    one of the dataset's files.

    Raises:
        DatasetNotFoundError: listing every place looked at.
    """
    if data_dir is not None:
        root = Path(data_dir).expanduser()
        if _has_any_file(spec, root):
            return root
        if (root / spec.folder).is_dir():
            return root / spec.folder
        looked = [str(root), str(root / spec.folder)]
    else:
        env = os.environ.get(ENV_VAR)
        candidates = [Path(env).expanduser() / spec.folder] if env else []
        candidates.append(Path.cwd() / "data" / spec.folder)
        checkout = checkout_data_dir()
        if checkout is not None and checkout.resolve() != (Path.cwd() / "data").resolve():
            candidates.append(checkout / spec.folder)
        candidates.append(default_cache_dir() / spec.folder)
        for folder in candidates:
            if _has_any_file(spec, folder):
                return folder
        looked = [str(p) for p in candidates]
        if not env:
            looked.insert(0, f"${ENV_VAR}/{spec.folder} (${ENV_VAR} is not set)")
    raise DatasetNotFoundError(
        f"dataset {spec.name!r} not found; looked in: {'; '.join(looked)}. Download it with "
        f"`attnmatch datasets fetch {spec.name}`, or pass its folder explicitly."
    )


# Digests of files already read in this process, keyed by (path, size, mtime_ns): a file that
# changes on disk gets a new key and is hashed again.
_DIGESTS: dict[tuple[str, int, int], str] = {}


def _digest_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


def file_sha256(path: Path) -> str:
    """The sha256 hex digest of `path`, cached in-process by path, size and mtime."""
    key = _digest_key(path)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _write_hashed(src: IO[bytes], dest: Path, *, hashed: bool = True) -> str | None:
    """Copies the stream `src` into the file `dest`, hashing the bytes as they are written
    (when `hashed`): the digest is returned and cached for `file_sha256`, so that checking
    `dest` afterwards reads it no second time."""
    digest = hashlib.sha256() if hashed else None
    with dest.open("wb") as f:
        for chunk in iter(lambda: src.read(1 << 20), b""):
            if digest is not None:
                digest.update(chunk)
            f.write(chunk)
    if digest is None:
        return None
    _DIGESTS[_digest_key(dest)] = digest.hexdigest()
    return digest.hexdigest()


def _locate(file: FileSpec, folder: Path) -> tuple[Path, str] | None:
    for name, sha256 in file.candidates:
        if (folder / name).is_file():
            return folder / name, sha256
    return None


def verified_paths(spec: DatasetSpec, folder: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """Finds and checks the files `names` of `spec` in `folder`.

    Returns:
        `{spec file name: path on disk}`; the path may be an accepted alternative.

    Raises:
        DatasetNotFoundError: a file is absent under every accepted name.
        ChecksumError: a file's sha256 differs from the spec's.
    """
    paths = {}
    for name in names:
        file = spec.file(name)
        found = _locate(file, folder)
        if found is None:
            accepted = " or ".join(n for n, _ in file.candidates)
            raise DatasetNotFoundError(
                f"{spec.name}: {accepted} not found in {folder}; "
                f"check it with `attnmatch datasets verify {spec.name}`"
            )
        path, expected = found
        actual = file_sha256(path) if expected else ""
        if actual != expected:
            raise ChecksumError(
                f"{spec.name}: checksum mismatch for {path}: expected sha256 {expected}, actual "
                f"{actual}. The file is corrupt, modified or a different version; fetch it again "
                f"with `attnmatch datasets fetch {spec.name}`."
            )
        paths[name] = path
    return paths


def _relative(path: Path, folder: Path) -> str:
    try:
        return path.relative_to(folder).as_posix()
    except ValueError:
        return path.name


def verify_files(spec: DatasetSpec, data_dir: str | Path | None = None) -> list[FileCheck]:
    """Checks every file of `spec` in its folder (see `find_dataset_dir`), one row per file."""
    folder = find_dataset_dir(spec, data_dir)
    checks = []
    for file in spec.files:
        found = _locate(file, folder)
        if found is None:
            checks.append(FileCheck(file.name, "missing", f"not in {folder}"))
            continue
        path, expected = found
        actual = file_sha256(path)
        if not expected:
            detail = f"{path}: no published sha256 to check against (actual {actual})"
            checks.append(FileCheck(_relative(path, folder), "unverified", detail))
        elif actual == expected:
            checks.append(FileCheck(_relative(path, folder), "ok", str(path)))
        else:
            detail = f"{path}: expected sha256 {expected}, actual {actual}"
            checks.append(FileCheck(_relative(path, folder), "mismatch", detail))
    return checks


def tsv_fields(
    line: str,
    fields: int | Sequence[str],
    *,
    path: str | Path,
    lineno: int,
    optional: Sequence[str] = (),
    at_least: bool = False,
) -> list[str]:
    """The tab-separated fields of one line (its `\\r\\n` or `\\n` end dropped), counted.

    Quoting is off: a field may hold quotes, never a tab.

    Args:
        line: the line as read.
        fields: how many fields a row has, or their names (which the error message lists).
        path, lineno: where the line is, for the error message.
        optional: names of trailing fields that a row may add, all together or none.
        at_least: `fields` is a minimum; a row may have more (e.g. a variable number of turns).

    Returns:
        Every field of the row, optional and extra ones included.

    Raises:
        DatasetFormatError: another field count, e.g. `f.tsv:3: expected 4 tab-separated fields
            (label, question1, question2, pair_ID), got 3: 'row'`.
    """
    row = line.rstrip("\r\n")
    values = row.split("\t")
    n = fields if isinstance(fields, int) else len(fields)
    if len(values) == n or (at_least and len(values) > n):
        return values
    if optional and len(values) == n + len(optional):
        return values
    expected = f"{'at least ' if at_least else ''}{n} tab-separated fields"
    if not isinstance(fields, int):
        expected += f" ({', '.join(fields)})"
    if optional:
        expected += f" or {n + len(optional)} (with {', '.join(optional)})"
    raise DatasetFormatError(
        f"{path}:{lineno}: expected {expected}, got {len(values)}: {row[:200]!r}"
    )


def tsv_rows(
    path: str | Path,
    fields: int | Sequence[str] | None = None,
    *,
    header: Sequence[str] | None = None,
    optional: Sequence[str] = (),
    at_least: bool = False,
) -> Iterator[tuple[int, list[str]]]:
    """`(line number, fields)` of each row of a tab-separated file (`.gz` or plain), in order.

    Every line is a row (an empty line too, which then has one empty field); see `tsv_fields`
    for how rows are split and counted.

    Args:
        path: the file.
        fields: how many fields a row has, or their names; default `len(header)`.
        header: the exact first line, split at tabs; None if the file has no header.
        optional, at_least: as in `tsv_fields`.

    Raises:
        DatasetFormatError: a wrong header (or an empty file where a header is expected), or a
            row with another field count; the message names the file and the line.
    """
    if fields is None:
        if header is None:
            raise TypeError("tsv_rows needs `fields` or `header`")
        fields = len(header)
    with open_text(path) as f:
        if header is not None:
            got = f.readline().rstrip("\r\n").split("\t")
            if tuple(got) != tuple(header):
                raise DatasetFormatError(
                    f"{path}:1: expected the header {' '.join(header)!r}, got {got!r}"
                )
        for lineno, line in enumerate(f, start=1 if header is None else 2):
            values = tsv_fields(
                line, fields, path=path, lineno=lineno, optional=optional, at_least=at_least
            )
            yield lineno, values


def csv_records(
    path: str | Path, header: tuple[str, ...], *, delimiter: str = ","
) -> Iterator[tuple[int, list[str]]]:
    """`(line the record starts on, fields)` of each record after the header of a quoted file
    (`.gz` or plain; records may span lines), each checked to have `len(header)` fields.

    Raises:
        DatasetFormatError: a wrong header, broken quoting, a record with another field count
            or an empty file; the message names the file and the line.
    """
    joiner, kind = (" ", "tab") if delimiter == "\t" else (",", "comma")
    with open_text(path) as f:
        reader = csv.reader(f, delimiter=delimiter, strict=True)
        start = 1  # physical line on which the next record starts (records may span lines)
        try:
            for fields in reader:
                lineno, start = start, reader.line_num + 1
                if lineno == 1:
                    if tuple(fields) != header:
                        raise DatasetFormatError(
                            f"{path}:1: expected the header {joiner.join(header)!r}, got {fields!r}"
                        )
                    continue
                if len(fields) != len(header):
                    raise DatasetFormatError(
                        f"{path}:{lineno}: expected {len(header)} {kind}-separated fields, "
                        f"got {len(fields)}: {str(fields)[:200]}"
                    )
                yield lineno, fields
        except csv.Error as e:
            raise DatasetFormatError(f"{path}:{start}: broken quoting: {e}") from None
    if start == 1:
        raise DatasetFormatError(f"{path}:1: expected the header, got an empty file")


def parse_score(text: str, low: float, high: float) -> float | None:
    """`text` as a number if it is one in `low`..`high` (bounds included), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if low <= value <= high else None  # False for nan


def _member_target(member: str, wanted: Mapping[str, str]) -> str | None:
    # A member matches a wanted file when its path ends with the file's (relative) name, e.g.
    # "TrecQA/processed/train/a.toks" matches "processed/train/a.toks".
    parts = PurePosixPath(member).parts
    for suffix, name in wanted.items():
        n = len(PurePosixPath(suffix).parts)
        if len(parts) >= n and PurePosixPath(*parts[-n:]) == PurePosixPath(suffix):
            return name
    return None


def _extract_members(archive: Path, wanted: set[str], dest: Path) -> None:
    # Only known names are written, under `dest`: no path in the archive is trusted. The longest
    # names are tried first, so "processed/train/a.toks" wins over a bare "a.toks".
    targets = {name: name for name in sorted(wanted, key=lambda n: -len(PurePosixPath(n).parts))}

    def write(name: str, src: IO[bytes]) -> None:
        out = dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_hashed(src, out)  # hashed once, while written; `verify_files` reuses the digest

    try:
        _extract_known(archive, targets, write)
    except (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, lzma.LZMAError) as e:
        raise DatasetFormatError(
            f"{archive.name}: corrupt archive ({type(e).__name__}: {e}); download it again"
        ) from None


def _extract_known(
    archive: Path, targets: Mapping[str, str], write: Callable[[str, IO[bytes]], None]
) -> None:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = None if info.is_dir() else _member_target(info.filename, targets)
                if name is not None:
                    with zf.open(info) as src:
                        write(name, src)
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tf:
            for member in tf.getmembers():
                name = _member_target(member.name, targets) if member.isfile() else None
                fileobj = tf.extractfile(member) if name is not None else None
                if name is not None and fileobj is not None:
                    with fileobj:
                        write(name, fileobj)
    else:
        raise ValueError(f"{archive.name}: not a zip or tar archive")


def download_dataset(spec: DatasetSpec, dest: str | Path | None = None) -> Path:
    """Downloads `spec.url`, checks it and extracts the dataset's files.

    Args:
        spec: the dataset.
        dest: a data root; the files go to `dest/<folder>` (default `~/.cache/attnmatch`).

    Returns:
        The dataset folder. It is replaced as a whole, and only once every file is verified.

    Raises:
        DownloadError: the URL cannot be read (no network, a server error, a timeout).
        ChecksumError: the archive or an extracted file has an unexpected sha256.
        DatasetNotFoundError: the archive lacks one of the dataset's files.
    """
    if spec.manual_download:
        raise ValueError(f"{spec.name} cannot be fetched automatically: {spec.manual_download}")
    if not spec.url:
        raise ValueError(f"{spec.name} has no download URL")
    root = Path(dest).expanduser() if dest is not None else default_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{spec.folder}.download.") as tmp:
        archive = Path(tmp) / (PurePosixPath(urlparse(spec.url).path).name or "archive")
        wanted = {name for f in spec.files for name, _ in f.candidates}
        # Every file is hashed once, as it is written: the download (when its digest is
        # published, or when it may be a data file itself) and each extracted file.
        try:
            with urllib.request.urlopen(spec.url, timeout=60) as response:
                actual = _write_hashed(
                    response, archive, hashed=bool(spec.archive_sha256) or archive.name in wanted
                )
        except (urllib.error.URLError, OSError) as e:  # OSError: timeouts, resets, DNS
            reason = getattr(e, "reason", None) or e.strerror or e or type(e).__name__
            raise DownloadError(
                f"cannot download {spec.name} from {spec.url} ({reason}); put the files in "
                f"{root / spec.folder} by hand: see `attnmatch datasets info {spec.name}`"
            ) from None
        if spec.archive_sha256 and actual != spec.archive_sha256:
            raise ChecksumError(
                f"{spec.url}: expected sha256 {spec.archive_sha256}, actual {actual}"
            )
        with atomic_directory(root / spec.folder) as staging:
            if archive.name in wanted and not (
                zipfile.is_zipfile(archive) or tarfile.is_tarfile(archive)
            ):
                plain = staging / archive.name  # a plain data file: moved, its digest kept
                os.replace(archive, plain)
                assert actual is not None  # hashed while downloading: its name is a data file's
                _DIGESTS[_digest_key(plain)] = actual
            else:
                _extract_members(archive, wanted, staging)
            # "unverified": no published digest for that file (the archive's was checked).
            checks = verify_files(spec, staging)  # reuses the digests taken while writing
            bad = [c for c in checks if c.status == "mismatch"]
            if not any(c.status in ("ok", "unverified") for c in checks):
                raise DatasetNotFoundError(f"{spec.url}: none of {spec.name}'s files inside")
            if bad:
                files = "; ".join(f"{c.file}: {c.status} ({c.detail})" for c in bad)
                raise ChecksumError(f"{spec.name}: downloaded files failed to verify: {files}")
    return root / spec.folder


TRAIN_ON_DEV = "train-on-dev"
DEV_HOLDOUT = "dev-holdout"
DEV_TRAINING_SPLITS = (TRAIN_ON_DEV, DEV_HOLDOUT)
HOLDOUT_SEED = 2026


def with_dev_training(split_files: Mapping[str, str]) -> dict[str, str]:
    """`{split: file}` plus the NON-STANDARD splits TRAIN_ON_DEV and DEV_HOLDOUT (in this order,
    after the others), which both read the file of "dev" (see `split_dev_for_training`)."""
    return {**split_files, TRAIN_ON_DEV: split_files["dev"], DEV_HOLDOUT: split_files["dev"]}


def split_dev_for_training(
    examples: Sequence[Example],
    part: str,
    *,
    key: Callable[[Example], str] = lambda ex: ex.left,
    fraction: float = 0.1,
    seed: int = HOLDOUT_SEED,
) -> list[Example]:
    """One part of a dev set split for the NON-STANDARD "train on dev, report test" protocol.

    Where a corpus ships only dev and test here (Quora, SNLI, SciTail), models are trained on
    90% of dev ("train-on-dev") and selected on the other 10% ("dev-holdout"), so that the test
    set is still evaluated once. Pairs sharing `key` (default: the left text, e.g. an SNLI
    premise) stay on one side, so no text leaks from training into selection.

    Args:
        examples: the dev examples, in file order.
        part: TRAIN_ON_DEV or DEV_HOLDOUT.
        key: what keeps pairs together.
        fraction: the share of keys held out.
        seed: the permutation seed (fixed: every run sees the same split).

    Returns:
        The part's examples, file order kept.
    """
    if part not in DEV_TRAINING_SPLITS:
        raise ValueError(f"part must be {TRAIN_ON_DEV!r} or {DEV_HOLDOUT!r}, got {part!r}")
    keys = list(dict.fromkeys(key(ex) for ex in examples))
    order = np.random.default_rng(seed).permutation(len(keys))
    held = {keys[i] for i in order[: max(1, round(fraction * len(keys)))]}
    want_held = part == DEV_HOLDOUT
    return [ex for ex in examples if (key(ex) in held) == want_held]


def dev_training_fields(
    split_files: Mapping[str, str],
    read: Callable[[Path], list[Example]],
    official: Task,
    non_standard: Task,
    key: Callable[[Example], str] = lambda ex: ex.left,
) -> dict[str, Any]:
    """The `DatasetSpec` fields of a corpus read one file a split (`split_files`, made by
    `with_dev_training`): its splits, loader (`read`, then `split_dev_for_training` by `key` on
    the NON-STANDARD splits) and protocols (`non_standard` on those splits, else `official`)."""

    def load(paths: Mapping[str, Path], split: str, options: Mapping[str, Any]) -> list[Example]:
        examples = read(paths[split_files[split]])
        if split not in DEV_TRAINING_SPLITS:
            return examples
        return split_dev_for_training(examples, split, key=key)

    return {
        "splits": tuple(split_files),
        "split_files": {split: (name,) for split, name in split_files.items()},
        "loader": load,
        "make_protocol": lambda split, options: (
            non_standard if split in DEV_TRAINING_SPLITS else official
        ),
        "non_standard_splits": DEV_TRAINING_SPLITS,
    }


def file_loader(split_files: Mapping[str, str], read: Callable[[Path], list[Example]]) -> Loader:
    """The loader of a corpus read one file a split: `read(paths[split_files[split]])`."""
    return lambda paths, split, options: read(paths[split_files[split]])
