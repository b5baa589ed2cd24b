"""TrecQA on the bundled copy: counts for both sources, the XML route equal to the processed
files, the clean rule, the protocols, the rebuilt TRAIN-ALL, the parsers' errors and checksums.
Offline, a few seconds."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

from attnmatch.data.datasets import (
    ChecksumError,
    DatasetFormatError,
    Split,
    get_dataset,
    is_available,
    load_split,
    verify_dataset,
)
from attnmatch.data.datasets.trecqa import (
    SPEC,
    WANG2007,
    questions_with_both,
    read_jacana_xml,
    read_posinput,
    read_processed,
    rebuild_train_all,
)
from attnmatch.data.schema import Example

DATA = Path(__file__).parents[2] / "data"
TRECQA = DATA / "trecqa"
SPLITS = ("train", "raw-dev", "raw-test", "clean-dev", "clean-test")


@cache
def _load(split: str, source: str = "processed") -> Split:
    return load_split("trecqa", split, data_dir=DATA, source=source)


def _groups(examples: Iterable[Example]) -> dict[str, list[int]]:
    """Labels per question, questions in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for ex in examples:
        assert ex.group is not None
        groups.setdefault(ex.group, []).append(int(ex.label))
    return groups


def _gunzip_lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().split()


# --- the bundled data ------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["processed", "xml"])
@pytest.mark.parametrize(
    ("split", "pairs", "questions", "positives"),
    [
        ("train", 4_718, 93, 348),
        ("raw-dev", 1_148, 81, 222),
        ("raw-test", 1_517, 95, 284),
        ("clean-dev", 1_117, 65, 205),
        ("clean-test", 1_442, 68, 248),
    ],
)
def test_sizes(split: str, source: str, pairs: int, questions: int, positives: int) -> None:
    loaded = _load(split, source)
    assert (loaded.dataset, loaded.split, loaded.task.kind) == ("trecqa", split, "ranking")
    assert loaded.options == {"source": source}
    assert len(loaded.examples) == pairs == SPEC.split_sizes[split]
    assert len(_groups(loaded.examples)) == questions
    assert sum(ex.label for ex in loaded.examples) == positives
    assert {ex.label for ex in loaded.examples} == {0, 1}


@pytest.mark.parametrize("split", SPLITS)
def test_xml_route_equals_processed_files(split: str) -> None:
    """Same questions, answers, labels, question ids and pair ids, in the same order."""
    assert _load(split, "xml").examples == _load(split).examples


def test_xml_qapairs_without_candidates_are_absent_from_processed() -> None:
    for split, name, empty in [
        ("train", "TRAIN", {"94"}),
        ("raw-dev", "DEV", {"15.3"}),
        ("raw-test", "TEST", {"41.3", "44.4", "58.1", "59.2", "64.3"}),
    ]:
        text = gzip.decompress((TRECQA / f"jacana_xml/{name}.xml.gz").read_bytes()).decode()
        in_xml = re.findall(r"^<QApairs id='([^']*)'>$", text, flags=re.MULTILINE)
        assert set(in_xml) - set(_groups(_load(split).examples)) == empty
        assert len(in_xml) == len(_groups(_load(split).examples)) + len(empty)


@pytest.mark.parametrize(("raw", "clean"), [("raw-dev", "clean-dev"), ("raw-test", "clean-test")])
def test_clean_is_raw_without_questions_lacking_a_positive_or_a_negative(
    raw: str, clean: str
) -> None:
    assert questions_with_both(_load(raw).examples) == _load(clean).examples


@pytest.mark.parametrize("split", SPLITS)
def test_boundary_and_numrels_agree(split: str) -> None:
    """The bundled boundary.txt / numrels.txt: question offsets and positives per question."""
    groups = _groups(_load(split).examples)
    starts = [0]
    for labels in groups.values():
        starts.append(starts[-1] + len(labels))
    boundary = _gunzip_lines(TRECQA / f"processed/{split}/boundary.txt.gz")
    numrels = _gunzip_lines(TRECQA / f"processed/{split}/numrels.txt.gz")
    assert [int(x) for x in boundary] == starts
    assert [int(x) for x in numrels] == [sum(labels) for labels in groups.values()]


