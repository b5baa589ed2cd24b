"""The hostile-input battery of the data readers: your pairs (`pairs:FOLDER`), the corpus loaders
that read files a user supplies, the shared text reader (`attnmatch.data.textfile`), the files
`attnmatch score` reads (`scoring.PairsFile`) and the candidates `attnmatch rank` reads
(`scoring.read_candidates`).

Every case ends in a correct result or in one clear error that names the file (and line, field
or column). The ids start with the case's class (c2 tracebacks, c4 data accepted that should not
be, c7 errors that do not say where, c8 side effects such as a byte order mark).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnmatch.data.datasets import load_split, load_train_dev_test
from attnmatch.data.datasets._spec import (
    DatasetSpec,
    FileSpec,
    download_dataset,
    find_dataset_dir,
    tsv_rows,
)
from attnmatch.data.datasets.quora import read_quora_original_tsv
from attnmatch.data.datasets.snli import read_nli_jsonl
from attnmatch.data.datasets.ubuntu import read_train_csv
from attnmatch.data.datasets.wikiqa import HEADER as WIKIQA_HEADER
from attnmatch.data.datasets.wikiqa import read_wikiqa_tsv
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.labels import choose_task
from attnmatch.data.sampling import RankingGroupSampler
from attnmatch.data.textfile import open_text
from attnmatch.data.vocab import Vocab
from attnmatch.scoring import PairsFile, read_candidates, write_scored
from attnmatch.tasks import Predictions, RankingTask
from tests.hostile._util import assert_clear_error, assert_clear_exception, run_cli

HEADER = "left\tright\tlabel"
GROUPED = "group\tleft\tright\tlabel"
BOM = b"\xef\xbb\xbf"
FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def case(case_id: str) -> pytest.MarkDecorator:
    """One battery case of a test that has a single input: its id names the class first."""
    return pytest.mark.parametrize("case", [pytest.param(case_id, id=case_id)])


def tsv(*lines: str) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def folder_of(root: Path, **files: bytes) -> Path:
    """A pairs folder `root/pairs` holding `files` ({"train.tsv": bytes, ...}; a name's dots are
    written as "_": train_tsv_gz -> train.tsv.gz)."""
    folder = root / "pairs"
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name.replace("_", ".")).write_bytes(data)
    return folder


def ranking_rows(queries: int = 3) -> list[str]:
    """`queries` questions, each with one relevant and two other answers (grouped)."""
    return [
        f"q{q}\tquestion {q} ?\tanswer {q}.{a}\t{int(a == 0)}"
        for q in range(queries)
        for a in range(3)
    ]


def failure(call: Callable[[], Any], *needles: str, kind: type[BaseException] = Exception) -> str:
    """The message of the one clear error `call` raises; it must hold every one of `needles`."""
    with pytest.raises(kind) as info:
        call()
    assert isinstance(info.value, ValueError | OSError), repr(info.value)
    return assert_clear_exception(info.value, *needles)


def pairs_split(folder: Path, split: str = "train", **options: Any) -> Any:
    return load_split(f"pairs:{folder}", split, **options)


def noisy_lines(n: int, seed: int = 0) -> list[str]:
    """`n` grouped ranking rows of random words (gzip cannot squeeze them into a few bytes)."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)) for _ in range(n)]
    return [
        f"q{i // 3}\tquestion {i // 3}\t{w} {i}\t{int(i % 3 == 0)}" for i, w in enumerate(words)
    ]


# --- c2: compressed and odd files end in one line naming the file -------------------------------


@case("c2-plain-text-named-gz")
def test_plain_text_named_gz(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv_gz=tsv(HEADER, "a\tb\t1", "c\td\t0"))
    failure(lambda: pairs_split(folder), "train.tsv.gz", "not gzip", "drop .gz")


