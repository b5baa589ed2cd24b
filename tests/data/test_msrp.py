"""MSRP on the bundled copy: counts, labels, the BOM and quotes, the parser's errors, checksums.
Offline, about a second."""

from __future__ import annotations

import gzip
from functools import cache
from pathlib import Path

import pytest

from attnmatch.data.datasets import (
    DatasetFormatError,
    Split,
    get_dataset,
    is_available,
    load_split,
    verify_dataset,
)
from attnmatch.data.datasets.msrp import CLASS_NAMES, SPEC, read_msrp_tsv
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask

DATA = Path(__file__).parents[2] / "data"
MSRP = DATA / "msrp"
HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"


@cache
def _load(split: str) -> Split:
    return load_split("msrp", split, data_dir=DATA)


def _write(path: Path, rows: list[str], *, bom: bool = False, newline: str = "\r\n") -> Path:
    text = "".join(r + newline for r in rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def _sha256sums(folder: Path) -> dict[str, str]:
    listed = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    return listed


# --- the bundled data ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "negatives", "positives"),
    [("train", 1_169, 2_407), ("dev", 154, 346), ("test", 578, 1_147)],
)
def test_counts_and_labels(split: str, negatives: int, positives: int) -> None:
    loaded = _load(split)
    assert (loaded.dataset, loaded.split, loaded.task.kind) == ("msrp", split, "classification")
    assert len(loaded.examples) == SPEC.split_sizes[split] == negatives + positives
    labels = [ex.label for ex in loaded.examples]
    assert (labels.count(0), labels.count(1)) == (negatives, positives)
    assert all(ex.group is None for ex in loaded.examples)


def test_train_and_dev_are_microsofts_train_file() -> None:
    """3,576 + 500 pairs = the 4,076 of msr_paraphrase_train.txt, 2,753 of them paraphrases."""
    pooled = _load("train").examples + _load("dev").examples
    assert len(pooled) == 4_076 and sum(ex.label for ex in pooled) == 2_753


def test_ids_unique_and_splits_disjoint() -> None:
    ids = {s: [ex.id for ex in _load(s).examples] for s in ("train", "dev", "test")}
    assert all(len(set(v)) == len(v) for v in ids.values())
    train, dev, test = (set(v) for v in ids.values())
    assert not (train & dev) and not (train & test) and not (dev & test)


def test_first_and_last_rows() -> None:
    assert _load("train").examples[0] == Example(
        left='Amrozi accused his brother, whom he called "the witness", of deliberately '
        "distorting his evidence.",
        right='Referring to him as only "the witness", Amrozi accused his brother of '
        "deliberately distorting his evidence.",
        label=1,
        id="702876-702977",
    )
    last = _load("dev").examples[-1]
    assert (last.id, last.label) == ("453575-453448", 0)
    assert last.right.endswith("down from 4.35 percent late Wednesday.")
    first_test = _load("test").examples[0]
    assert (first_test.id, first_test.label) == ("1089874-1089925", 1)
    assert first_test.left.startswith("PCCW's chief operating officer")


def test_bom_crlf_and_quotes_are_handled() -> None:
    # train and test start with a BOM (dev does not); all files have CRLF line ends.
    for name in ("msr-para-train.tsv.gz", "msr-para-test.tsv.gz"):
        assert gzip.decompress((MSRP / name).read_bytes()).startswith(b"\xef\xbb\xbfQuality\t")
    assert gzip.decompress((MSRP / "msr-para-val.tsv.gz").read_bytes()).startswith(b"Quality")
    for split in ("train", "dev", "test"):
        for ex in _load(split).examples:
            assert "\r" not in ex.right and "\ufeff" not in ex.left
    assert sum('"' in ex.left for ex in _load("train").examples) > 100  # quoting stays off


def test_protocol() -> None:
    protocol = _load("test").protocol
    assert isinstance(protocol, ClassificationTask)
    assert protocol.num_classes == 2 and protocol.class_names == CLASS_NAMES
    assert CLASS_NAMES == ("not_paraphrase", "paraphrase")
    assert protocol.metrics == ("accuracy", "f1") and protocol.primary == "accuracy"
    assert get_dataset("msrp") is SPEC and SPEC.non_standard_splits == ()


def test_sha256sums_agree_with_spec_and_verify() -> None:
    listed = _sha256sums(MSRP)
    assert {f.name: f.sha256 for f in SPEC.files}.items() <= listed.items()
    assert set(listed) == {p.name for p in MSRP.iterdir()} - {"SHA256SUMS"}
    assert {c.status for c in verify_dataset("msrp", DATA)} == {"ok"}
    assert is_available("msrp", DATA)


def test_uncompressed_originals_are_accepted(tmp_path: Path) -> None:
    for split, name in (("dev", "msr-para-val.tsv"), ("test", "msr-para-test.tsv")):
        (tmp_path / name).write_bytes(gzip.decompress((MSRP / f"{name}.gz").read_bytes()))
        assert load_split("msrp", split, data_dir=tmp_path).examples == _load(split).examples
    statuses = {c.file: c.status for c in verify_dataset("msrp", tmp_path)}
    assert statuses["msr-para-val.tsv"] == statuses["msr-para-test.tsv"] == "ok"


# --- the parser ------------------------------------------------------------------------------

ROWS = [
    HEADER,
    '1\t10\t11\tHe said "yes".\tHe agreed.',
    "0\t12\t13\tIt rained.\tIt was sunny.",
]


def test_bom_and_line_ends_parse_alike(tmp_path: Path) -> None:
    with_bom = read_msrp_tsv(_write(tmp_path / "bom.tsv", ROWS, bom=True))
    plain = read_msrp_tsv(_write(tmp_path / "lf.tsv", ROWS, newline="\n"))
    assert with_bom == plain
    assert with_bom[0] == Example('He said "yes".', "He agreed.", 1, id="10-11")
    assert with_bom[1].label == 0


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (["Quality\t#1 ID\t#2 ID\tString", *ROWS[1:]], r"bad\.tsv:1: expected the header"),
        ([], r"bad\.tsv:1: expected the header"),
        ([*ROWS, "1\t14\t15\tonly one sentence"], r"bad\.tsv:4: expected 5 .* got 4"),
        ([*ROWS[:2], "", ROWS[2]], r"bad\.tsv:3: expected 5 .* got 1"),
        ([ROWS[0], "2\t1\t2\ta\tb"], r"bad\.tsv:2: Quality must be 0 or 1, got '2'"),
        ([ROWS[0], "1\tx1\t2\ta\tb"], r"bad\.tsv:2: #1 ID and #2 ID must be integers"),
    ],
)
def test_parser_errors_name_file_and_line(tmp_path: Path, rows: list[str], match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_msrp_tsv(_write(tmp_path / "bad.tsv", rows))