def test_first_and_last_rows() -> None:
    train = _load("train").examples
    assert train[0] == Example(
        left="who is the author of the book , `` the iron lady : a biography of margaret "
        "thatcher '' ?",
        right="the iron lady ; a biography of margaret thatcher by hugo young -lrb- farrar , "
        "straus & giroux -rrb-",
        label=1,
        group="1",
        id="1:0",
    )
    assert train[-1].group == "100" and train[-1].id == "100:58" and train[-1].label == 0
    test = _load("raw-test").examples
    assert test[0] == Example(
        left="what do practitioners of wicca worship ?",
        right="an estimated 50,000 americans practice wicca , a form of polytheistic nature "
        "worship .",
        label=1,
        group="32.1",
        id="32.1:0",
    )
    assert (test[-1].group, test[-1].id, test[-1].label) == ("65.6", "65.6:11", 0)
    assert test[-1].left == "how long did the challenger flight last before it exploded ?"


def test_text_is_lower_cased_and_space_joined() -> None:
    for split in SPLITS:
        for ex in _load(split).examples:
            for text in (ex.left, ex.right):
                assert text == text.lower() and text.split(" ") == text.split()
    assert any("-lrb-" in ex.right for ex in _load("train").examples)  # PTB escapes kept


# --- protocols ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "name", "questions", "kept", "no_positive", "all_positive"),
    [
        ("train", "trecqa-raw", 93, 78, 10, 5),
        ("raw-dev", "trecqa-raw", 81, 65, 3, 13),
        ("raw-test", "trecqa-raw", 95, 68, 6, 21),
        ("clean-dev", "trecqa-clean", 65, 65, 0, 0),
        ("clean-test", "trecqa-clean", 68, 68, 0, 0),
        ("train-all-wang2007", "trecqa-train-all-wang2007 (non-standard)", 1_229, 1_161, 0, 68),
    ],
)
def test_protocol_keeps(
    split: str, name: str, questions: int, kept: int, no_positive: int, all_positive: int
) -> None:
    loaded = _load(split)
    protocol = loaded.protocol
    assert protocol is not None and protocol.name == name and protocol.kind == "ranking"
    assert protocol.require_positive and protocol.require_negative
    assert protocol.primary == "map" and {"map", "mrr"} <= set(protocol.metrics)
    groups = _groups(loaded.examples).values()
    assert len(groups) == questions
    assert sum(protocol.keeps(labels) for labels in groups) == kept
    assert sum(not any(labels) for labels in groups) == no_positive
    assert sum(all(labels) for labels in groups) == all_positive
    assert SPEC.protocol(split) == SPEC.protocol(split, source="xml") == protocol


def test_raw_test_evaluates_exactly_the_clean_test_pairs() -> None:
    loaded = _load("raw-test")
    assert loaded.protocol is not None
    groups = _groups(loaded.examples)
    kept = [ex for ex in loaded.examples if loaded.protocol.keeps(groups[str(ex.group)])]
    assert kept == _load("clean-test").examples


def test_spec_metadata() -> None:
    assert get_dataset("trecqa") is SPEC
    assert SPEC.splits == (*SPLITS, "train-all-wang2007")
    assert SPEC.non_standard_splits == ("train-all-wang2007",)
    assert "train-all" not in SPEC.splits
    assert SPEC.options == {"source": ("processed", "xml")}
    assert "NON-STANDARD" in SPEC.protocol_description and "68 of 95" in SPEC.protocol_description
    with pytest.raises(ValueError, match=r"source='raw' is not one of \('processed', 'xml'\)"):
        load_split("trecqa", "raw-test", data_dir=DATA, source="raw")


# --- TRAIN-ALL rebuilt from Wang et al.'s files --------------------------------------------------