@case("c2-truncated-gz-names-file-and-line")
def test_truncated_gz_names_file_and_line(tmp_path: Path, case: str) -> None:
    data = gzip.compress(tsv(GROUPED, *noisy_lines(3000)))
    folder = folder_of(tmp_path, train_tsv_gz=data[: len(data) // 2])
    message = failure(lambda: pairs_split(folder), "train.tsv.gz:", "truncated")
    line = int(message.split("train.tsv.gz:")[1].split(":")[0])
    assert 100 < line < 3000  # the line reached, not a bare "Aborted." or line 1


@case("c2-corrupt-gz-data")
def test_corrupt_gz_data(tmp_path: Path, case: str) -> None:
    data = bytearray(gzip.compress(tsv(GROUPED, *noisy_lines(30))))
    data[10] = 0b111  # the first deflate block: final, of the reserved type 3
    folder = folder_of(tmp_path, train_tsv_gz=bytes(data))
    failure(lambda: pairs_split(folder), "train.tsv.gz:1", "gzip data is corrupt")


@case("c2-gz-crc-mismatch")
def test_gz_crc_mismatch(tmp_path: Path, case: str) -> None:
    data = bytearray(gzip.compress(tsv(HEADER, "a\tb\t1", "c\td\t0")))
    data[-8] ^= 0xFF  # the CRC-32 of the trailer
    path = tmp_path / "x.tsv.gz"
    path.write_bytes(bytes(data))
    failure(lambda: list(tsv_rows(path, header=("left", "right", "label"))), "x.tsv.gz", "gzip")


@case("c2-empty-gz")
def test_empty_gz(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv_gz=b"")
    failure(lambda: pairs_split(folder), "train.tsv.gz", "empty file")


@case("c2-gz-of-nothing")
def test_gz_of_nothing(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv_gz=gzip.compress(b""))
    failure(lambda: pairs_split(folder), "train.tsv.gz", "empty file")


@case("c2-empty-plain-file")
def test_empty_plain_file(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv=b"")
    failure(lambda: pairs_split(folder), "train.tsv", "empty file")


@case("c2-header-only")
def test_header_only(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, "", "  "))
    failure(lambda: pairs_split(folder), "train.tsv", "no pairs")


@case("c2-folder-where-the-split-file-is")
def test_folder_where_the_split_file_is(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path)
    (folder / "train.tsv").mkdir()
    failure(lambda: pairs_split(folder), "train.tsv", "is a folder", kind=IsADirectoryError)


@case("c2-pairs-reference-names-a-file")
def test_pairs_reference_names_a_file(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, "a\tb\t1"))
    failure(lambda: load_split(f"pairs:{folder / 'train.tsv'}", "train"), "train.tsv", "is a file")


