"""SICK (relatedness and entailment) on the bundled copy: counts, labels, protocols, the CRLF test
file, the parser's errors and checksums. Offline, about a second."""

from __future__ import annotations

import gzip
from collections import Counter
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
from attnmatch.data.datasets.sick import CLASS_NAMES, ENTAILMENT_SPEC, SPEC, read_sick_txt
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask, RegressionTask

DATA = Path(__file__).parents[2] / "data"
SICK = DATA / "sick"
HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"
SIZES = {"train": 4_500, "dev": 500, "test": 4_927}
# NEUTRAL, ENTAILMENT, CONTRADICTION per split, as counted in the official files.
CLASS_COUNTS = {"train": (2_536, 1_299, 665), "dev": (282, 144, 74), "test": (2_793, 1_414, 720)}


@cache
def _load(name: str, split: str) -> Split:
    return load_split(name, split, data_dir=DATA)


def _write(path: Path, rows: list[str], newline: str = "\n") -> Path:
    path.write_bytes("".join(r + newline for r in rows).encode("utf-8"))
    return path


# --- the bundled data ------------------------------------------------------------------------


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_counts_and_labels(split: str) -> None:
    relatedness = _load("sick", split)
    entailment = _load("sick-entailment", split)
    assert len(relatedness.examples) == len(entailment.examples) == SIZES[split]
    assert SPEC.split_sizes[split] == ENTAILMENT_SPEC.split_sizes[split] == SIZES[split]
    assert (relatedness.task.kind, entailment.task.kind) == ("regression", "classification")
    counts = Counter(ex.label for ex in entailment.examples)
    assert tuple(counts[i] for i in range(3)) == CLASS_COUNTS[split]
    scores = [ex.label for ex in relatedness.examples]
    assert all(isinstance(s, float) and 1.0 <= s <= 5.0 for s in scores)
    assert min(scores) == 1.0 and max(scores) == 5.0
    # The two datasets read the same rows.
    assert [(ex.left, ex.right, ex.id) for ex in relatedness.examples] == [
        (ex.left, ex.right, ex.id) for ex in entailment.examples
    ]
    assert all(ex.group is None for ex in relatedness.examples)


def test_dev_is_the_trial_file() -> None:
    assert SPEC.split_files["dev"] == ("SICK_trial.txt.gz",)
    assert "SICK_trial" in SPEC.notes


def test_exact_rows() -> None:
    assert _load("sick", "train").examples[0] == Example(
        "A group of kids is playing in a yard and an old man is standing in the background",
        "A group of boys in a yard is playing and a man is standing in the background",
        4.5,
        id="1",
    )
    assert _load("sick-entailment", "dev").examples[0] == Example(
        "The young boys are playing outdoors and the man is smiling nearby",
        "There is no boy playing outdoors and there is no man smiling",
        CLASS_NAMES.index("CONTRADICTION"),
        id="4",
    )
    # The last row of the CRLF test file: no "\r" left in the last field.
    assert _load("sick-entailment", "test").examples[-1] == Example(
        "A man is in a parking lot and is playing tennis against a large wall",
        "The snowboarder is leaping fearlessly over white snow",
        0,
        id="9996",
    )
    assert _load("sick", "test").examples[-1].label == 1.0


def test_crlf_test_file_leaves_no_line_ends() -> None:
    raw = gzip.decompress((SICK / "SICK_test_annotated.txt.gz").read_bytes())
    assert raw.count(b"\r\n") == SIZES["test"] + 1  # the gotcha is real
    for split in ("train", "dev", "test"):
        for ex in _load("sick", split).examples:
            assert not any(c in ex.left + ex.right for c in "\r\n\t")


def test_pair_ids_unique_across_splits() -> None:
    ids = [ex.id for s in ("train", "dev", "test") for ex in _load("sick", s).examples]
    assert len(ids) == len(set(ids)) == 9_927


def test_protocols() -> None:
    relatedness = _load("sick", "test").protocol
    assert isinstance(relatedness, RegressionTask)
    assert (relatedness.min_score, relatedness.max_score, relatedness.num_levels) == (1, 5, 5)
    assert relatedness.metrics == ("pearson", "spearman", "mse")
    assert relatedness.primary == "pearson" and not relatedness.by_group
    entailment = _load("sick-entailment", "test").protocol
    assert isinstance(entailment, ClassificationTask)
    assert entailment.num_classes == 3
    assert entailment.class_names == ("NEUTRAL", "ENTAILMENT", "CONTRADICTION")
    assert entailment.metrics == ("accuracy", "macro_f1") and entailment.primary == "accuracy"
    assert SPEC.protocol("dev") == relatedness and ENTAILMENT_SPEC.protocol("train") == entailment


