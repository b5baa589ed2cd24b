"""MultiNLI (not available here) on fixtures in the official JSON-lines format: every split, "-"
labels, genre in the id, the spec's metadata and the parser's errors. Offline, instant."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmatch.data.datasets import (
    DatasetFormatError,
    get_dataset,
    is_available,
    load_split,
    verify_dataset,
)
from attnmatch.data.datasets.multinli import SPEC, genre, read_multinli_jsonl
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask

FIXTURES = Path(__file__).parents[1] / "fixtures" / "multinli"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.mark.parametrize(
    ("split", "ids", "labels"),
    [
        ("train", ["government:31193n", "telephone:101457e", "fiction:134793c"], [1, 0, 2]),
        ("dev-matched", ["slate:63735n", "government:75259e"], [1, 0]),
        ("dev-mismatched", ["letters:75290c"], [2]),
    ],
)
def test_fixture_splits(split: str, ids: list[str], labels: list[int]) -> None:
    loaded = load_split("multinli", split, data_dir=FIXTURES)
    assert (loaded.dataset, loaded.split, loaded.task.kind) == ("multinli", split, "classification")
    assert [ex.id for ex in loaded.examples] == ids  # "-" rows dropped
    assert [ex.label for ex in loaded.examples] == labels
    assert all(ex.group is None for ex in loaded.examples)
    protocol = loaded.protocol
    assert isinstance(protocol, ClassificationTask) and protocol.name == f"multinli-{split}"
    assert protocol.class_names == ("entailment", "neutral", "contradiction")
    assert protocol.metrics == ("accuracy", "macro_f1") and protocol.primary == "accuracy"


def test_rows_and_genre() -> None:
    [first, *_] = read_multinli_jsonl(FIXTURES / "multinli_1.0_train.jsonl")
    assert first == Example(
        "The agency reviews every request.",
        "Requests are reviewed within a week.",
        1,
        id="government:31193n",
    )
    assert genre(first) == "government"
    with pytest.raises(ValueError, match="not a MultiNLI example id"):
        genre(Example("a", "b", 0, id=None))


def test_spec() -> None:
    assert get_dataset("multinli") is SPEC
    assert SPEC.splits == ("train", "dev-matched", "dev-mismatched")
    assert SPEC.split_sizes == {"train": 392_702, "dev-matched": 9_815, "dev-mismatched": 9_832}
    assert SPEC.url == "https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip"
    assert SPEC.non_standard_splits == ()
    # No digest is published for the files: present ones are read, reported "unverified".
    assert {c.status for c in verify_dataset("multinli", FIXTURES)} == {"unverified"}
    assert is_available("multinli", FIXTURES)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            '{"gold_label": "neutral", "sentence1": "a", "sentence2": "b", "pairID": "1n"}\n',
            r"bad:1: genre and pairID must be strings, got None, '1n'",
        ),
        (
            '{"gold_label": "neutral", "sentence1": "a", "sentence2": "b", "genre": "slate"}\n',
            r"bad:1: genre and pairID must be strings",
        ),
        ('{"gold_label": "-"}\n{"gold_label": "x"}\n', r"bad:2: gold_label must be one of"),
        ("not json\n", r"bad:1: not valid JSON"),
    ],
)
def test_parser_errors_name_file_and_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_multinli_jsonl(_write(tmp_path / "bad", text))