@case("c2-cli-truncated-gz-is-one-line")
def test_cli_truncated_gz_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, case: str
) -> None:
    data = gzip.compress(tsv(GROUPED, *noisy_lines(3000)))
    folder = folder_of(tmp_path, train_tsv_gz=data[: len(data) // 2])
    outcome = run_cli(["datasets", "info", "pairs", "--data-dir", folder], capsys)
    assert_clear_error(outcome, "train.tsv.gz:", "truncated")
    assert "Aborted" not in outcome.stderr


def _zip_spec(url: str) -> DatasetSpec:
    return DatasetSpec(
        name="toy",
        title="Toy",
        task=RankingTask(),
        splits=("test",),
        split_files={"test": ("a.tsv",)},
        files=(FileSpec("a.tsv", ""),),
        folder="toy",
        license="none",
        citation="none",
        url=url,
        loader=lambda paths, split, options: [],
        make_protocol=lambda split, options: None,
    )


@case("c2-zip-with-a-corrupt-member")
def test_zip_with_a_corrupt_member(tmp_path: Path, case: str) -> None:
    archive = tmp_path / "toy.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("toy/a.tsv", "left\tright\n" * 50)
    data = archive.read_bytes()
    at = data.index(b"left\tright")
    archive.write_bytes(data[:at] + b"LEFT" + data[at + 4 :])  # the CRC no longer matches
    failure(lambda: download_dataset(_zip_spec(archive.as_uri()), tmp_path / "d"), "toy.zip")
    assert not (tmp_path / "d" / "toy").exists()


@case("c2-truncated-zip")
def test_truncated_zip(tmp_path: Path, case: str) -> None:
    archive = tmp_path / "toy.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("toy/a.tsv", "left\tright\n" * 50)
    archive.write_bytes(archive.read_bytes()[:40])
    failure(lambda: download_dataset(_zip_spec(archive.as_uri()), tmp_path / "d"), "toy.zip")


@case("c2-score-file-plain-named-gz")
def test_score_file_plain_named_gz(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.tsv.gz"
    path.write_bytes(tsv("left\tright", "a\tb"))
    failure(lambda: list(PairsFile(path)), "pairs.tsv.gz", "not gzip")


@case("c2-score-file-truncated-gz")
def test_score_file_truncated_gz(tmp_path: Path, case: str) -> None:
    data = gzip.compress(
        tsv("left\tright", *(line.split("\t", 1)[1] for line in noisy_lines(3000)))
    )
    path = tmp_path / "pairs.tsv.gz"
    path.write_bytes(data[: len(data) // 2])
    failure(lambda: list(PairsFile(path)), "pairs.tsv.gz:", "truncated")


@case("c2-score-file-is-a-folder")
def test_score_file_is_a_folder(tmp_path: Path, case: str) -> None:
    failure(lambda: PairsFile(tmp_path), str(tmp_path), "folder", kind=IsADirectoryError)


@case("c2-candidates-file-is-a-folder")
def test_candidates_file_is_a_folder(tmp_path: Path, case: str) -> None:
    failure(lambda: read_candidates(tmp_path), str(tmp_path), "folder", kind=IsADirectoryError)


@case("c2-candidates-missing")
def test_candidates_missing(tmp_path: Path, case: str) -> None:
    path = tmp_path / "none.txt"
    failure(lambda: read_candidates(path), "none.txt", "not found", kind=FileNotFoundError)


@case("c2-candidates-gzip")
def test_candidates_gzip(tmp_path: Path, case: str) -> None:
    path = tmp_path / "cands.txt.gz"
    path.write_bytes(gzip.compress(b"one\ntwo\n"))
    failure(lambda: read_candidates(path), "cands.txt.gz", "gunzip")


@case("c2-jsonl-nested-too-deeply")
def test_jsonl_nested_too_deeply(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"left": "a", "right": "b"}\n{"left": ' + "[" * 100_000 + "\n")
    failure(lambda: list(PairsFile(path)), "pairs.jsonl:2", "nested too deeply")


@case("c2-jsonl-integer-of-too-many-digits")
def test_jsonl_integer_of_too_many_digits(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"left": "a", "right": "b", "n": ' + "9" * 5000 + "}\n")
    failure(lambda: list(PairsFile(path)), "pairs.jsonl:1", "not valid JSON")


@case("c2-snli-train-nested-too-deeply")
def test_snli_train_nested_too_deeply(tmp_path: Path, case: str) -> None:
    path = tmp_path / "snli_1.0_train.jsonl"
    path.write_text("[" * 100_000 + "\n")
    failure(lambda: read_nli_jsonl(path), "snli_1.0_train.jsonl:1", "nested too deeply")


@case("c2-vocabulary-not-utf8")
def test_vocabulary_not_utf8(tmp_path: Path, case: str) -> None:
    path = tmp_path / "vocab.json"
    path.write_bytes(b'{"format": "attnmatch.vocab/1", "tokens": ["<pad>", "<unk>", "\xff"]}')
    failure(lambda: Vocab.load(path), "vocab.json", "not UTF-8")


# --- c2: fuzzing: arbitrary bytes parse or fail naming the file ----------------------------------

# Texts near the formats: header words, tabs, line ends, labels, quotes, JSON, a BOM, bad bytes.
_PIECES = [
    "left",
    "right",
    "label",
    "group",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "0",
    "1",
    "-1",
    "2.5",
    "nan",
    "inf",
    "q1",
    "a b",
    '"',
    "{",
    "}",
    '"left": "x"',
    ",",
    "\ufeff",
    " ",
    "é",
]
near_text = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)
near_bytes = st.one_of(
    st.binary(max_size=200),
    near_text.map(lambda t: t.encode("utf-8")),
    st.tuples(near_text, st.binary(max_size=4)).map(lambda p: p[0].encode() + p[1]),
)


def _parsed_or_named(call: Callable[[], Any], name: str) -> None:
    try:
        call()
    except (ValueError, OSError) as e:
        assert_clear_exception(e, name)


@pytest.mark.parametrize("gz", [False, True], ids=["c2-fuzz-pairs-folder", "c2-fuzz-pairs-gz"])
@FUZZ
@given(data=near_bytes, dev=near_bytes)
def test_fuzz_pairs_folder(gz: bool, data: bytes, dev: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        name = "train.tsv.gz" if gz else "train.tsv"
        folder = Path(tmp)
        (folder / name).write_bytes(gzip.compress(data) if gz and data[:1] != b"x" else data)
        (folder / "dev.tsv").write_bytes(dev)
        try:
            pairs_split(folder)
        except (ValueError, OSError) as e:
            assert_clear_exception(e, name)
            return
        try:
            pairs_split(folder, "dev")
        except (ValueError, OSError) as e:
            message = assert_clear_exception(e)
            assert "dev.tsv" in message or name in message, message


@pytest.mark.parametrize(
    "name",
    ["pairs.tsv", "pairs.jsonl", "pairs.tsv.gz"],
    ids=["c2-fuzz-score-tsv", "c2-fuzz-score-jsonl", "c2-fuzz-score-gz"],
)
@FUZZ
@given(data=near_bytes)
def test_fuzz_score_file(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)

        def read() -> None:
            with PairsFile(path) as pairs:
                for record in pairs:
                    assert isinstance(record.left, str) and isinstance(record.right, str)

        _parsed_or_named(read, name)


@case("c2-fuzz-candidates")
@FUZZ
@given(data=near_bytes)
def test_fuzz_candidates(data: bytes, case: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cands.txt"
        path.write_bytes(data)
        try:
            texts, lines = read_candidates(path)
        except (ValueError, OSError) as e:
            assert_clear_exception(e, "cands.txt")
            return
        assert len(texts) == len(lines) and all(t and t == t.strip() for t in texts)
        assert lines == sorted(set(lines)) and all(n >= 1 for n in lines)


@pytest.mark.parametrize("name", ["spec.tsv", "spec.tsv.gz"], ids=["c7-fuzz-tsv", "c7-fuzz-tsv-gz"])
@FUZZ
@given(data=near_bytes)
def test_fuzz_spec_tsv_rows(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        _parsed_or_named(lambda: list(tsv_rows(path, header=("left", "right", "label"))), name)


@case("c2-fuzz-quora-original-csv")
@FUZZ
@given(data=near_bytes)
def test_fuzz_quora_original_csv(data: bytes, case: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "quora_duplicate_questions.tsv"
        path.write_bytes(b"id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n" + data)
        _parsed_or_named(lambda: read_quora_original_tsv(path), "quora_duplicate_questions.tsv")


@case("c2-fuzz-nli-jsonl")
@FUZZ
@given(data=near_bytes)
def test_fuzz_nli_jsonl(data: bytes, case: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snli_1.0_train.jsonl"
        path.write_bytes(data)
        _parsed_or_named(lambda: read_nli_jsonl(path), "snli_1.0_train.jsonl")


# --- c4: labels, groups and pairs that are refused ------------------------------------------------


@pytest.mark.parametrize(
    ("label", "needle"),
    [
        pytest.param("nan", "NaN", id="c4-nan-label"),
        pytest.param("inf", "infinite", id="c4-inf-label"),
        pytest.param("-Infinity", "infinite", id="c4-minus-infinity-label"),
        pytest.param("", "empty", id="c4-empty-label"),
    ],
)
def test_unreadable_labels(tmp_path: Path, label: str, needle: str) -> None:
    folder = folder_of(
        tmp_path, train_tsv=tsv(GROUPED, *ranking_rows(), f"q9\tquestion\tx\t{label}")
    )
    failure(lambda: pairs_split(folder), "train.tsv:11", needle)


@case("c4-negative-ranking-label")
def test_negative_ranking_label(tmp_path: Path, case: str) -> None:
    rows = ranking_rows() + ["q0\tquestion 0 ?\tbad answer\t-1"]
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *rows))
    failure(lambda: pairs_split(folder, task="ranking"), "train.tsv:11", "-1", "negative")


@case("c4-label-2-in-binary-relevance-dev")
def test_label_2_in_binary_relevance_dev(tmp_path: Path, case: str) -> None:
    dev = ranking_rows(2) + ["q1\tquestion 1 ?\tanother\t2"]
    folder = folder_of(
        tmp_path, train_tsv=tsv(GROUPED, *ranking_rows()), dev_tsv=tsv(GROUPED, *dev)
    )
    failure(lambda: pairs_split(folder, "dev"), "dev.tsv:8", "label 2", "binary")


@case("c4-grade-above-trains-highest")
def test_grade_above_trains_highest(tmp_path: Path, case: str) -> None:
    train = [row[:-1] + grade for row, grade in zip(ranking_rows(), "3210123210", strict=False)]
    dev = ["q0\tquestion 0 ?\tx\t1", "q0\tquestion 0 ?\ty\t7"]
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *train), dev_tsv=tsv(GROUPED, *dev))
    assert pairs_split(folder, task="ranking").task.kind == "ranking"
    failure(lambda: pairs_split(folder, "dev", task="ranking"), "dev.tsv:3", "7", "highest grade 3")


@case("c4-ranking-without-a-relevant-pair")
def test_ranking_without_a_relevant_pair(tmp_path: Path, case: str) -> None:
    rows = [row[:-1] + "0" for row in ranking_rows()]
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *rows))
    failure(lambda: pairs_split(folder, task="ranking"), "train.tsv", "no label is above 0")


@case("c4-dev-without-a-relevant-pair")
def test_dev_without_a_relevant_pair(tmp_path: Path, case: str) -> None:
    dev = [row[:-1] + "0" for row in ranking_rows(2)]
    folder = folder_of(
        tmp_path, train_tsv=tsv(GROUPED, *ranking_rows()), dev_tsv=tsv(GROUPED, *dev)
    )
    failure(lambda: pairs_split(folder, "dev"), "dev.tsv", "'dev'", "no relevant pair")


@case("c4-held-out-dev-without-a-relevant-pair")
def test_held_out_dev_without_a_relevant_pair(tmp_path: Path, case: str) -> None:
    # Ten queries with answers, and many without: every seed holds out a query without.
    rows = ranking_rows(1) + [f"n{i}\tlonely {i}\tnothing {i}\t0" for i in range(60)]
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *rows))
    failure(
        lambda: load_train_dev_test(f"pairs:{folder}", test=None),
        "no dev.tsv",
        "train.tsv",
        "holdout_seed",
    )


@case("c4-group-reused-for-two-questions")
def test_group_reused_for_two_questions(tmp_path: Path, case: str) -> None:
    rows = ranking_rows() + ["q1\tanother question\tanswer\t0"]
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *rows))
    message = failure(lambda: pairs_split(folder), "train.tsv:11", "line 5", "'q1'")
    assert "another question" in message and "question 1 ?" in message


@case("c4-same-pair-with-two-labels")
def test_same_pair_with_two_labels(tmp_path: Path, case: str) -> None:
    rows = ranking_rows() + ["q0\tquestion 0 ?\tanswer 0.0\t0"]
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *rows))
    failure(lambda: pairs_split(folder), "train.tsv", "line 2: '1', line 11: '0'", "--on-conflict")


