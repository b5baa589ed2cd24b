"""STS Benchmark on the bundled copy: counts against the readme's breakdown, the 9-field rows,
scores, the protocol, the parser's errors and checksums. Offline, about a second."""

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
from attnmatch.data.datasets.sts_benchmark import SPEC, read_sts_benchmark_csv
from attnmatch.data.schema import Example
from attnmatch.tasks import RegressionTask

DATA = Path(__file__).parents[2] / "data"
STSB = DATA / "sts_benchmark"
SPLITS = ("train", "dev", "test")


@cache
def _load(split: str) -> Split:
    return load_split("sts-benchmark", split, data_dir=DATA)


def _write(path: Path, rows: list[str]) -> Path:
    path.write_bytes("".join(r + "\n" for r in rows).encode("utf-8"))
    return path


def _id_field(ex: Example, index: int) -> str:
    assert ex.id is not None
    return ex.id.split("/")[index]


# --- the bundled data ------------------------------------------------------------------------


def test_counts_by_genre_as_in_the_readme() -> None:
    # readme.txt: news 3299/500/500, caption 2000/625/525, forum 450/375/254.
    expected = {
        "train": {"main-news": 3_299, "main-captions": 2_000, "main-forum": 450},
        "dev": {"main-news": 500, "main-captions": 625, "main-forums": 375},
        "test": {"main-news": 500, "main-captions": 625, "main-forums": 254},
    }
    for split in SPLITS:
        loaded = _load(split)
        assert (loaded.dataset, loaded.split, loaded.task.kind) == (
            "sts-benchmark",
            split,
            "regression",
        )
        assert len(loaded.examples) == SPEC.split_sizes[split]
        assert Counter(_id_field(ex, 0) for ex in loaded.examples) == expected[split]
    assert SPEC.split_sizes == {"train": 5_749, "dev": 1_500, "test": 1_379}


def test_counts_by_source_file_as_in_the_readme() -> None:
    # readme.txt, "breakdown according to the original names": train, dev, test.
    expected = {
        "MSRpar": (1_000, 250, 250),
        "headlines": (1_999, 250, 250),
        "deft-news": (300, 0, 0),
        "MSRvid": (1_000, 250, 250),
        "images": (1_000, 250, 250),
        "track5.en-en": (0, 125, 125),
        "deft-forum": (450, 0, 0),
        "answers-forums": (0, 375, 0),
        "answer-answer": (0, 0, 254),
    }
    for i, split in enumerate(SPLITS):
        counts = Counter(_id_field(ex, 1) for ex in _load(split).examples)
        assert counts == {name: n[i] for name, n in expected.items() if n[i]}


def test_scores_in_range_and_ids_unique() -> None:
    examples = [ex for split in SPLITS for ex in _load(split).examples]
    assert all(isinstance(ex.label, float) and 0.0 <= ex.label <= 5.0 for ex in examples)
    assert min(ex.label for ex in examples) == 0.0 and max(ex.label for ex in examples) == 5.0
    assert len({ex.id for ex in examples}) == len(examples) == 8_628
    assert all(ex.group is None for ex in examples)


def test_exact_rows() -> None:
    assert _load("train").examples[0] == Example(
        "A plane is taking off.",
        "An air plane is taking off.",
        5.0,
        id="main-captions/MSRvid/2012test/0001",
    )
    # The last test row has 9 fields: the two attribution fields are read past.
    assert _load("test").examples[-1] == Example(
        "South Korea declares end to MERS outbreak",
        "North Korea Delegation Meets With South Korean Officials",
        0.0,
        id="main-news/headlines/2016/1432",
    )


@pytest.mark.parametrize(("split", "nine"), [("train", 197), ("dev", 22), ("test", 284)])
def test_nine_field_rows_are_read(split: str, nine: int) -> None:
    raw = gzip.decompress((STSB / f"sts-{split}.csv.gz").read_bytes()).decode("utf-8")
    rows = [line.split("\t") for line in raw.splitlines()]
    assert Counter(len(r) for r in rows) == {7: len(rows) - nine, 9: nine}
    examples = _load(split).examples
    # Read with quoting off: the sentences equal the raw fields, quotes included.
    assert any('"' in ex.left + ex.right for ex in examples)
    for row, ex in zip(rows, examples, strict=True):
        assert (ex.left, ex.right) == (row[5], row[6])
        assert "StackExchange Network" not in ex.right and "Europe Media" not in ex.right


def test_protocol() -> None:
    protocol = _load("test").protocol
    assert isinstance(protocol, RegressionTask)
    assert (protocol.name, protocol.min_score, protocol.max_score) == ("sts-benchmark", 0, 5)
    assert protocol.metrics == ("pearson", "spearman", "mse") and protocol.primary == "pearson"
    assert not protocol.by_group and protocol.num_levels == 6
    assert SPEC.protocol("dev") == protocol


def test_registry_and_spec() -> None:
    assert get_dataset("sts-benchmark") is SPEC
    assert SPEC.url.endswith("Stsbenchmark.tar.gz") and "CC BY-SA 4.0" in SPEC.license


def test_sha256sums_agree_with_spec() -> None:
    listed = {}
    for line in (STSB / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    assert {f.name: f.sha256 for f in SPEC.files}.items() <= listed.items()
    assert set(listed) == {p.name for p in STSB.iterdir()} - {"SHA256SUMS"}


def test_verify_bundled() -> None:
    assert [c.status for c in verify_dataset("sts-benchmark", DATA)] == ["ok"] * len(SPEC.files)
    assert is_available("sts-benchmark", DATA)


def test_uncompressed_original_is_accepted(tmp_path: Path) -> None:
    original = tmp_path / "sts-dev.csv"
    original.write_bytes(gzip.decompress((STSB / "sts-dev.csv.gz").read_bytes()))
    loaded = load_split("sts-benchmark", "dev", data_dir=tmp_path)
    assert loaded.examples == _load("dev").examples


# --- the parser ------------------------------------------------------------------------------

ROW = 'main-news\tMSRpar\t2012test\t0007\t3.2\tHe said "yes" .\tHe said no .'
NINE = "main-news\theadlines\t2016\t0008\t0\tA b\tC d\tSource 1\tSource 2"


def test_seven_and_nine_fields_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "ok.csv"
    path.write_bytes(f"{ROW}\r\n{NINE}\n".encode())
    assert read_sts_benchmark_csv(path) == [
        Example('He said "yes" .', "He said no .", 3.2, id="main-news/MSRpar/2012test/0007"),
        Example("A b", "C d", 0.0, id="main-news/headlines/2016/0008"),
    ]


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([ROW, "main-news\tMSRpar\t2012\t1\t3\tonly one"], r"bad\.csv:2: expected 7 .* got 6"),
        ([NINE + "\textra"], r"bad\.csv:1: expected 7 .* or 9 .* got 10"),
        ([ROW.replace("\tHe said no .", "\tHe said no .\tone source")], r"bad\.csv:1: .* got 8"),
        ([""], r"bad\.csv:1: expected 7 .* got 1"),
        ([ROW.replace("3.2", "5.01")], r"bad\.csv:1: score must be a number in 0-5, got '5\.01'"),
        ([ROW.replace("3.2", "-1")], r"bad\.csv:1: score .* got '-1'"),
        ([ROW.replace("3.2", "high")], r"bad\.csv:1: score .* got 'high'"),
        ([ROW.replace("He said no .", "")], r"bad\.csv:1: empty sentence"),
    ],
)
def test_parser_errors_name_file_and_line(tmp_path: Path, rows: list[str], match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_sts_benchmark_csv(_write(tmp_path / "bad.csv", rows))
