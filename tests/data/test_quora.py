"""Quora: the bundled BiMPM dev/test (counts, balance, rows, the non-standard train-on-dev split),
fixtures in the official formats of BiMPM's train.tsv and Quora's original release, the parsers'
errors and checksums. Offline, about a second."""

from __future__ import annotations

import gzip
from functools import cache
from pathlib import Path

import pytest

from attnmatch.data.datasets import (
    DatasetFormatError,
    Split,
    get_dataset,
    load_split,
    split_availability,
    verify_dataset,
)
from attnmatch.data.datasets.quora import (
    CLASS_NAMES,
    ORIGINAL_SPEC,
    SPEC,
    read_bimpm_tsv,
    read_quora_original_tsv,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask

DATA = Path(__file__).parents[2] / "data"
QUORA = DATA / "quora_bimpm"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "quora"
ORIGINAL_HEADER = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"


@cache
def _load(split: str) -> Split:
    return load_split("quora", split, data_dir=DATA)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


# --- the bundled BiMPM dev and test ----------------------------------------------------------


@pytest.mark.parametrize("split", ["dev", "test"])
def test_counts_and_balance(split: str) -> None:
    loaded = _load(split)
    assert (loaded.dataset, loaded.split, loaded.task.kind) == ("quora", split, "classification")
    assert len(loaded.examples) == SPEC.split_sizes[split] == 10_000
    labels = [ex.label for ex in loaded.examples]
    assert (labels.count(0), labels.count(1)) == (5_000, 5_000)
    ids = [ex.id for ex in loaded.examples]
    assert len(set(ids)) == len(ids) and all(ex.group is None for ex in loaded.examples)


def test_dev_and_test_are_disjoint() -> None:
    assert not {ex.id for ex in _load("dev").examples} & {ex.id for ex in _load("test").examples}


def test_first_and_last_rows() -> None:
    assert _load("dev").examples[0] == Example(
        "How do I get funding for my web based startup idea ?",
        "How do I get seed funding pre product ?",
        1,
        id="327970",
    )
    last = _load("test").examples[-1]
    assert (last.id, last.label, last.right) == (
        "334703",
        0,
        "What is the general opinion of Winston Churchill in the UK ?",
    )


def test_protocols() -> None:
    protocol = _load("test").protocol
    assert isinstance(protocol, ClassificationTask)
    assert protocol.name == "quora-bimpm" and protocol.num_classes == 2
    assert protocol.class_names == CLASS_NAMES == ("not_duplicate", "duplicate")
    assert protocol.metrics == ("accuracy", "f1") and protocol.primary == "accuracy"
    for split in ("train-on-dev", "dev-holdout"):
        non_standard = SPEC.protocol(split)
        assert non_standard is not None and non_standard.name.endswith(" (non-standard)")
    assert SPEC.non_standard_splits == ("train-on-dev", "dev-holdout")
    assert "NON-STANDARD" in SPEC.protocol_description


def test_train_on_dev_and_holdout_partition_dev() -> None:
    dev = _load("dev").examples
    train, held = _load("train-on-dev").examples, _load("dev-holdout").examples
    assert (len(train), len(held)) == (9_000, 1_000)
    assert not {ex.id for ex in train} & {ex.id for ex in held}
    assert sorted(train + held, key=lambda ex: int(str(ex.id))) == sorted(
        dev, key=lambda ex: int(str(ex.id))
    )
    held_ids = {ex.id for ex in held}
    assert [ex for ex in dev if ex.id in held_ids] == held  # file order kept
    assert 400 < sum(ex.label for ex in held) < 600
    assert load_split("quora", "dev-holdout", data_dir=DATA).examples == held  # fixed seed


def test_bundled_files(tmp_path: Path) -> None:
    listed = {}
    for line in (QUORA / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    declared = {f.name: f.sha256 for f in SPEC.files if f.sha256}
    assert declared.items() <= listed.items()
    assert set(listed) == {p.name for p in QUORA.iterdir()} - {"SHA256SUMS"}
    statuses = {c.file: c.status for c in verify_dataset("quora", DATA)}
    assert statuses == {
        "train.tsv": "missing",
        "dev.tsv.gz": "ok",
        "test.tsv.gz": "ok",
        "readme.txt": "ok",
    }
    assert split_availability("quora", DATA) == {
        "train": False,
        "dev": True,
        "test": True,
        "train-on-dev": True,
        "dev-holdout": True,
    }
    (tmp_path / "dev.tsv").write_bytes(gzip.decompress((QUORA / "dev.tsv.gz").read_bytes()))
    assert load_split("quora", "dev", data_dir=tmp_path).examples == _load("dev").examples


# --- BiMPM train.tsv (fixture) ---------------------------------------------------------------


def test_bimpm_train_fixture() -> None:
    """Not bundled: no published digest, so the file is read unverified."""
    loaded = load_split("quora", "train", data_dir=FIXTURES)
    assert [ex.label for ex in loaded.examples] == [1, 0, 0, 1]
    assert loaded.examples[2] == Example(
        'What does " ROI " mean in business ?', "How do I start a business ?", 0, id="7"
    )
    assert SPEC.split_sizes["train"] == 384_348
    assert {c.file: c.status for c in verify_dataset("quora", FIXTURES)}["train.tsv"] == (
        "unverified"
    )


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("1\ta\tb\t1\n0\ta\tb\n", r"bad\.tsv:2: expected 4 tab-separated fields .* got 3"),
        ("1\ta\tb\t1\n\n", r"bad\.tsv:2: expected 4 .* got 1"),
        ("2\ta\tb\t1\n", r"bad\.tsv:1: label must be 0 or 1, got '2'"),
        ("1\ta\tb\tp1\n", r"bad\.tsv:1: pair_ID must be an integer, got 'p1'"),
    ],
)
def test_bimpm_errors_name_file_and_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_bimpm_tsv(_write(tmp_path / "bad.tsv", text))