def test_registry_and_spec() -> None:
    assert get_dataset("sick") is SPEC and get_dataset("sick-entailment") is ENTAILMENT_SPEC
    assert SPEC.files == ENTAILMENT_SPEC.files and SPEC.folder == ENTAILMENT_SPEC.folder == "sick"
    assert "CC BY-NC-SA 3.0" in SPEC.license
    assert SPEC.url.endswith("sick_train.zip") and not SPEC.options


def test_sha256sums_agree_with_spec() -> None:
    listed = {}
    for line in (SICK / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    assert {f.name: f.sha256 for f in SPEC.files}.items() <= listed.items()
    assert set(listed) == {p.name for p in SICK.iterdir()} - {"SHA256SUMS"}


def test_verify_bundled() -> None:
    for name in ("sick", "sick-entailment"):
        assert [c.status for c in verify_dataset(name, DATA)] == ["ok"] * len(SPEC.files)
        assert is_available(name, DATA)


def test_uncompressed_original_is_accepted(tmp_path: Path) -> None:
    original = tmp_path / "SICK_test_annotated.txt"
    original.write_bytes(gzip.decompress((SICK / "SICK_test_annotated.txt.gz").read_bytes()))
    loaded = load_split("sick", "test", data_dir=tmp_path)
    assert loaded.examples == _load("sick", "test").examples
    assert not is_available("sick", tmp_path)


# --- the parser ------------------------------------------------------------------------------

ROWS = [
    HEADER,
    '1\tA "quoted" man\tA man\t4.5\tENTAILMENT',
    "2\tA dog\tA cat\t1\tNEUTRAL",
    "3\tA boy sits\tNo boy sits\t3.265\tCONTRADICTION",
]


def test_crlf_lf_and_gzip_parse_alike(tmp_path: Path) -> None:
    crlf = read_sick_txt(_write(tmp_path / "crlf.txt", ROWS, "\r\n"))
    lf = read_sick_txt(_write(tmp_path / "lf.txt", ROWS))
    gz = tmp_path / "crlf.txt.gz"
    gz.write_bytes(gzip.compress((tmp_path / "crlf.txt").read_bytes()))
    assert crlf == lf == read_sick_txt(gz)
    assert crlf[0] == Example('A "quoted" man', "A man", 4.5, id="1")
    assert [ex.label for ex in crlf] == [4.5, 1.0, 3.265]
    assert [ex.label for ex in read_sick_txt(gz, "entailment")] == [1, 0, 2]
    with pytest.raises(ValueError, match="target"):
        read_sick_txt(gz, "score")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (["pair_ID\tsentence_A\tsentence_B", *ROWS[1:]], r"bad\.txt:1: expected the header"),
        ([], r"bad\.txt:1: expected the header"),
        ([*ROWS[:2], "2\tA dog\tA cat\t1"], r"bad\.txt:3: expected 5 tab-separated fields, got 4"),
        ([*ROWS[:2], ""], r"bad\.txt:3: expected 5 .* got 1"),
        ([ROWS[0], "x1\ta\tb\t2\tNEUTRAL"], r"bad\.txt:2: pair_ID must be an integer"),
        ([ROWS[0], "1\ta\tb\t5.5\tNEUTRAL"], r"bad\.txt:2: relatedness_score .* got '5\.5'"),
        ([ROWS[0], "1\ta\tb\t0.9\tNEUTRAL"], r"bad\.txt:2: relatedness_score .* got '0\.9'"),
        ([ROWS[0], "1\ta\tb\tnan\tNEUTRAL"], r"bad\.txt:2: relatedness_score .* got 'nan'"),
        ([ROWS[0], "1\ta\tb\t\tNEUTRAL"], r"bad\.txt:2: relatedness_score .* got ''"),
        ([ROWS[0], "1\ta\tb\t2\tneutral"], r"bad\.txt:2: entailment_judgment .* 'neutral'"),
    ],
)
def test_parser_errors_name_file_and_line(tmp_path: Path, rows: list[str], match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_sick_txt(_write(tmp_path / "bad.txt", rows))
