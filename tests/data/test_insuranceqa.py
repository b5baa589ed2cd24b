"""InsuranceQA v1 on fixture files in the official V1 token-index format (no copy of the corpus
is available here): detokenisation, pool order and labels, seeded train negatives, the protocol,
and parser errors naming file and line."""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from attnmatch.data.datasets import DatasetFormatError, get_dataset, is_available
from attnmatch.data.datasets.insuranceqa import (
    ANSWERS,
    SPEC,
    TRAIN,
    VOCABULARY,
    pool_file,
    read_answers,
    read_vocabulary,
    sample_negatives,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RankingTask

DATA = Path(__file__).parents[2] / "data"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "insuranceqa"


def _load_from(folder: Path, split: str, **options: object) -> list[Example]:
    paths = {name: folder / name for name in SPEC.split_files[split]}
    return SPEC.loader(paths, split, SPEC.resolve_options(options))


@cache
def _load(split: str, **options: object) -> list[Example]:
    return _load_from(FIXTURE, split, **options)


def _groups(examples: list[Example]) -> dict[str, list[Example]]:
    groups: dict[str, list[Example]] = {}
    for ex in examples:
        assert ex.group is not None
        groups.setdefault(ex.group, []).append(ex)
    return groups


def _answers() -> dict[str, str]:
    return read_answers(FIXTURE / ANSWERS, read_vocabulary(FIXTURE / VOCABULARY))


# --- the spec --------------------------------------------------------------------------------


def test_spec() -> None:
    assert get_dataset("insuranceqa") is SPEC
    assert SPEC.splits == ("train", "dev", "test1", "test2") and SPEC.task.kind == "ranking"
    assert dict(SPEC.split_sizes) == {"dev": 500_000, "test1": 900_000, "test2": 900_000}
    assert SPEC.split_files["test2"] == (
        "V1/vocabulary",
        "V1/answers.label.token_idx",
        "V1/question.test2.label.token_idx.pool",
    )
    assert SPEC.split_files["train"][-1] == "V1/question.train.token_idx.label"
    # No published checksums: "" marks them as unverifiable.
    assert {f.sha256 for f in SPEC.files} == {""}
    assert SPEC.resolve_options({}) == {"train_negatives": 50}
    assert SPEC.url.startswith("https://github.com/shuzi/insuranceQA/")


def test_not_available_locally() -> None:
    assert not is_available("insuranceqa", DATA)


@pytest.mark.parametrize("split", ["train", "dev", "test1", "test2"])
def test_protocol(split: str) -> None:
    protocol = SPEC.protocol(split)
    assert isinstance(protocol, RankingTask) and protocol.name == "insuranceqa-v1-pool500"
    assert protocol.metrics == ("p@1", "map", "mrr") and protocol.primary == "p@1"
    assert protocol.require_positive and not protocol.require_negative


# --- parsing ---------------------------------------------------------------------------------


def test_texts_are_words_joined_by_spaces() -> None:
    vocab = read_vocabulary(FIXTURE / VOCABULARY)
    assert vocab["idx_1"] == "what" and vocab["idx_6"] == "?"
    answers = _answers()
    assert len(answers) == 12
    assert (
        answers["1"] == "term life insurance is a policy that pays out if you die during the term ."
    )
    assert answers["9"] == "yes ."


def test_dev_is_every_pool_candidate_in_pool_order() -> None:
    answers = _answers()
    groups = _groups(_load("dev"))
    assert list(groups) == ["dev-1", "dev-2"]
    first = groups["dev-1"]
    # Ground truths 3 and 12; pool 7 3 9 12 1.
    assert [ex.id for ex in first] == ["dev-1-7", "dev-1-3", "dev-1-9", "dev-1-12", "dev-1-1"]
    assert [ex.label for ex in first] == [0, 1, 0, 1, 0]
    assert [ex.right for ex in first] == [answers[a] for a in ("7", "3", "9", "12", "1")]
    assert {ex.left for ex in first} == {"can i cancel my policy ?"}
    assert [ex.label for ex in groups["dev-2"]] == [1, 0, 0, 0, 0]


@pytest.mark.parametrize("split", ["test1", "test2"])
def test_test_splits(split: str) -> None:
    examples = _load(split)
    assert len(examples) == 10
    groups = _groups(examples)
    assert all(len(g) == 5 and sum(ex.label for ex in g) == 1 for g in groups.values())
    protocol = SPEC.protocol(split)
    assert isinstance(protocol, RankingTask)
    assert all(protocol.keeps([ex.label for ex in g]) for g in groups.values())


def test_answer_strings_are_shared() -> None:
    # One string object per answer, however many pools hold it: 500 x 1,800 pairs stay small.
    examples = _load("test1")  # answer 4 is in both pools
    by_id: dict[str, list[str]] = {}
    for ex in examples:
        assert ex.id is not None
        by_id.setdefault(ex.id.rsplit("-", 1)[1], []).append(ex.right)
    shared = [texts for texts in by_id.values() if len(texts) > 1]
    assert shared and all(t is texts[0] for texts in shared for t in texts)
    assert all(ex.left is examples[0].left for ex in examples[:5])


# --- train negatives -------------------------------------------------------------------------


def test_train_positives_then_seeded_negatives() -> None:
    examples = _load("train", train_negatives=5)
    groups = _groups(examples)
    assert list(groups) == ["train-1", "train-2", "train-3"]
    truths = {"train-1": ["1"], "train-2": ["2", "5"], "train-3": ["4"]}
    answers = _answers()
    for group, members in groups.items():
        ids = [ex.id.rsplit("-", 1)[1] for ex in members if ex.id is not None]
        positives = truths[group]
        assert ids[: len(positives)] == positives
        assert [ex.label for ex in members] == [1] * len(positives) + [0] * 5
        negatives = ids[len(positives) :]
        assert len(set(negatives)) == 5 and not set(negatives) & set(positives)
        assert all(ex.right == answers[a] for ex, a in zip(members, ids, strict=True))
    assert groups["train-2"][0].left == "does renters insurance cover theft ?"
    # Fixed seed: the same pairs on every load.
    assert _load_from(FIXTURE, "train", train_negatives=5) == examples
    assert len(_load("train", train_negatives=10)) == 4 + 3 * 10


def test_too_many_negatives_for_the_answer_set() -> None:
    with pytest.raises(ValueError, match="cannot sample 50 negatives from 12 answers"):
        _load("train")  # the fixture has 12 answers; the default is 50


def test_sample_negatives_never_returns_a_positive() -> None:
    ids = [str(i) for i in range(1, 21)]
    rng = np.random.default_rng(0)
    for _ in range(200):
        positives = [ids[i] for i in rng.permutation(len(ids))[:3]]
        negatives = sample_negatives(positives, ids, 17, rng)  # every non-positive
        assert sorted(negatives, key=int) == [a for a in ids if a not in positives]
    a = sample_negatives(["1"], ids, 5, np.random.default_rng(7))
    assert a == sample_negatives(["1"], ids, 5, np.random.default_rng(7))


# --- errors ----------------------------------------------------------------------------------


def _broken_copy(tmp_path: Path, name: str, lineno: int, line: str) -> Path:
    folder = tmp_path / "insuranceqa"
    shutil.copytree(FIXTURE, folder)
    path = folder / name
    lines = path.read_text().splitlines(keepends=True)
    lines[lineno - 1] = line + "\n"
    path.write_text("".join(lines))
    return folder


@pytest.mark.parametrize(
    ("name", "lineno", "line", "split", "match"),
    [
        (VOCABULARY, 3, "idx_3 term", "dev", r"vocabulary:3: expected 'idx_N<TAB>word'"),
        (VOCABULARY, 4, "4\tlife", "dev", r"vocabulary:4: expected 'idx_N<TAB>word'"),
        (VOCABULARY, 5, "idx_1\tagain", "dev", r"vocabulary:5: token idx_1 is listed twice"),
        (ANSWERS, 2, "2\tidx_26 idx_999", "dev", r"token_idx:2: token 'idx_999' is not in the"),
        (ANSWERS, 3, "A3\tidx_35", "dev", r"token_idx:3: answer id must be an integer: 'A3'"),
        (ANSWERS, 4, "1\tidx_35", "dev", r"token_idx:4: answer id 1 is listed twice"),
        (ANSWERS, 5, "5\t", "dev", r"token_idx:5: empty text"),
        (ANSWERS, 6, "6 idx_1 idx_2", "dev", r"token_idx:6: expected 2 tab-separated fields"),
        (TRAIN, 2, "idx_7 idx_8", "train", r"token_idx\.label:2: expected 2 tab-separated"),
        (TRAIN, 3, "idx_1\t4 99", "train", r"label:3: answer id '99' is not in answers"),
        (TRAIN, 1, "idx_1\t", "train", r"label:1: no answer ids"),
        (
            pool_file("dev"),
            2,
            "6\tidx_49\t6 11 2 10 x",
            "dev",
            r"dev\.label\.token_idx\.pool:2: answer id 'x' is not in answers",
        ),
        (
            pool_file("test1"),
            1,
            "2\tidx_7 idx_8",
            "test1",
            r"test1\.label\.token_idx\.pool:1: expected 3 tab-separated fields",
        ),
    ],
)
def test_errors_name_file_and_line(
    tmp_path: Path, name: str, lineno: int, line: str, split: str, match: str
) -> None:
    folder = _broken_copy(tmp_path, name, lineno, line)
    with pytest.raises(DatasetFormatError, match=match):
        _load_from(folder, split, train_negatives=5)
