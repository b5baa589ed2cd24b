"""The shared helpers of the dataset modules: tsv_rows / tsv_fields, parse_score, bundled, the
non-standard train-on-dev split helper, and download_dataset's checksums."""

from __future__ import annotations

import gzip
import hashlib
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from attnmatch.data.datasets import _spec
from attnmatch.data.datasets._spec import (
    DEV_HOLDOUT,
    TRAIN_ON_DEV,
    ChecksumError,
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    bundled,
    download_dataset,
    parse_score,
    split_dev_for_training,
    tsv_fields,
    tsv_rows,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RankingTask


def test_tsv_rows_checks_the_header_and_counts_fields(tmp_path: Path) -> None:
    path = tmp_path / "x.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
        f.write('a\tb\r\n1\t"two"\r\n3\t4\n')
    rows = list(tsv_rows(path, header=("a", "b")))
    assert rows == [(2, ["1", '"two"']), (3, ["3", "4"])]  # CRLF dropped, quotes kept
    with pytest.raises(DatasetFormatError, match=r"x\.tsv\.gz:1: .*header"):
        list(tsv_rows(path, header=("a", "c")))


def test_tsv_rows_names_file_line_and_fields(tmp_path: Path) -> None:
    path = tmp_path / "y.tsv"
    path.write_text("p\th\tl\nonly two\tfields\n", encoding="utf-8")
    with pytest.raises(
        DatasetFormatError,
        match=r"y\.tsv:2: expected 3 tab-separated fields \(premise, hypothesis, label\), got 2",
    ):
        list(tsv_rows(path, ("premise", "hypothesis", "label")))


def test_tsv_fields_optional_and_at_least() -> None:
    seven = "\t".join("abcdefg")
    assert len(tsv_fields(seven, 7, path="f", lineno=1, optional=("s1", "s2"))) == 7
    assert len(tsv_fields(seven + "\tx\ty", 7, path="f", lineno=1, optional=("s1", "s2"))) == 9
    with pytest.raises(DatasetFormatError, match="f:1:"):
        tsv_fields(seven + "\tx", 7, path="f", lineno=1, optional=("s1", "s2"))
    assert len(tsv_fields("1\tt1\tt2\tt3\tr", 3, path="f", lineno=1, at_least=True)) == 5
    with pytest.raises(DatasetFormatError, match="at least 3"):
        tsv_fields("1\tr", 3, path="f", lineno=2, at_least=True)


def test_parse_score_bounds() -> None:
    assert parse_score("4.5", 0, 5) == 4.5
    assert parse_score("5", 0, 5) == 5.0
    assert parse_score("5.01", 0, 5) is None
    assert parse_score("nan", 0, 5) is None
    assert parse_score("", 0, 5) is None


def test_bundled_accepts_the_original() -> None:
    f = bundled("a.tsv", "1" * 64, "2" * 64)
    assert f.candidates == (("a.tsv.gz", "1" * 64), ("a.tsv", "2" * 64))


def test_split_dev_for_training_is_a_fixed_disjoint_cover_by_key() -> None:
    dev = [Example(f"premise {i // 3}", f"hypothesis {i}", i % 3) for i in range(300)]
    train = split_dev_for_training(dev, TRAIN_ON_DEV)
    held = split_dev_for_training(dev, DEV_HOLDOUT)
    assert len(train) + len(held) == len(dev)
    assert {ex.left for ex in train}.isdisjoint({ex.left for ex in held})  # no premise leaks
    assert len({ex.left for ex in held}) == 10  # 10% of the 100 premises
    assert split_dev_for_training(dev, DEV_HOLDOUT) == held  # the same every time
    with pytest.raises(ValueError, match="part must be"):
        split_dev_for_training(dev, "test")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _toy_spec(url: str, files: dict[str, str], archive_sha256: str | None) -> DatasetSpec:
    """A one-split dataset of `files` ({name: sha256}) downloaded from `url`."""
    return DatasetSpec(
        name="toy",
        title="Toy",
        task=RankingTask(),
        splits=("test",),
        split_files={"test": tuple(files)},
        files=tuple(FileSpec(name, sha) for name, sha in files.items()),
        folder="toy",
        license="none",
        citation="none",
        url=url,
        archive_sha256=archive_sha256,
        loader=lambda paths, split, options: [],
        make_protocol=lambda split, options: None,
    )


@pytest.fixture
def hashed_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of bytes each sha256 that `_spec` computes goes over, one entry per hash."""
    sizes: list[int] = []

    class Counting:
        def __init__(self) -> None:
            self._hash = hashlib.sha256()
            sizes.append(0)
            self._slot = len(sizes) - 1

        def update(self, data: Any) -> None:
            sizes[self._slot] += len(data)
            self._hash.update(data)

        def hexdigest(self) -> str:
            return self._hash.hexdigest()

    monkeypatch.setattr(_spec, "hashlib", SimpleNamespace(sha256=Counting))
    return sizes


A = b"left\tright\tlabel\nwhat ?\tthat .\t1\n" * 50
B = b"left\tright\tlabel\nwho ?\tnobody .\t0\n" * 70


def test_download_of_a_plain_data_file_hashes_it_once(
    tmp_path: Path, hashed_sizes: list[int]
) -> None:
    """The download is the data file itself, with a published digest: one hash, not one of
    the download and another of its copy (file:// URL, no network)."""
    source = tmp_path / "src" / "a.tsv"
    source.parent.mkdir()
    source.write_bytes(A)
    spec = _toy_spec(source.as_uri(), {"a.tsv": _sha256(A)}, archive_sha256=_sha256(A))
    folder = download_dataset(spec, tmp_path / "dest")
    assert (folder / "a.tsv").read_bytes() == A
    assert hashed_sizes == [len(A)]


def test_download_of_an_archive_hashes_each_file_once(
    tmp_path: Path, hashed_sizes: list[int]
) -> None:
    archive = tmp_path / "toy.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("toy/a.tsv", A)
        zf.writestr("toy/b.tsv", B)
    files = {"a.tsv": _sha256(A), "b.tsv": _sha256(B)}
    spec = _toy_spec(archive.as_uri(), files, archive_sha256=_sha256(archive.read_bytes()))
    folder = download_dataset(spec, tmp_path / "dest")
    assert (folder / "b.tsv").read_bytes() == B
    assert sorted(hashed_sizes) == sorted([archive.stat().st_size, len(A), len(B)])
    # A mismatch is still an error naming the file, and still costs one hash per file.
    hashed_sizes.clear()
    bad = _toy_spec(archive.as_uri(), {"a.tsv": _sha256(A), "b.tsv": "0" * 64}, None)
    with pytest.raises(ChecksumError, match=r"toy: downloaded files failed to verify: b\.tsv"):
        download_dataset(bad, tmp_path / "bad")
    assert sorted(hashed_sizes) == sorted([len(A), len(B)])
    assert not (tmp_path / "bad" / "toy").exists()