def test_train_all_wang2007_counts() -> None:
    loaded = _load("train-all-wang2007")
    examples = loaded.examples
    positives = sum(ex.label for ex in examples)
    assert (positives, len(examples) - positives) == (6_420, 47_006)
    assert len(examples) == SPEC.split_sizes["train-all-wang2007"]
    groups = _groups(examples)
    assert len(groups) == 1_229 and next(iter(groups)) == "1" and list(groups)[-1] == "2392"
    for labels in groups.values():  # positives first, then negatives
        assert labels == sorted(labels, reverse=True)
    assert examples[0] == _load("train").examples[0]  # TRAIN's question 1 is TRAIN-ALL's
    assert examples[-1] == Example(
        left="when was the red cross founded ?",
        right="sources : american red cross , american association of blood banks .",
        label=0,
        group="2392",
        id="2392:7",
    )
    assert not any(ex.right.startswith("< p >") for ex in examples)
    assert _load("train-all-wang2007", "xml").examples == examples  # source is ignored


def test_train_all_from_the_cleaned_positives_does_not_give_6420() -> None:
    folder = TRECQA / "wang2007_train2393_original"
    cleaned = rebuild_train_all(
        folder / "Train1-2393.Question.POSInput.gz",
        folder / "Train1-2393.Positive-M.POSInput.cleaned.gz",
        folder / "Train1-2393.Negative-M.POSInput.gz",
    )
    assert sum(ex.label for ex in cleaned) == 6_409  # 6,410 lines minus one "< P >" line
    raw = read_posinput(folder / "Train1-2393.Positive-M.POSInput.gz", "A")
    assert sum(len(lines) for _, _, lines in raw) == 6_421  # the "< P >" line included


# --- checksums ---------------------------------------------------------------------------------


def test_sha256sums_agree_with_spec() -> None:
    listed = {}
    for line in (TRECQA / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    assert {f.name: f.sha256 for f in SPEC.files}.items() <= listed.items()
    on_disk = {str(p.relative_to(TRECQA)) for p in TRECQA.rglob("*") if p.is_file()}
    assert set(listed) == on_disk - {"SHA256SUMS"}
    assert set(listed) - {f.name for f in SPEC.files} == {"BUNDLED.md"}


def test_verify_bundled() -> None:
    checks = verify_dataset("trecqa", DATA)
    assert [c.status for c in checks] == ["ok"] * len(SPEC.files)
    assert is_available(SPEC, DATA) and is_available("trecqa", TRECQA)


def test_uncompressed_originals_are_accepted(tmp_path: Path) -> None:
    for name in SPEC.split_files["raw-test"]:
        original = tmp_path / name.removesuffix(".gz")
        original.parent.mkdir(parents=True, exist_ok=True)
        original.write_bytes(gzip.decompress((TRECQA / name).read_bytes()))
    for source in ("processed", "xml"):
        loaded = load_split("trecqa", "raw-test", data_dir=tmp_path, source=source)
        assert loaded.examples == _load("raw-test").examples
    checks = verify_dataset("trecqa", tmp_path)
    assert any(c.status == "ok" and c.file.endswith("TEST.xml") for c in checks)
    assert any(c.status == "missing" and c.file.endswith("DEV.xml.gz") for c in checks)
    assert not is_available("trecqa", tmp_path)


def test_checksum_mismatch(tmp_path: Path) -> None:
    folder = tmp_path / "trecqa"
    for name in SPEC.split_files["clean-dev"]:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes((TRECQA / name).read_bytes())
    assert len(load_split("trecqa", "clean-dev", data_dir=tmp_path).examples) == 1_117
    sim = folder / "processed/clean-dev/sim.txt.gz"
    sim.write_bytes(gzip.compress(b"1\n" * 1_117, mtime=0))
    with pytest.raises(ChecksumError, match=r"sim\.txt\.gz"):
        load_split("trecqa", "clean-dev", data_dir=tmp_path)


# --- the processed parser ----------------------------------------------------------------------


def _write_processed(folder: Path, rows: dict[str, list[str]]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in ("a.toks", "b.toks", "sim.txt", "id.txt"):
        (folder / name).write_text("".join(f"{line}\n" for line in rows[name]))
        paths.append(folder / name)
    return paths


GOOD = {
    "a.toks": ["who ?", "who ?", "what ?"],
    "b.toks": ["him .", "her .", "that ."],
    "sim.txt": ["1", "0", "0"],
    "id.txt": ["1.1", "1.1", "2"],
}


def test_read_processed(tmp_path: Path) -> None:
    examples = read_processed(*_write_processed(tmp_path, GOOD))
    assert examples == [
        Example("who ?", "him .", 1, group="1.1", id="1.1:0"),
        Example("who ?", "her .", 0, group="1.1", id="1.1:1"),
        Example("what ?", "that .", 0, group="2", id="2:0"),
    ]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            {"b.toks": ["him .", "her ."]},
            r"b\.toks:3: expected one line per pair like .*a\.toks \(3 lines\), but the file "
            r"ends after 2 lines",
        ),
        ({"sim.txt": ["1", "0"], "id.txt": ["1.1"]}, r"id\.txt:2: .* ends after 1 lines"),
        ({"sim.txt": ["1", "2", "0"]}, r"sim\.txt:2: label must be 0 or 1, got '2'"),
        ({"sim.txt": ["1", "0", "1.0"]}, r"sim\.txt:3: label must be 0 or 1, got '1\.0'"),
        ({"id.txt": ["1.1", "1.1", ""]}, r"id\.txt:3: expected a question id without spaces"),
        ({"id.txt": ["1.1", "2", "1.1"]}, r"id\.txt:3: question id '1\.1' reappears"),
        ({"a.toks": ["who ?", "whom ?", "what ?"]}, r"a\.toks:2: question '1\.1' reads"),
        ({"b.toks": ["him .", "", "that ."]}, r"b\.toks:2: expected tokens, got an empty line"),
    ],
)
def test_processed_errors_name_file_and_line(
    tmp_path: Path, change: dict[str, list[str]], match: str
) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_processed(*_write_processed(tmp_path, {**GOOD, **change}))