@case("c4-same-pair-with-two-labels-differing-in-spaces")
def test_same_pair_with_two_labels_differing_in_spaces(tmp_path: Path, case: str) -> None:
    rows = ["a  b\tc d\t1", "e f\tg h\t0", "a b\tc d \t0"]
    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, *rows))
    failure(lambda: pairs_split(folder), "train.tsv", "line 2: '1', line 4: '0'")


@case("c4-same-pair-twice-is-read-once")
def test_same_pair_twice_is_read_once(tmp_path: Path, case: str) -> None:
    rows = ranking_rows()
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *rows, rows[4], rows[0]))
    split = pairs_split(folder)
    assert len(split.examples) == 9  # the repeats of lines 6 and 2 dropped
    assert [ex.id for ex in split.examples][-1] == "train.tsv:10"
    (note,) = [n for n in split.notes if "repeated" in n]
    assert "2 repeated pair(s)" in note and "line 11 repeats line 6" in note


@case("c4-duplicate-header-column")
def test_duplicate_header_column(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv=tsv("left\tright\tlabel\tlabel", "a\tb\t1\t0"))
    failure(lambda: pairs_split(folder), "train.tsv:1", "['label']", "named twice")


@case("c4-unknown-header-column")
def test_unknown_header_column(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv=tsv("left\tright\tscore", "a\tb\t1"))
    failure(lambda: pairs_split(folder), "train.tsv:1", "'score'")


