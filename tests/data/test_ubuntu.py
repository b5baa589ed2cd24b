"""Ubuntu Dialogue Corpus on fixture files in the official formats (no copy of the corpus is
available here): the rkadlec generator's quoted CSVs (`ubuntu`) and Xu et al.'s v1 text files
(`ubuntu-v1`). Candidate order (ground truth first: R_2@1 depends on it), markers, groups of 10,
the protocols, and errors naming file and line."""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

import pytest

from attnmatch.data.datasets import DatasetFormatError, get_dataset, is_available
from attnmatch.data.datasets._spec import DatasetSpec
from attnmatch.data.datasets.ubuntu import (
    SPEC,
    SPEC_V1,
    check_candidates,
    read_eval_csv,
    read_train_csv,
    read_xu_txt,
    strip_markers,
)
from attnmatch.data.schema import Example
from attnmatch.metrics.ranking import recall_n_at_k
from attnmatch.tasks import RankingTask

DATA = Path(__file__).parents[2] / "data"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "ubuntu"
XU = FIXTURE / "ubuntu_data"
EVAL_HEADER = "Context,Ground Truth Utterance," + ",".join(f"Distractor_{i}" for i in range(9))


def _load_from(spec: DatasetSpec, folder: Path, split: str, **options: object) -> list[Example]:
    paths = {name: folder / name for name in spec.split_files[split]}
    return spec.loader(paths, split, spec.resolve_options(options))


@cache
def _load(name: str, split: str, **options: object) -> list[Example]:
    spec, folder = (SPEC, FIXTURE) if name == "ubuntu" else (SPEC_V1, XU)
    return _load_from(spec, folder, split, **options)


def _groups(examples: list[Example]) -> dict[str, list[Example]]:
    groups: dict[str, list[Example]] = {}
    for ex in examples:
        assert ex.group is not None
        groups.setdefault(ex.group, []).append(ex)
    return groups


# --- the specs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "name", "files", "sizes"),
    [
        (
            SPEC,
            "ubuntu",
            ("train.csv", "valid.csv", "test.csv"),
            {"train": 1_000_000, "dev": 195_600, "test": 189_200},
        ),
        (
            SPEC_V1,
            "ubuntu-v1",
            ("train.txt", "valid.txt", "test.txt"),
            {"train": 1_000_000, "dev": 500_000, "test": 500_000},
        ),
    ],
)
def test_spec(spec: DatasetSpec, name: str, files: tuple[str, ...], sizes: dict) -> None:
    assert get_dataset(name) is spec
    assert spec.splits == ("train", "dev", "test") and spec.task.kind == "ranking"
    assert tuple(f for split in spec.splits for f in spec.split_files[split]) == files
    assert dict(spec.split_sizes) == sizes
    assert {f.sha256 for f in spec.files} == {""}  # no published checksums
    assert spec.resolve_options({}) == {"markers": "keep"}
    assert not is_available(name, DATA)
    for split in spec.splits:
        protocol = spec.protocol(split)
        assert isinstance(protocol, RankingTask)
        assert protocol.metrics == ("r2@1", "r10@1", "r10@2", "r10@5", "mrr")
        assert protocol.primary == "r10@1" and protocol.require_positive


def test_parlai_archive_checksum() -> None:
    assert SPEC.url == "http://parl.ai/downloads/ubuntu/ubuntu.tar.gz"
    assert SPEC.archive_sha256 == (
        "87caf297381287247cbff3aa7cc2f4609f3b12c40e8535688168d7413740e0d0"
    )


# --- the generator's CSVs (`ubuntu`) ---------------------------------------------------------


def test_train_rows_are_independent_labelled_pairs() -> None:
    examples = _load("ubuntu", "train")
    assert [ex.label for ex in examples] == [1, 0, 1, 0]  # written "1.0" / "0.0"
    assert [ex.group for ex in examples] == ["train-1", "train-2", "train-3", "train-4"]
    assert examples[0].left.startswith("i think we could import the old comments via rsync, but")
    assert examples[0].left.endswith("sounds good __eou__ __eot__ ")  # kept as written
    assert examples[0].right == "ok __eou__ perhaps we can ship an ad-hoc apt_preferences __eou__"
    # Quoted fields with commas and doubled quotes.
    assert examples[1].left.startswith('how do i mount a "usb" drive ? __eou__ __eot__')
    assert examples[1].right == 'what about windows, "ntfs" partitions ? __eou__'


