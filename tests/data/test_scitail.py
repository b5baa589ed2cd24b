"""SciTail: the bundled test CSV (read as `scitail:test`) and RE2 dev/test (counts, labels, the
HTML entities, the class mapping of RE2's labels, the non-standard train-on-dev split), fixtures
in the official snli_format and tsv_format, the parsers' errors and checksums. Offline, about a
second."""

from __future__ import annotations

import gzip
import re
import shutil
from functools import cache
from pathlib import Path

import pytest

from attnmatch.data.datasets import (
    DatasetFormatError,
    DatasetNotFoundError,
    Split,
    get_dataset,
    is_available,
    load_split,
    verify_dataset,
)
from attnmatch.data.datasets.scitail import (
    CLASS_NAMES,
    RE2_SPEC,
    SPEC,
    read_re2_txt,
    read_scitail_csv,
    read_scitail_jsonl,
    read_scitail_tsv,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask

DATA = Path(__file__).parents[2] / "data"
SCITAIL = DATA / "scitail"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "scitail"
ENTITY = re.compile(r"&(quot|amp|gt|lt|deg|#\d+);")


@cache
def _load(name: str, split: str) -> Split:
    return load_split(name, split, data_dir=DATA)


def _labels(examples: list[Example]) -> tuple[int, int]:
    labels = [ex.label for ex in examples]
    return labels.count(0), labels.count(1)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


# --- the bundled copies ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "split", "neutral", "entails"),
    [
        ("scitail", "test", 1_284, 842),
        ("scitail-re2", "dev", 647, 657),
        ("scitail-re2", "test", 1_284, 842),
    ],
)
def test_counts_and_labels(name: str, split: str, neutral: int, entails: int) -> None:
    loaded = _load(name, split)
    spec = get_dataset(name)
    assert (loaded.dataset, loaded.split, loaded.task.kind) == (name, split, "classification")
    assert len(loaded.examples) == spec.split_sizes[split] == SPEC.split_sizes[split]
    assert _labels(loaded.examples) == (neutral, entails)
    assert all(ex.group is None for ex in loaded.examples)


def test_class_indices_agree_across_distributions() -> None:
    """Row i of the CSV is row i of re2_test.txt: same hypothesis words, same class (entails =
    1 in both, although RE2's file writes it 0)."""
    csv_rows, re2_rows = (
        _load("scitail", "test").examples,
        _load("scitail-re2", "test").examples,
    )

    def words(text: str) -> str:
        return re.sub(r"\W+", "", text.lower())

    assert [ex.label for ex in csv_rows] == [ex.label for ex in re2_rows]
    assert [words(ex.right) for ex in csv_rows] == [words(ex.right) for ex in re2_rows]
    assert CLASS_NAMES == ("neutral", "entails")


def test_html_entities_are_kept() -> None:
    examples = _load("scitail", "test").examples
    with_entities = [ex for ex in examples if ENTITY.search(ex.left) or ENTITY.search(ex.right)]
    assert len(with_entities) == 15
    assert sum("&quot;" in ex.left for ex in examples) == 10
    assert sum("&amp;" in ex.left for ex in examples) == 3
    niche = examples[17]
    assert niche.left.startswith("Niche An organism's niche is its unique role  or &quot;way")
    assert (niche.label, niche.id) == (1, "scitail_1.0_test.csv:19")
    assert not any('"' in ex.left or '"' in ex.right for ex in examples)


def test_first_rows() -> None:
    first = _load("scitail", "test").examples[0]
    assert first.left.startswith("Based on the list provided of the uses of substances 1-7")
    assert first.right == (
        "If a substance has a ph value greater than 7,that indicates that it is base."
    )
    assert (first.label, first.id) == (0, "scitail_1.0_test.csv:2")
    assert _load("scitail-re2", "dev").examples[0] == Example(
        "An introduction to atoms and elements , compounds , atomic structure and bonding , "
        "the molecule and chemical reactions",
        "Replace another in a molecule happens to atoms during a substitution reaction",
        0,
        id="re2_dev.txt:1",
    )


def test_protocols() -> None:
    for name, split, expected in [
        ("scitail", "test", "scitail"),
        ("scitail-re2", "test", "scitail-re2"),
        ("scitail-re2", "train-on-dev", "scitail-re2-train-on-dev (non-standard)"),
    ]:
        protocol = _load(name, split).protocol
        assert isinstance(protocol, ClassificationTask) and protocol.name == expected
        assert protocol.class_names == CLASS_NAMES and protocol.metrics == ("accuracy", "f1")
        assert protocol.primary == "accuracy"
    assert RE2_SPEC.non_standard_splits == ("train-on-dev", "dev-holdout")
    assert "NON-STANDARD" in RE2_SPEC.protocol_description


def test_train_on_dev_and_holdout_partition_dev_by_hypothesis() -> None:
    dev = _load("scitail-re2", "dev").examples
    train, held = _load("scitail-re2", "train-on-dev").examples, _load("scitail-re2", "dev-holdout")
    assert len(train) + len(held.examples) == len(dev) == 1_304
    # 121 hypotheses with ~11 premises each: no hypothesis may be on both sides.
    assert len({ex.right for ex in dev}) == 121
    assert not {ex.right for ex in train} & {ex.right for ex in held.examples}
    assert sorted(ex.id or "" for ex in train + held.examples) == sorted(ex.id or "" for ex in dev)
    assert 100 < len(held.examples) < 160