@case("c4-score-outside-trains-range")
def test_score_outside_trains_range(tmp_path: Path, case: str) -> None:
    train = ["a b\tc d\t0", "e f\tg h\t2.5", "i j\tk l\t5", "m n\to p\t1"]
    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, *train), test_tsv=tsv(HEADER, "a\tb\t5.5"))
    failure(lambda: pairs_split(folder, "test"), "test.tsv:2", "5.5", "0..5", "max_score")
    widened = pairs_split(folder, "test", min_score=0, max_score=6)
    assert widened.examples[0].label == 5.5


@case("c4-score-outside-given-range")
def test_score_outside_given_range(tmp_path: Path, case: str) -> None:
    train = ["a b\tc d\t0", "e f\tg h\t2.5", "i j\tk l\t5", "m n\to p\t1"]
    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, *train))
    failure(lambda: pairs_split(folder, max_score=4), "train.tsv:4", "score 5 outside 0..4")


@case("c4-class-not-in-train")
def test_class_not_in_train(tmp_path: Path, case: str) -> None:
    train = ["a b\tc d\tyes", "e f\tg h\tno", "i j\tk l\tyes"]
    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, *train), dev_tsv=tsv(HEADER, "a\tb\tmaybe"))
    failure(lambda: pairs_split(folder, "dev"), "dev.tsv:2", "'maybe'", "not a class of train")


@case("c4-fit-labels-checked-like-files")
def test_fit_labels_checked_like_files(case: str) -> None:
    scheme = choose_task([0.0, 1.0, 1.0], ["q", "q", "r"], task="ranking")
    failure(lambda: scheme.label(-1.0, "train: row 3"), "train: row 3", "negative")
    failure(lambda: scheme.label(3.0, "dev: row 0"), "dev: row 0", "binary")


@case("c4-fit-conflicting-duplicate-pair")
def test_fit_refuses_a_pair_given_twice_with_two_labels(case: str) -> None:
    from attnmatch.training.api import as_examples

    pairs = [("a b", "c d", 1), ("e f", "g h", 0), ("a  b", "c d ", 0)]
    failure(lambda: as_examples(pairs, "train"), "train: row 2", "row 0", "another label")
    kept = as_examples([("a b", "c d", 1), ("a b", "c d", 1), ("e f", "g h", 0)], "train")
    assert [ex.label for ex in kept] == [1, 1, 0]  # exact repeats are the caller's weighting


@case("c4-quora-train-label")
def test_quora_train_label(tmp_path: Path, case: str) -> None:
    (tmp_path / "train.tsv").write_bytes(tsv("1\ta b\tc d\t7", "2\te f\tg h\t8"))
    failure(lambda: load_split("quora", "train", data_dir=tmp_path), "train.tsv:2", "label")


@case("c4-snli-train-gold-label")
def test_snli_train_gold_label(tmp_path: Path, case: str) -> None:
    obj = {"gold_label": "maybe", "sentence1": "a", "sentence2": "b", "pairID": "1"}
    path = tmp_path / "snli_1.0_train.jsonl"
    path.write_text(json.dumps(obj) + "\n")
    failure(lambda: read_nli_jsonl(path), "snli_1.0_train.jsonl:1", "gold_label")


@case("c4-jsonl-nan-would-be-invalid-output")
def test_jsonl_nan_would_be_invalid_output(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        '{"left": "a", "right": "b", "weight": 1}\n{"left": "c", "right": "d", "weight": NaN}\n'
    )
    failure(lambda: list(PairsFile(path)), "pairs.jsonl:2", "NaN")


@case("c4-jsonl-number-beyond-float")
def test_jsonl_number_beyond_float(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"left": "a", "right": "b", "weight": 1e999}\n')
    failure(lambda: list(PairsFile(path)), "pairs.jsonl:1", "1e999")


@case("c4-jsonl-key-given-twice")
def test_jsonl_key_given_twice(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"left": "a", "right": "b", "left": "c"}\n')
    failure(lambda: list(PairsFile(path)), "pairs.jsonl:1", "'left'", "twice")


def _stub_matcher(scores: list[float]) -> Any:
    def predict_pairs(pairs: list[tuple[str, str]]) -> Predictions:
        return Predictions(scores=np.asarray(scores[: len(pairs)], dtype=np.float32))

    return SimpleNamespace(task=RankingTask(), predict_pairs=predict_pairs)


