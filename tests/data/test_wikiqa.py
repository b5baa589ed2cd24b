"""WikiQA on the bundled copy: counts, protocols, agreement with the official .ref qrels, the
parser's errors, checksums and where data is looked for. Offline, a few seconds."""

from __future__ import annotations

import gzip
import shutil
import zipfile
from collections.abc import Iterable
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from attnmatch.data.datasets import (
    ChecksumError,
    DatasetFormatError,
    DatasetNotFoundError,
    Split,
    _spec,
    find_dataset_dir,
    get_dataset,
    is_available,
    list_datasets,
    load_split,
    parse_dataset_ref,
    verify_dataset,
)
from attnmatch.data.datasets._spec import download_dataset
from attnmatch.data.datasets.wikiqa import SPEC, load_ref, read_wikiqa_tsv
from attnmatch.data.schema import Example

DATA = Path(__file__).parents[2] / "data"
WIKIQA = DATA / "wikiqa"
HEADER = "QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel"


@cache
def _load(split: str, **options: object) -> Split:
    return load_split("wikiqa", split, data_dir=DATA, **options)


def _groups(examples: Iterable[Example]) -> dict[str, list[int]]:
    """Labels per question, questions in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for ex in examples:
        assert ex.group is not None
        groups.setdefault(ex.group, []).append(int(ex.label))
    return groups


def _qrels(examples: Iterable[Example]) -> dict[int, dict[int, int]]:
    """Our examples numbered the way the .ref files are (1-based questions, 0-based sentences)."""
    return {
        qidx: dict(enumerate(labels))
        for qidx, labels in enumerate(_groups(examples).values(), start=1)
    }


def _write(path: Path, rows: list[str], newline: str = "\r\n") -> Path:
    path.write_bytes("".join(r + newline for r in rows).encode("utf-8"))
    return path


# --- the bundled data ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "options", "pairs", "questions"),
    [
        ("train", {}, 8_672, 873),
        ("train", {"train_questions": "all"}, 20_360, 2_118),
        ("dev", {}, 2_733, 296),
        ("test", {}, 6_165, 633),
    ],
)
def test_counts(split: str, options: dict, pairs: int, questions: int) -> None:
    loaded = _load(split, **options)
    assert (loaded.dataset, loaded.split, loaded.task.kind) == ("wikiqa", split, "ranking")
    assert len(loaded.examples) == pairs
    assert len(_groups(loaded.examples)) == questions
    assert {ex.label for ex in loaded.examples} == {0, 1}


@pytest.mark.parametrize(
    ("split", "filtered", "name", "kept"),
    [
        ("dev", False, "wikiqa-official", 126),
        ("test", False, "wikiqa-official", 243),
        ("dev", True, "wikiqa-filtered", 122),
        ("test", True, "wikiqa-filtered", 237),
        ("train", False, "wikiqa-official", 873),
    ],
)
def test_protocol_keeps(split: str, filtered: bool, name: str, kept: int) -> None:
    loaded = _load(split, filtered=filtered)
    assert loaded.options["filtered"] is filtered
    assert loaded.protocol is not None and loaded.protocol.name == name
    groups = _groups(loaded.examples).values()
    assert sum(loaded.protocol.keeps(labels) for labels in groups) == kept
    assert SPEC.protocol(split, filtered=filtered) == loaded.protocol


def test_fields_of_first_example() -> None:
    first = _load("train", train_questions="all").examples[0]
    assert first == Example(
        left="how are glacier caves formed?",
        right="A partly submerged glacier cave on Perito Moreno Glacier .",
        label=0,
        group="Q1",
        id="D1-0",
    )


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_qrels_equal_official_ref(split: str) -> None:
    examples = _load(split, train_questions="all").examples
    assert _qrels(examples) == load_ref(WIKIQA / f"WikiQA-{split}.ref")


@pytest.mark.parametrize("split", ["dev", "test"])
def test_filtered_protocol_keeps_the_filtered_ref_questions(split: str) -> None:
    loaded = _load(split, filtered=True)
    assert loaded.protocol is not None
    ours = {
        q: rels
        for q, rels in _qrels(loaded.examples).items()
        if loaded.protocol.keeps(list(rels.values()))
    }
    assert ours == load_ref(WIKIQA / f"WikiQA-{split}-filtered.ref")


def test_no_line_ends_left_in_fields() -> None:
    for split in ("train", "dev", "test"):
        for ex in _load(split).examples:
            assert "\r" not in ex.right and "\n" not in ex.right and "\r" not in ex.left


def test_sha256sums_agree_with_spec() -> None:
    listed = {}
    for line in (WIKIQA / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    assert {f.name: f.sha256 for f in SPEC.files}.items() <= listed.items()
    assert set(listed) == {p.name for p in WIKIQA.iterdir()} - {"SHA256SUMS"}


def test_verify_bundled() -> None:
    checks = verify_dataset("wikiqa", DATA)
    assert [c.status for c in checks] == ["ok"] * len(SPEC.files)
    assert is_available(SPEC, DATA) and is_available("wikiqa", WIKIQA)


# --- the parser ------------------------------------------------------------------------------

ROWS = [
    HEADER,
    'Q1\twhat is "x"?\tD1\tX\tD1-0\tX is "quoted" here .\t0',
    'Q1\twhat is "x"?\tD1\tX\tD1-1\tX is a letter .\t1',
    "Q2\twho?\tD2\tY\tD2-0\tNobody .\t0",
]


def test_crlf_lf_and_gzip_parse_alike(tmp_path: Path) -> None:
    crlf = read_wikiqa_tsv(_write(tmp_path / "crlf.tsv", ROWS, "\r\n"))
    lf = read_wikiqa_tsv(_write(tmp_path / "lf.tsv", ROWS, "\n"))
    gz = tmp_path / "crlf.tsv.gz"
    gz.write_bytes(gzip.compress((tmp_path / "crlf.tsv").read_bytes()))
    assert crlf == lf == read_wikiqa_tsv(gz)
    assert crlf[0].right == 'X is "quoted" here .' and crlf[0].left == 'what is "x"?'
    assert [ex.label for ex in crlf] == [0, 1, 0] and crlf[2].group == "Q2"


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (["QuestionID\tQuestion\tLabel", *ROWS[1:]], r"bad\.tsv:1: expected the header"),
        ([], r"bad\.tsv:1: expected the header"),
        (
            [*ROWS[:3], "Q2\twho?\tD2\tY\tD2-0\t0"],
            r"bad\.tsv:4: expected 7 tab-separated fields, got 6",
        ),
        ([*ROWS[:2], "", *ROWS[2:]], r"bad\.tsv:3: expected 7 .* got 1"),
        ([ROWS[0], "Q1\tq\tD1\tX\tD1-0\ts\t2"], r"bad\.tsv:2: Label must be 0 or 1, got '2'"),
        ([ROWS[0], "Q1\tq\tD1\tX\tD1-0\ts\t"], r"bad\.tsv:2: Label must be 0 or 1, got ''"),
    ],
)
def test_parser_errors_name_file_and_line(tmp_path: Path, rows: list[str], match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_wikiqa_tsv(_write(tmp_path / "bad.tsv", rows))


def test_load_ref_rejects_bad_lines(tmp_path: Path) -> None:
    (tmp_path / "x.ref").write_text("1 0 0 1\n1 0 one 0\n")
    with pytest.raises(DatasetFormatError, match=r"x\.ref:2:"):
        load_ref(tmp_path / "x.ref")


# --- checksums -------------------------------------------------------------------------------


def test_checksum_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "wikiqa"
    folder.mkdir()
    copy = folder / "WikiQA-dev.tsv.gz"
    shutil.copyfile(WIKIQA / "WikiQA-dev.tsv.gz", copy)
    assert len(load_split("wikiqa", "dev", data_dir=tmp_path).examples) == 2_733
    # Same size, different bytes: only the digest (not the size) tells them apart.
    data = bytearray(copy.read_bytes())
    data[-5] ^= 0xFF
    copy.write_bytes(bytes(data))
    expected = SPEC.file("WikiQA-dev.tsv.gz").sha256
    with pytest.raises(ChecksumError, match="WikiQA-dev.tsv.gz") as info:
        load_split("wikiqa", "dev", data_dir=folder)
    assert expected in str(info.value) and "actual" in str(info.value)
    [check] = [c for c in verify_dataset("wikiqa", folder) if c.status == "mismatch"]
    assert check.file == "WikiQA-dev.tsv.gz" and expected in check.detail


def test_uncompressed_original_is_accepted(tmp_path: Path) -> None:
    original = tmp_path / "WikiQA-dev.tsv"
    original.write_bytes(gzip.decompress((WIKIQA / "WikiQA-dev.tsv.gz").read_bytes()))
    assert load_split("wikiqa", "dev", data_dir=tmp_path).examples == _load("dev").examples
    statuses = {c.file: c.status for c in verify_dataset("wikiqa", tmp_path)}
    assert statuses["WikiQA-dev.tsv"] == "ok" and statuses["WikiQA-test.tsv.gz"] == "missing"
    assert not is_available("wikiqa", tmp_path)
    with pytest.raises(DatasetNotFoundError, match="WikiQA-test.tsv.gz or WikiQA-test.tsv"):
        load_split("wikiqa", "test", data_dir=tmp_path)


# --- where data is looked for ----------------------------------------------------------------


def test_data_dir_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env, cwd, home = tmp_path / "env", tmp_path / "cwd", tmp_path / "home"
    places = {
        "env": env / "wikiqa",
        "cwd": cwd / "data" / "wikiqa",
        "cache": home / ".cache" / "attnmatch" / "wikiqa",
    }
    for folder in places.values():
        folder.mkdir(parents=True)
        shutil.copyfile(WIKIQA / "README.txt", folder / "README.txt")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("ATTNMATCH_DATA", str(env))

    assert find_dataset_dir(SPEC, DATA) == WIKIQA  # explicit parent wins
    assert find_dataset_dir(SPEC, WIKIQA) == WIKIQA  # explicit dataset folder
    assert find_dataset_dir(SPEC) == places["env"]
    shutil.rmtree(places["env"])
    assert find_dataset_dir(SPEC).resolve() == places["cwd"].resolve()
    shutil.rmtree(places["cwd"])
    assert find_dataset_dir(SPEC) == WIKIQA  # the bundled copy of the source checkout
    monkeypatch.setattr(_spec, "checkout_data_dir", lambda: None)  # an installed package
    assert find_dataset_dir(SPEC) == places["cache"]
    shutil.rmtree(places["cache"])
    with pytest.raises(DatasetNotFoundError) as info:
        find_dataset_dir(SPEC)
    message = str(info.value)
    assert all(str(p.name) in message for p in places.values())
    assert str(env / "wikiqa") in message and str(places["cache"]) in message
    assert "attnmatch datasets fetch wikiqa" in message

    monkeypatch.delenv("ATTNMATCH_DATA")
    with pytest.raises(
        DatasetNotFoundError, match=r"\$ATTNMATCH_DATA/wikiqa \(\$ATTNMATCH_DATA is not set\)"
    ):
        find_dataset_dir(SPEC)
    with pytest.raises(DatasetNotFoundError, match="attnmatch datasets fetch wikiqa"):
        find_dataset_dir(SPEC, tmp_path / "nowhere")


def test_explicit_dir_does_not_fall_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNMATCH_DATA", str(DATA))
    assert find_dataset_dir(SPEC) == WIKIQA
    with pytest.raises(DatasetNotFoundError):
        load_split("wikiqa", "dev", data_dir=tmp_path)


# --- the registry and its errors -------------------------------------------------------------


def test_registry() -> None:
    assert get_dataset("wikiqa") is SPEC
    assert SPEC in list_datasets()
    assert SPEC.splits == ("train", "dev", "test") and SPEC.url.endswith("WikiQACorpus.zip")
    with pytest.raises(ValueError, match="unknown dataset 'wikiq'.*known datasets: .*wikiqa"):
        get_dataset("wikiq")


def test_parse_dataset_ref() -> None:
    assert parse_dataset_ref("wikiqa:test") == ("wikiqa", "test")
    assert parse_dataset_ref("wikiqa", default_split="dev") == ("wikiqa", "dev")
    with pytest.raises(ValueError, match="dataset:split"):
        parse_dataset_ref("wikiqa")
    with pytest.raises(ValueError, match="valid splits: train, dev, test"):
        parse_dataset_ref("wikiqa:valid")


@pytest.mark.parametrize(
    ("split", "options", "match"),
    [
        ("valid", {}, "no split 'valid'; valid splits: train, dev, test"),
        (
            "dev",
            {"filter": True},
            r"unknown option\(s\) \['filter'\]; valid options: train_questions, filtered",
        ),
        ("dev", {"filtered": 1}, r"filtered=1 is not one of \(False, True\)"),
        (
            "train",
            {"train_questions": "some"},
            r"train_questions='some' is not one of \('positive', 'all'\)",
        ),
    ],
)
def test_bad_split_and_options(split: str, options: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_split("wikiqa", split, data_dir=DATA, **options)


def test_download_from_a_local_archive(tmp_path: Path) -> None:
    """`download_dataset` end to end on a file:// URL (no network): extraction and checks."""
    archive = tmp_path / "WikiQACorpus.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in SPEC.files:
            name, _ = f.candidates[-1]  # the original (uncompressed) names, as Microsoft ships
            source = WIKIQA / f.name
            data = (
                gzip.decompress(source.read_bytes())
                if f.name.endswith(".gz")
                else source.read_bytes()
            )
            zf.writestr(f"WikiQACorpus/{name}", data)
        zf.writestr("WikiQACorpus/emnlp-table/other.txt", "not a dataset file")
    spec = replace(SPEC, url=archive.as_uri())
    folder = download_dataset(spec, tmp_path / "cache")
    assert folder == tmp_path / "cache" / "wikiqa"
    assert {c.status for c in verify_dataset("wikiqa", folder)} == {"ok"}
    assert not (folder / "other.txt").exists()
    with pytest.raises(ChecksumError, match="archive|expected sha256"):
        download_dataset(replace(spec, archive_sha256="0" * 64), tmp_path / "cache")
    assert {c.status for c in verify_dataset("wikiqa", folder)} == {"ok"}  # left intact


def test_random_resplit_partitions_all_questions() -> None:
    parts = {
        s: load_split("wikiqa", s, resplit="random-80-10-10", train_questions="all")
        for s in ("train", "dev", "test")
    }
    groups = {s: {ex.group for ex in p.examples} for s, p in parts.items()}
    assert sum(len(g) for g in groups.values()) == 3_047
    assert not (groups["train"] & groups["dev"]) and not (groups["dev"] & groups["test"])
    assert not (groups["train"] & groups["test"])
    assert (len(groups["train"]), len(groups["dev"])) == (2_437, 304)
    assert "non-standard" in parts["test"].protocol.name
    again = load_split("wikiqa", "test", resplit="random-80-10-10")
    assert again.examples == parts["test"].examples
    with pytest.raises(ValueError, match="official split only"):
        load_split("wikiqa", "test", resplit="random-80-10-10", filtered=True)