def test_markers_strip() -> None:
    kept = _load("ubuntu", "train")
    stripped = _load("ubuntu", "train", markers="strip")
    assert stripped[2].left == (
        "my wifi stopped working after the upgrade which card ? lspci | grep -i net"
    )
    assert stripped[2].right == "broadcom bcm4312 it says unclaimed"
    assert [strip_markers(ex.left) for ex in kept] == [ex.left for ex in stripped]
    assert all("__eo" not in ex.left + ex.right for ex in _load("ubuntu", "test", markers="strip"))


@pytest.mark.parametrize(("split", "contexts"), [("dev", 2), ("test", 3)])
def test_eval_rows_ground_truth_first(split: str, contexts: int) -> None:
    examples = _load("ubuntu", split)
    groups = _groups(examples)
    assert len(examples) == 10 * contexts and len(groups) == contexts
    for n, (group, members) in enumerate(groups.items(), start=1):
        assert group == f"{split}-{n}"
        assert [ex.label for ex in members] == [1] + [0] * 9
        assert [ex.id for ex in members] == [f"{group}-gt"] + [f"{group}-d{i}" for i in range(9)]
        assert [ex.right for ex in members[1:]] == [
            f"distractor {n - 1}.{i}, number {i} __eou__" for i in range(9)
        ]
        assert len({ex.left for ex in members}) == 1
    first = groups[f"{split}-1"][0]
    if split == "test":  # a context with a newline inside its quoted field
        assert "i am not sure,\nbut the last time i checked" in first.left
        assert first.right == "you sound like it's updating to skynet. ;) __eou__"
    else:
        assert first.right == "we are talking 12.04 not 10.04 __eou__"
        assert (
            groups["dev-2"][0].right
            == 'that\'s why i ask how much is "default install" ? :) __eou__'
        )


def test_r2_at_1_compares_the_ground_truth_with_distractor_0() -> None:
    members = _groups(_load("ubuntu", "dev"))["dev-1"]
    labels = [ex.label for ex in members]
    # The ground truth loses to Distractor_1 but beats Distractor_0: R_2@1 = 1, R_10@1 = 0.
    scores = [0.5, 0.4, 0.9, 0, 0, 0, 0, 0, 0, 0]
    assert recall_n_at_k(scores, labels, 2, 1) == 1.0
    assert recall_n_at_k(scores, labels, 10, 1) == 0.0
    assert recall_n_at_k(scores, labels, 10, 2) == 1.0


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("Context,Response,Label\r\nc,u,1.0\r\n", r"bad\.csv:1: expected the header"),
        ("", r"bad\.csv:1: expected the header .* got nothing"),
        ("Context,Utterance,Label\r\nc,u,1.0\r\nc,u\r\n", r"bad\.csv:3: expected 3 comma-sep"),
        # A record spanning lines 2-3: the next record starts on line 4.
        (
            'Context,Utterance,Label\r\n"a\r\nb",u,0.0\r\nc,u,2.0\r\n',
            r"bad\.csv:4: Label must be 1\.0 or 0\.0, got '2\.0'",
        ),
        ("Context,Utterance,Label\r\nc,u,\r\n", r"bad\.csv:2: Label must be .* got ''"),
        ('Context,Utterance,Label\r\nc,"u"x,1.0\r\n', r"bad\.csv:2: malformed CSV record"),
        ('Context,Utterance,Label\r\nc,u,1.0\r\n"c,u,1.0\r\n', r"bad\.csv:3: malformed CSV"),
    ],
)
def test_train_csv_errors_name_file_and_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_train_csv(_write(tmp_path / "bad.csv", text))


def test_eval_csv_errors(tmp_path: Path) -> None:
    row = ",".join(["c", "gt"] + [f"d{i}" for i in range(9)])
    good = read_eval_csv(_write(tmp_path / "ok.csv", f"{EVAL_HEADER}\r\n{row}\r\n"), "dev")
    assert [ex.right for ex in good] == ["gt"] + [f"d{i}" for i in range(9)]
    short = ",".join(["c", "gt"] + [f"d{i}" for i in range(8)])
    with pytest.raises(DatasetFormatError, match=r"bad\.csv:3: expected 11 comma-separated"):
        read_eval_csv(_write(tmp_path / "bad.csv", f"{EVAL_HEADER}\r\n{row}\r\n{short}\r\n"), "dev")
    with pytest.raises(DatasetFormatError, match=r"bad\.csv:1: expected the header"):
        read_eval_csv(_write(tmp_path / "bad.csv", "Context,Utterance,Label\r\n"), "dev")