@case("c4-nan-score-is-never-written")
def test_nan_score_is_never_written(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"left": "a", "right": "b"}\n\n{"left": "c", "right": "d"}\n')
    out = tmp_path / "scored.jsonl"
    with PairsFile(path) as pairs:
        matcher = _stub_matcher([0.5, float("nan")])
        failure(lambda: write_scored(matcher, pairs, out), "pairs.jsonl:3", "nan", "not a finite")
    assert not out.exists()


@case("c4-scored-jsonl-is-valid-json")
def test_scored_jsonl_is_valid_json(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"left": "a", "right": "b", "meta": {"x": [1.5, null]}}\n')
    out = tmp_path / "scored.jsonl"
    with PairsFile(path) as pairs:
        assert write_scored(_stub_matcher([0.25]), pairs, out) == 1
    row = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(c))
    assert row == {"left": "a", "right": "b", "meta": {"x": [1.5, None]}, "score": 0.25}


@case("c4-vocabulary-duplicate-token")
def test_vocabulary_duplicate_token(tmp_path: Path, case: str) -> None:
    path = tmp_path / "vocab.json"
    path.write_text(
        json.dumps({"format": "attnmatch.vocab/1", "tokens": ["<pad>", "<unk>", "a", "a"]})
    )
    failure(lambda: Vocab.load(path), "vocab.json", "tokens", "duplicate", "'a'")


# --- c7: errors that say where --------------------------------------------------------------------


@case("c7-pairs-not-utf8-names-the-line")
def test_pairs_not_utf8_names_the_line(tmp_path: Path, case: str) -> None:
    data = tsv(HEADER, "a\tb\t1", "c\td\t0") + b"caf\xe9\tx\t1\n"
    folder = folder_of(tmp_path, train_tsv=data)
    failure(lambda: pairs_split(folder), "train.tsv:4", "not UTF-8", "0xe9", "column 4")


@case("c7-gz-not-utf8-far-down-names-the-line")
def test_gz_not_utf8_far_down_names_the_line(tmp_path: Path, case: str) -> None:
    lines = [line.encode() + b"\n" for line in [GROUPED, *noisy_lines(5000)]]
    lines[4321] = b"q1\tquestion 1\t\xff\xfe\t0\n"
    folder = folder_of(tmp_path, train_tsv_gz=gzip.compress(b"".join(lines)))
    failure(lambda: pairs_split(folder), "train.tsv.gz:4322", "not UTF-8")


@case("c7-score-jsonl-not-utf8")
def test_score_jsonl_not_utf8(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(b'{"left": "a", "right": "b"}\n{"left": "\xc3", "right": "b"}\n')
    failure(lambda: list(PairsFile(path)), "pairs.jsonl:2", "not UTF-8")


@case("c7-candidates-not-utf8-names-the-line")
def test_candidates_not_utf8_names_the_line(tmp_path: Path, case: str) -> None:
    path = tmp_path / "cands.txt"
    path.write_bytes(b"one\n\ntwo\nthr\x80ee\n")
    failure(lambda: read_candidates(path), "cands.txt:4", "not UTF-8")


@case("c7-corpus-file-not-utf8")
def test_corpus_file_not_utf8(tmp_path: Path, case: str) -> None:
    path = tmp_path / "WikiQA-train.tsv"
    row = "Q1\tq ?\tD1\tt\tD1-0\ts\t1"
    path.write_bytes(tsv("\t".join(WIKIQA_HEADER), row, row) + b"Q2\t\x92q\tD\tt\tD-1\ts\t0\n")
    failure(lambda: read_wikiqa_tsv(path), "WikiQA-train.tsv:4", "not UTF-8")


@case("c7-dev-label-names-dev-file")
def test_dev_label_names_dev_file(tmp_path: Path, case: str) -> None:
    train = ["a b\tc d\t0", "e f\tg h\t1"]
    folder = folder_of(
        tmp_path, train_tsv=tsv(HEADER, *train), dev_tsv=tsv(HEADER, "x\ty\t", "z\tw\t1")
    )
    failure(lambda: pairs_split(folder, "dev"), "dev.tsv:2", "label is empty")


@case("c7-no-query-with-both-names-the-split")
def test_no_query_with_both_names_the_split(case: str) -> None:
    data = EncodedPairs(
        texts=[np.array([2, 3]), np.array([4]), np.array([5])],
        left=np.array([0, 0]),
        right=np.array([1, 2]),
        labels=np.array([1.0, 1.0], dtype=np.float32),
        group_ids=np.array([0, 0]),
        group_names=["q0"],
    )
    where = "pairs:faq train (train.tsv)"
    failure(lambda: RankingGroupSampler(data, where=where), where, "no query has both")


@case("c7-missing-dataset-is-one-line")
def test_missing_dataset_is_one_line(tmp_path: Path, case: str) -> None:
    from attnmatch.data.datasets import get_dataset

    failure(lambda: find_dataset_dir(get_dataset("wikiqa"), tmp_path), str(tmp_path), "wikiqa")


@case("c7-checksum-mismatch-is-one-line")
def test_checksum_mismatch_is_one_line(tmp_path: Path, case: str) -> None:
    (tmp_path / "WikiQA-dev.tsv.gz").write_bytes(gzip.compress(b"not wikiqa\n"))
    failure(lambda: load_split("wikiqa", "dev", data_dir=tmp_path), "WikiQA-dev.tsv.gz", "sha256")


@case("c7-cli-bad-label-names-file-and-line")
def test_cli_bad_label_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, case: str
) -> None:
    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, "a\tb\t1", "c\td\tnan"))
    outcome = run_cli(["datasets", "info", "pairs", "--data-dir", folder], capsys)
    assert_clear_error(outcome, "train.tsv:3", "NaN")