def test_bundled_files() -> None:
    listed = {}
    for line in (SCITAIL / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    assert {f.name: f.sha256 for f in RE2_SPEC.files}.items() <= listed.items()
    assert {c.status for c in verify_dataset("scitail-re2", DATA)} == {"ok"}
    assert is_available(RE2_SPEC, DATA)
    [test_file] = [f for f in SPEC.files if f.name == "snli_format/scitail_1.0_test.txt"]
    assert test_file.alternatives[0] == (
        "scitail_1.0_test.csv.gz",
        listed["scitail_1.0_test.csv.gz"],
    )
    statuses = {c.file: c.status for c in verify_dataset("scitail", DATA)}
    assert statuses.pop("scitail_1.0_test.csv.gz") == "ok"
    assert set(statuses.values()) == {"missing"}  # the official files are not bundled
    assert set(listed) == {p.name for p in SCITAIL.iterdir()} - {"SHA256SUMS"}


def test_uncompressed_copies_are_accepted(tmp_path: Path) -> None:
    for name in ("scitail_1.0_test.csv", "re2_test.txt"):
        (tmp_path / name).write_bytes(gzip.decompress((SCITAIL / f"{name}.gz").read_bytes()))
    assert load_split("scitail", "test", data_dir=tmp_path).examples == (
        _load("scitail", "test").examples
    )
    with pytest.raises(DatasetNotFoundError, match=r"tsv_format/scitail_1.0_test.tsv"):
        load_split("scitail", "test", data_dir=tmp_path, format="tsv")
    assert load_split("scitail-re2", "test", data_dir=tmp_path).examples == (
        _load("scitail-re2", "test").examples
    )


# --- the official release (fixtures) ---------------------------------------------------------


def test_official_formats_agree_on_fixture() -> None:
    """snli_format (default) and tsv_format hold the same pairs; both are read unverified."""
    jsonl = load_split("scitail", "dev", data_dir=FIXTURES)
    tsv = load_split("scitail", "dev", data_dir=FIXTURES, format="tsv")
    assert jsonl.options == {"format": "snli"} and tsv.options == {"format": "tsv"}
    strip = [(ex.left, ex.right, ex.label) for ex in jsonl.examples]
    assert strip == [(ex.left, ex.right, ex.label) for ex in tsv.examples]
    assert [ex.label for ex in jsonl.examples] == [1, 0, 1]
    assert jsonl.examples[1].left.endswith("&quot;roughly&quot;.")
    assert jsonl.examples[0].id == "scitail_1.0_dev.txt:1"
    assert tsv.examples[2].id == "scitail_1.0_dev.tsv:3"
    assert jsonl.protocol == tsv.protocol == _load("scitail", "test").protocol
    assert SPEC.split_sizes == {"train": 23_596, "dev": 1_304, "test": 2_126}
    assert SPEC.url.endswith("SciTailV1.1.zip")


def test_official_test_file_is_preferred_to_the_csv_copy(tmp_path: Path) -> None:
    shutil.copyfile(SCITAIL / "scitail_1.0_test.csv.gz", tmp_path / "scitail_1.0_test.csv.gz")
    (tmp_path / "snli_format").mkdir()
    shutil.copyfile(
        FIXTURES / "snli_format" / "scitail_1.0_dev.txt",
        tmp_path / "snli_format" / "scitail_1.0_test.txt",
    )
    examples = load_split("scitail", "test", data_dir=tmp_path).examples
    assert [ex.id for ex in examples] == [f"scitail_1.0_test.txt:{i}" for i in (1, 2, 3)]


@pytest.mark.parametrize(
    ("reader", "text", "match"),
    [
        (read_scitail_tsv, "p\th\tentails\np\th\n", r"bad:2: expected 3 tab-separated"),
        (read_scitail_tsv, "p\th\tentailment\n", r"bad:1: label must be one of .* 'entailment'"),
        (read_re2_txt, "p\th\t0\np\th\t2\n", r"bad:2: label \(0 entails, 1 neutral\) must"),
        (read_re2_txt, "p\th\n", r"bad:1: expected 3 tab-separated"),
        (read_scitail_jsonl, '{"gold_label": "neutral"}\n', r"bad:1: sentence1 and sentence2"),
        (
            read_scitail_jsonl,
            '{"gold_label": "entailment", "sentence1": "a", "sentence2": "b"}\n{"gold_',
            r"bad:2: not valid JSON",
        ),
        (
            read_scitail_jsonl,
            '{"gold_label": "entails", "sentence1": "a", "sentence2": "b"}\n',
            r"bad:1: gold_label must be one of \('neutral', 'entailment'\), got 'entails'",
        ),
        (read_scitail_jsonl, "[1, 2]\n", r"bad:1: expected a JSON object"),
        (read_scitail_csv, "premise,hypothesis\n", r"bad:1: expected the header"),
        (read_scitail_csv, "", r"bad:1: expected the header"),
        (
            read_scitail_csv,
            'premise,hypothesis,label\n"a\nb",c,entailment\nd,e,neutral\n',
            r"bad:4: label must be one of \('not_entailment', 'entailment'\)",
        ),
        (read_scitail_csv, "premise,hypothesis,label\na,b\n", r"bad:2: expected 3 comma"),
        (read_scitail_csv, 'premise,hypothesis,label\n"a"b,c,entailment\n', r"bad:2: broken"),
    ],
)
def test_parser_errors_name_file_and_line(
    tmp_path: Path, reader: object, text: str, match: str
) -> None:
    assert callable(reader)
    with pytest.raises(DatasetFormatError, match=match):
        reader(_write(tmp_path / "bad", text))