# --- the original release (fixture) ----------------------------------------------------------


def test_original_fixture_quoting() -> None:
    loaded = load_split("quora-original", "all", data_dir=FIXTURES)
    examples = loaded.examples
    assert [ex.id for ex in examples] == ["0", "1", "2", "3", "4", "5"]
    assert examples[1] == Example(
        'What does "ROI" mean?', "What is return on investment?", 1, id="1"
    )
    assert examples[2].left == "Why is the sky blue\nat noon?"  # a record over two lines
    assert examples[3].left == "Can a question hold a\ttab?"
    assert examples[4].right == "" and examples[4].label == 0
    assert loaded.protocol is not None and loaded.protocol.name == "quora-original"
    assert ORIGINAL_SPEC.splits == ("all",) and ORIGINAL_SPEC.split_sizes == {"all": 404_290}
    assert "published no train/dev/test split" in ORIGINAL_SPEC.protocol_description
    assert get_dataset("quora-original") is ORIGINAL_SPEC


def test_original_drop_empty() -> None:
    kept = load_split("quora-original", "all", data_dir=FIXTURES, drop_empty=True).examples
    assert [ex.id for ex in kept] == ["0", "1", "2", "3", "5"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("id\tq1\tq2\n", r"bad\.tsv:1: expected the header"),
        ("", r"bad\.tsv:1: expected the header"),
        (f"{ORIGINAL_HEADER}\n0\t1\t2\ta\tb\t1\n1\t3\t4\ta\t0\n", r"bad\.tsv:3: expected 6 "),
        (f'{ORIGINAL_HEADER}\n0\t1\t2\t"a\nb"\tc\t1\n1\t3\t4\ta\tb\t2\n', r"bad\.tsv:4: is_dup"),
        (f"{ORIGINAL_HEADER}\nx\t1\t2\ta\tb\t1\n", r"bad\.tsv:2: id, qid1 and qid2 must be"),
        (f'{ORIGINAL_HEADER}\n0\t1\t2\t"a"b\tc\t1\n', r"bad\.tsv:2: broken quoting"),
    ],
)
def test_original_errors_name_file_and_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_quora_original_tsv(_write(tmp_path / "bad.tsv", text))
