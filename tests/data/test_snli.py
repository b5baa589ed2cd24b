"""SNLI on the bundled dev/test: counts after dropping "-" labels, the null-sentence row, the
non-standard train-on-dev split, a fixture in the official train format, the parser's errors and
checksums. Offline, about a second."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest

from attnmatch.data.datasets import (
    DatasetFormatError,
    Split,
    load_split,
    split_availability,
    verify_dataset,
)
from attnmatch.data.datasets.snli import CLASS_NAMES, SPEC, read_nli_jsonl
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask

DATA = Path(__file__).parents[2] / "data"
SNLI = DATA / "snli"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "snli"


@cache
def _load(split: str) -> Split:
    return load_split("snli", split, data_dir=DATA)


def _raw_lines(split: str) -> list[dict]:
    text = gzip.decompress((SNLI / f"snli_1.0_{split}.jsonl.gz").read_bytes()).decode("utf-8")
    return [json.loads(line) for line in text.splitlines()]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


# --- the bundled dev and test ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "counts", "dropped"),
    [("dev", (3_329, 3_235, 3_278), 158), ("test", (3_368, 3_219, 3_237), 176)],
)
def test_counts_after_dropping_unlabelled(
    split: str, counts: tuple[int, int, int], dropped: int
) -> None:
    loaded = _load(split)
    assert (loaded.dataset, loaded.split, loaded.task.kind) == ("snli", split, "classification")
    assert len(loaded.examples) == SPEC.split_sizes[split] == sum(counts)
    labels = [ex.label for ex in loaded.examples]
    assert tuple(labels.count(c) for c in range(3)) == counts
    raw = _raw_lines(split)
    assert len(raw) == 10_000 and sum(obj["gold_label"] == "-" for obj in raw) == dropped
    assert all(ex.group is None for ex in loaded.examples)


def test_the_null_sentence_row_is_dropped() -> None:
    raw = _raw_lines("dev")
    assert raw[1339] == {"gold_label": "-", "sentence1": None, "sentence2": None}  # line 1340
    ids = {ex.id for ex in _load("dev").examples}
    assert "snli_1.0_dev.jsonl:1340" not in ids and "snli_1.0_dev.jsonl:1341" in ids
    assert all(isinstance(ex.left, str) and ex.left for ex in _load("dev").examples)


def test_first_rows() -> None:
    assert _load("dev").examples[0] == Example(
        "Two women are embracing while holding to go packages.",
        "The sisters are hugging goodbye while holding to go packages after just eating lunch.",
        1,
        id="snli_1.0_dev.jsonl:1",
    )
    last = _load("test").examples[-1]
    assert last.id == "snli_1.0_test.jsonl:10000" and last.label == CLASS_NAMES.index("neutral")


def test_protocols() -> None:
    protocol = _load("test").protocol
    assert isinstance(protocol, ClassificationTask) and protocol.name == "snli"
    assert protocol.num_classes == 3
    assert protocol.class_names == CLASS_NAMES == ("entailment", "neutral", "contradiction")
    assert protocol.metrics == ("accuracy", "macro_f1") and protocol.primary == "accuracy"
    for split in ("train-on-dev", "dev-holdout"):
        non_standard = _load(split).protocol
        assert non_standard is not None and non_standard.name.endswith(" (non-standard)")
    assert SPEC.non_standard_splits == ("train-on-dev", "dev-holdout")
    assert "NON-STANDARD" in SPEC.protocol_description
    assert SPEC.split_sizes["train"] == 549_367


def test_train_on_dev_and_holdout_partition_dev_by_premise() -> None:
    dev = _load("dev").examples
    train, held = _load("train-on-dev").examples, _load("dev-holdout").examples
    assert len(train) + len(held) == len(dev)
    assert not {ex.left for ex in train} & {ex.left for ex in held}
    assert sorted(str(ex.id) for ex in train + held) == sorted(str(ex.id) for ex in dev)
    premises = len({ex.left for ex in dev})
    assert len({ex.left for ex in held}) == round(0.1 * premises)


def test_bundled_files(tmp_path: Path) -> None:
    listed = {}
    for line in (SNLI / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    assert {f.name: f.sha256 for f in SPEC.files if f.sha256}.items() <= listed.items()
    assert set(listed) == {p.name for p in SNLI.iterdir()} - {"SHA256SUMS"}
    statuses = {c.file: c.status for c in verify_dataset("snli", DATA)}
    assert statuses == {
        "snli_1.0_train.jsonl": "missing",
        "snli_1.0_dev.jsonl.gz": "ok",
        "snli_1.0_test.jsonl.gz": "ok",
    }
    assert not split_availability("snli", DATA)["train"]
    # An uncompressed copy (this one, or the official file) is accepted without a checksum.
    original = tmp_path / "snli_1.0_test.jsonl"
    original.write_bytes(gzip.decompress((SNLI / "snli_1.0_test.jsonl.gz").read_bytes()))
    assert load_split("snli", "test", data_dir=tmp_path).examples == _load("test").examples
    assert {c.file: c.status for c in verify_dataset("snli", tmp_path)}[original.name] == (
        "unverified"
    )


# --- the official format (fixture) -----------------------------------------------------------


def test_official_train_fixture() -> None:
    loaded = load_split("snli", "train", data_dir=FIXTURES)
    assert [ex.id for ex in loaded.examples] == [
        "3416050480.jpg#4r1n",
        "3416050480.jpg#4r1c",
        "3416050480.jpg#4r1e",
        "2267923837.jpg#2r1e",  # the "-" row before it is dropped
    ]
    assert [ex.label for ex in loaded.examples] == [1, 2, 0, 0]
    assert loaded.examples[0].left == "A man rides a bike down a hill."
    assert loaded.examples[0].right == "The man is racing."


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"gold_label": "neutral", "sentence1": "a", "sentence2": "b"}\n\n', r"bad:2: not valid"),
        ('{"gold_label": "neutral", "sentence1": "a"', r"bad:1: not valid JSON"),
        ('"neutral"\n', r"bad:1: expected a JSON object"),
        ('{"gold_label": "NEUTRAL", "sentence1": "a", "sentence2": "b"}\n', r"bad:1: gold_label"),
        ('{"sentence1": "a", "sentence2": "b"}\n', r"bad:1: gold_label must be one of"),
        ('{"gold_label": "neutral", "sentence1": null, "sentence2": "b"}\n', r"bad:1: sentence1"),
    ],
)
def test_parser_errors_name_file_and_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_nli_jsonl(_write(tmp_path / "bad", text))