# --- the XML parser ----------------------------------------------------------------------------


def _block(tag: str, tokens: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    n = len(tokens)
    rows = ["\t".join(tokens), "\t".join(["NN"] * n), "\t".join(["NMOD"] * n)]
    rows += ["\t".join(["0"] * n), "\t".join(["-"] * n), *extra]
    return [f"<{tag}>", *rows, f"</{tag}>"]


XML = [
    "<QApairs id='7.1'>",
    *_block("question", ["Who", "wrote", "<it>", "?"]),
    *_block("negative", ["Nobody", "&", "me", "."]),
    *_block("positive", ["Ann", "wrote", "it", "."], ("Ann", "1")),
    "</QApairs>",
    "<QApairs id='7.2'>",
    *_block("question", ["Why", "?"]),
    "</QApairs>",
]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_read_jacana_xml(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.xml", XML)
    assert read_jacana_xml(path) == [
        Example("who wrote <it> ?", "nobody & me .", 0, group="7.1", id="7.1:0"),
        Example("who wrote <it> ?", "ann wrote it .", 1, group="7.1", id="7.1:1"),
    ]
    assert read_jacana_xml(path, lowercase=False)[1].right == "Ann wrote it ."
    gz = tmp_path / "x.xml.gz"
    gz.write_bytes(gzip.compress(path.read_bytes().replace(b"\n", b"\r\n")))
    assert read_jacana_xml(gz) == read_jacana_xml(path)


# Lines of XML: 1 <QApairs id='7.1'>, 2-8 the question, 9-15 the negative (9 <negative>,
# 10 tokens, 11 POS tags, ..., 15 </negative>), 16-24 the positive (22-23 the answer lines),
# 25 </QApairs>, 26-34 QApairs '7.2' without candidates.


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        (  # a truncated block: 3 of its 5 lines
            [*XML[:12], *XML[14:]],
            r"bad\.xml:13: the <negative> block opened at line 9 has 3 lines, expected 5 "
            r"\(tokens, POS tags, dependency labels, head indices, NER tags\)",
        ),
        (  # a positive may drop both answer lines, not one
            [*XML[:22], *XML[23:]],
            r"bad\.xml:23: the <positive> block opened at line 16 has 6 lines, expected 5 or 7",
        ),
        (XML[:12], r"bad\.xml:13: the file ends inside the <negative> block opened at line 9"),
        (XML[:-1], r"bad\.xml:34: the file ends inside QApairs '7\.2' opened at line 26"),
        (
            [*XML[:14], *XML[15:]],  # the negative lost its closing tag
            r"bad\.xml:15: expected </negative> closing the <negative> block opened at line 9, "
            r"got '<positive>'",
        ),
        (
            [*XML[:10], "NN\tNN", *XML[11:]],
            r"bad\.xml:11: expected 4 tab-separated POS tags \(one per token of line 10\), got 2",
        ),
        (["<QApairs id=7>", *XML[1:]], r"bad\.xml:1: expected <QApairs id='\.\.\.'>"),
        ([XML[0], *XML[8:]], r"bad\.xml:2: <negative> before the <question> of QApairs '7\.1'"),
        ([*XML[:8], *XML[1:]], r"bad\.xml:9: a second <question> in QApairs '7\.1'"),
        ([*XML[:25], "<QApairs id='7.1'>", *XML[26:]], r"bad\.xml:26: duplicate QApairs id"),
        ([*XML[:8], "junk", *XML[8:]], r"bad\.xml:9: expected <question>, <positive>"),
        ([XML[0], "</QApairs>"], r"bad\.xml:2: QApairs '7\.1' has no <question>"),
    ],
)
def test_xml_errors_name_file_and_line(tmp_path: Path, lines: list[str], match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_jacana_xml(_write(tmp_path / "bad.xml", lines))


# --- the POSInput parser -----------------------------------------------------------------------


def _posinput(tmp_path: Path, **files: list[str]) -> list[Path]:
    defaults = {
        "q": ["<Q 1 >", "Who ?", "</Q>", "<Q 3 >", "Why ?", "</Q>"],
        "p": ["<A 1 >", "Ann .", "</A>", "<A 3 >", "< P > Because .", "Because .", "</A>"],
        "n": ["<A 1 >", "Bob .", "Cy .", "</A>", "<A 3 >", "</A>"],
    }
    paths = []
    for key, lines in {**defaults, **files}.items():
        paths.append(tmp_path / key)
        paths[-1].write_bytes("".join(f"{line}\r\n" for line in lines).encode())
    return paths


def test_rebuild_train_all(tmp_path: Path) -> None:
    examples = rebuild_train_all(*_posinput(tmp_path))
    assert examples == [
        Example("who ?", "ann .", 1, group="1", id="1:0"),
        Example("who ?", "bob .", 0, group="1", id="1:1"),
        Example("who ?", "cy .", 0, group="1", id="1:2"),
        Example("why ?", "because .", 1, group="3", id="3:0"),
    ]


@pytest.mark.parametrize(
    ("files", "match"),
    [
        ({"p": ["<A 1 >", "Ann .", "</A>", "<A 2 >", "</A>"]}, r"p:4: expected the block of "),
        ({"n": ["<A 1 >", "</A>"]}, r"q:4: question 3 has no block in .*n, which ends after 1"),
        ({"q": ["<Q 1 >", "Who ?", "Whom ?", "</Q>"]}, r"q:1: question 1 has 2 lines, expected 1"),
        ({"n": ["<A 1 >", "Bob .", "<A 3 >", "</A>"]}, r"n:3: expected </A> closing block 1"),
        ({"n": ["<A 1 >", "Bob ."]}, r"n:3: the file ends inside block 1 opened at line 1"),
        ({"n": ["<A 1 >", "", "</A>"]}, r"n:2: expected a sentence, got ''"),
        ({"q": ["<Q1>", "Who ?", "</Q>"]}, r"q:1: expected <Q N >, got '<Q1>'"),
    ],
)
def test_posinput_errors_name_file_and_line(
    tmp_path: Path, files: dict[str, list[str]], match: str
) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        rebuild_train_all(*_posinput(tmp_path, **files))


def test_wang2007_folder_name_matches_the_spec() -> None:
    assert (TRECQA / f"{WANG2007}.Question.POSInput.gz").is_file()
