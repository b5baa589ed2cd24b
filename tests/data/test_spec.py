"""The shared reading helpers of the dataset modules: tsv_rows / tsv_fields, parse_score,
bundled, and the non-standard train-on-dev split helper."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from attnmatch.data.datasets._spec import (
    DEV_HOLDOUT,
    TRAIN_ON_DEV,
    DatasetFormatError,
    bundled,
    parse_score,
    split_dev_for_training,
    tsv_fields,
    tsv_rows,
)
from attnmatch.data.schema import Example


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