def test_a_long_field_is_read(tmp_path: Path) -> None:
    context = "word " * 60_000  # 300,000 characters: over the csv module's default limit
    examples = read_train_csv(
        _write(tmp_path / "long.csv", f"Context,Utterance,Label\n{context},u,1\n")
    )
    assert examples[0].left == context and examples[0].label == 1


def test_check_candidates(tmp_path: Path) -> None:
    ten = [Example("c", str(i), int(i == 0), "dev-1") for i in range(10)]
    check_candidates(ten, tmp_path / "x")
    with pytest.raises(DatasetFormatError, match=r"x: group dev-1 does not have exactly 10"):
        check_candidates(ten[:9], tmp_path / "x")
    with pytest.raises(DatasetFormatError, match="group dev-1"):
        check_candidates([*ten[:9], Example("c", "x", 0, "dev-2"), *ten[:1]], tmp_path / "x")


# --- Xu et al.'s v1 files (`ubuntu-v1`) ------------------------------------------------------


def test_v1_train() -> None:
    examples = _load("ubuntu-v1", "train")
    assert [ex.label for ex in examples] == [1, 0, 1, 0]
    assert examples[0] == Example(
        "i have a problem with my sound __eot__ which card ?",
        "intel hda , it is muted in alsamixer",
        1,
        "train-1",
        "train.txt:1",
    )
    assert (
        examples[3].left
        == "grub is gone after installing windows __eot__ boot the live cd __eot__ ok , done"
    )
    stripped = _load("ubuntu-v1", "train", markers="strip")
    assert stripped[3].left == "grub is gone after installing windows boot the live cd ok , done"


@pytest.mark.parametrize("split", ["dev", "test"])
def test_v1_eval_true_response_first(split: str) -> None:
    examples = _load("ubuntu-v1", split)
    groups = _groups(examples)
    assert list(groups) == [f"{split}-1", f"{split}-2"] and len(examples) == 20
    for members in groups.values():
        assert [ex.label for ex in members] == [1] + [0] * 9
        # The negatives keep their file order behind the true response.
        assert [ex.right for ex in members[1:]] == sorted(ex.right for ex in members[1:])
    name = "valid.txt" if split == "dev" else "test.txt"
    # In the fixture the true responses are on lines 1 and 11, except test's second (line 14).
    second_true_line = 14 if split == "test" else 11
    assert groups[f"{split}-1"][0].id == f"{name}:1"
    assert groups[f"{split}-2"][0].id == f"{name}:{second_true_line}"
    assert [ex.id for ex in groups[f"{split}-1"][1:]] == [f"{name}:{i}" for i in range(2, 11)]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_v1_errors_name_file_and_line(tmp_path: Path) -> None:
    valid = _lines(XU / "valid.txt")

    def check(lines: list[str], match: str, split: str = "dev") -> None:
        path = tmp_path / "valid.txt"
        path.write_text("".join(line + "\n" for line in lines))
        with pytest.raises(DatasetFormatError, match=match):
            read_xu_txt(path, split)

    check(valid[:15], r"valid\.txt:11: the file ends after 5 of the 10 candidates")
    two_true = ["1" + valid[1][1:] if i == 1 else line for i, line in enumerate(valid)]
    assert two_true[1].startswith("1\t")
    check(two_true, r"valid\.txt:1: the 10 candidates of a context must hold exactly one label 1")
    mixed = [*valid[:4], valid[14], *valid[5:]]
    check(mixed, r"valid\.txt:5: context differs from the context of line 1")
    check(["x\tturn\tresponse"], r"valid\.txt:1: label must be 0 or 1, got 'x'", "train")
    check(["1\tturn and response"], r"valid\.txt:1: expected .*at least 3 .* got 2", "train")


def test_v1_loader_on_a_copied_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ubuntu_v1"
    shutil.copytree(XU, folder)
    examples = _load_from(SPEC_V1, folder, "test")
    assert len(examples) == 20
    (folder / "test.txt").write_text("")
    assert _load_from(SPEC_V1, folder, "test") == []