# --- c8: a byte order mark is dropped, line numbers are the file's --------------------------------


@case("c8-bom-before-the-pairs-header")
def test_bom_before_the_pairs_header(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv=BOM + tsv(HEADER, "a\tb\t1", "c\td\t0"))
    split = pairs_split(folder)
    assert [(e.left, e.id) for e in split.examples] == [("a", "train.tsv:2"), ("c", "train.tsv:3")]


@case("c8-bom-inside-a-gz")
def test_bom_inside_a_gz(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv_gz=gzip.compress(BOM + tsv(GROUPED, *ranking_rows())))
    split = pairs_split(folder)
    assert split.task.kind == "ranking" and split.examples[0].group == "q0"


@case("c8-bom-keeps-line-numbers")
def test_bom_keeps_line_numbers(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv=BOM + tsv(HEADER, "a\tb\t1", "c\td\t0", "e\tf"))
    failure(lambda: pairs_split(folder), "train.tsv:4", "expected 3 tab-separated fields")


@case("c8-bom-before-a-score-header")
def test_bom_before_a_score_header(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_bytes(BOM + tsv("id\tleft\tright", "7\ta\tb"))
    with PairsFile(path) as pairs:
        assert pairs.format == "tsv-header" and pairs.columns == ["id", "left", "right"]
        (record,) = list(pairs)
    assert (record.left, record.extra, record.line) == ("a", {"id": "7"}, 2)


@case("c8-bom-before-jsonl")
def test_bom_before_jsonl(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(BOM + b'{"left": "a", "right": "b"}\n')
    with PairsFile(path) as pairs:
        assert [(r.left, r.line) for r in pairs] == [("a", 1)]


@case("c8-bom-before-the-first-candidate")
def test_bom_before_the_first_candidate(tmp_path: Path, case: str) -> None:
    path = tmp_path / "cands.txt"
    path.write_bytes(BOM + b"first\r\n\r\n  second  \nthird")
    assert read_candidates(path) == (["first", "second", "third"], [1, 3, 4])


@case("c8-candidates-on-stdin")
def test_candidates_on_stdin(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(BOM + b"one\n\ntwo\n"), encoding="utf-8")
    monkeypatch.setattr("sys.stdin", stdin)
    assert read_candidates(Path("-")) == (["one", "two"], [1, 3])


@case("c8-bom-before-a-corpus-header")
def test_bom_before_a_corpus_header(tmp_path: Path, case: str) -> None:
    path = tmp_path / "WikiQA-dev.tsv"
    path.write_bytes(BOM + tsv("\t".join(WIKIQA_HEADER), "Q1\tq ?\tD1\tt\tD1-0\ts\t1"))
    (example,) = read_wikiqa_tsv(path)
    assert (example.group, example.left, example.label) == ("Q1", "q ?", 1)


@case("c8-lone-carriage-return-ends-a-line")
def test_lone_carriage_return_ends_a_line(tmp_path: Path, case: str) -> None:
    path = tmp_path / "old-mac.tsv"
    path.write_bytes(b"a\tb\rc\td\r\ne\tf\n")
    with open_text(path) as f:
        assert list(f) == ["a\tb\r", "c\td\r\n", "e\tf\n"]
        assert f.lineno == 3


@case("c8-csv-field-limit-restored-after-an-error")
def test_csv_field_limit_restored_after_an_error(tmp_path: Path, case: str) -> None:
    # The Ubuntu reader raises the process-wide csv field limit for long contexts while it reads.
    path = tmp_path / "train.csv"
    path.write_text("Context,Utterance,Label\na,b,1.0\nc,d,7\n")
    before = csv.field_size_limit()
    failure(lambda: read_train_csv(path), "train.csv:3", "Label")
    assert csv.field_size_limit() == before


@case("c4-score-header-left-without-right")
def test_score_header_naming_left_but_not_right(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("left\tanswer\nq\ta\n", encoding="utf-8")
    failure(lambda: PairsFile(path), "pairs.tsv:1", "'left'", "no 'right'", "--format")
    with PairsFile(path, "tsv") as pairs:  # said to be pairs: the first line is one
        assert [(r.left, r.right, r.line) for r in pairs] == [("left", "answer", 1), ("q", "a", 2)]


@case("c4-score-headerless-first-pair")
def test_score_headerless_first_pair_is_never_guessed(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("question\tanswer\nleft\tright\n", encoding="utf-8")
    failure(lambda: PairsFile(path), "pairs.tsv:1", "--format tsv")
    with PairsFile(path, "tsv") as pairs:  # a pair reading "left<TAB>right" is a pair too
        assert [(r.left, r.right) for r in pairs] == [("question", "answer"), ("left", "right")]
    path.write_text("left\tright\n", encoding="utf-8")
    assert list(PairsFile(path, "tsv-header")) == []  # a header, no pairs
    path.write_text("question\tanswer\n", encoding="utf-8")
    failure(lambda: PairsFile(path, "tsv-header"), "pairs.tsv:1", "no left and no right")


@case("c4-score-json-line-holding-a-tab")
def test_score_json_line_holding_a_tab(tmp_path: Path, case: str) -> None:
    path = tmp_path / "pairs.txt"
    path.write_text('{"left": "a",\t"right": "b"}\n', encoding="utf-8")
    failure(lambda: PairsFile(path), "pairs.txt:1", "JSON", "tab", "--format jsonl")
    with PairsFile(path, "jsonl") as pairs:
        assert [(r.left, r.right) for r in pairs] == [("a", "b")]


@case("c7-score-format-unknown")
def test_score_unknown_format_names_the_option(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\n", encoding="utf-8")
    outcome = run_cli(["score", "overlap", path, "--format", "csvish"], capsys)
    assert_clear_error(outcome, "--format", "tsv-header")


def paraphrase_rows() -> list[str]:
    """0/1 pairs without a group column where left texts recur (as in paraphrase sets)."""
    rows = []
    for i in range(20):
        rows += [f"sentence {i}\tsame as {i}\t1", f"sentence {i}\tunlike {i}\t0"]
    return rows


@case("c4-pairs-recurring-left-text-is-no-group")
def test_recurring_left_texts_do_not_make_a_ranking_task(tmp_path: Path, case: str) -> None:
    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, *paraphrase_rows()))
    split = pairs_split(folder)
    assert split.task.kind == "classification" and split.task.metrics == ("accuracy", "f1")
    assert "no group column" in split.notes[0]
    grouped = [f"g{i // 2}\t{row}" for i, row in enumerate(paraphrase_rows())]
    folder = folder_of(tmp_path / "grouped", train_tsv=tsv(GROUPED, *grouped))
    assert pairs_split(folder).task.kind == "ranking"  # a group column says so


@case("c4-pairs-stray-label-outside-0-1")
def test_a_stray_label_is_an_error_naming_its_line(tmp_path: Path, case: str) -> None:
    rows = ranking_rows(40)
    rows[7] = rows[7].rsplit("\t", 1)[0] + "\t-1"
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *rows))
    failure(lambda: pairs_split(folder), "train.tsv:9", "label -1", "outside the 0/1", "--task")
    assert pairs_split(folder, task="regression").task.kind == "regression"  # said: read as is
    rows[8] = rows[8].rsplit("\t", 1)[0] + "\t2"
    folder = folder_of(tmp_path / "two", train_tsv=tsv(GROUPED, *rows))
    message = failure(lambda: pairs_split(folder), "train.tsv:9")
    assert "train.tsv:10 (2)" in message and "2 such label(s)" in message


@case("c4-pairs-conflicting-labels-all-listed")
def test_every_conflicting_pair_is_listed_and_a_policy_settles_them(
    tmp_path: Path, case: str
) -> None:
    rows = [*ranking_rows(3), "q0\tquestion 0 ?\tanswer 0.0\t0", "q2\tquestion 2 ?\tanswer 2.1\t1"]
    folder = folder_of(tmp_path, train_tsv=tsv(GROUPED, *rows))
    message = failure(lambda: pairs_split(folder), "2 pair(s)", "--on-conflict drop")
    assert "line 2: '1', line 11: '0'" in message and "line 9: '0', line 12: '1'" in message
    dropped = pairs_split(folder, on_conflict="drop")
    assert len(dropped.examples) == 7  # both lines of both pairs gone
    assert any("lines 2, 9, 11, 12 dropped" in n for n in dropped.notes)
    kept = pairs_split(folder, on_conflict="max")
    assert {(ex.right, ex.label) for ex in kept.examples} >= {("answer 0.0", 1), ("answer 2.1", 1)}
    assert len(kept.examples) == 9
    failure(lambda: pairs_split(folder, on_conflict="most"), "on_conflict", "error, drop, max")


@case("c7-cli-task-with-pairs-folder")
def test_task_and_on_conflict_are_taken_with_a_pairs_folder(tmp_path: Path, case: str) -> None:
    import typer

    from attnmatch.cli.training import _experiment

    folder = folder_of(tmp_path, train_tsv=tsv(HEADER, *paraphrase_rows()))
    data = {"dataset": f"pairs:{folder}", "options": {"task": "ranking", "on_conflict": "drop"}}
    exp = _experiment(None, {"model": "bm25", "data": data}, ["--task", "--on-conflict"])
    assert exp.data.options == {"task": "ranking", "on_conflict": "drop"}
    with pytest.raises(typer.BadParameter, match="--on-conflict is for your own pairs"):
        _experiment(None, {"data": {"dataset": "wikiqa"}}, ["--on-conflict"])
