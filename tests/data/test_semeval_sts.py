"""SemEval STS 2012-2016 on the bundled copy: per-set counts, unscored pairs, the missing 2013 SMT
input, groups, the training recipes, the holdout, the parser's errors and checksums. Offline,
a few seconds."""

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
from attnmatch.data.datasets.semeval_sts import (
    SETS,
    SPEC,
    StsSet,
    holdout_ids,
    read_sts_set,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RegressionTask

DATA = Path(__file__).parents[2] / "data"
STS = DATA / "semeval_sts"

# Scored pairs per set, as the task papers and readmes publish them.
PUBLISHED = {
    "2012/train": {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 734},
    "2012/test": {
        "MSRpar": 750,
        "MSRvid": 750,
        "SMTeuroparl": 459,
        "surprise.OnWN": 750,
        "surprise.SMTnews": 399,
    },
    "2013/test": {"headlines": 750, "OnWN": 561, "FNWN": 189},  # + SMT 750, not public
    "2014/test": {
        "deft-forum": 450,
        "deft-news": 300,
        "headlines": 750,
        "images": 750,
        "OnWN": 750,
        "tweet-news": 750,
    },
    "2015/test": {
        "answers-forums": 375,
        "answers-students": 750,
        "belief": 375,
        "headlines": 750,
        "images": 750,
    },
    "2016/test": {
        "answer-answer": 254,
        "headlines": 249,
        "plagiarism": 230,
        "postediting": 244,
        "question-question": 209,
    },
}
# Pairs with an empty gold line (unscored), dropped.
UNSCORED = {
    "2015/test/answers-forums": 1_625,
    "2015/test/answers-students": 750,
    "2015/test/belief": 1_625,
    "2015/test/headlines": 750,
    "2015/test/images": 750,
    "2016/test/answer-answer": 1_318,
    "2016/test/headlines": 1_249,
    "2016/test/plagiarism": 1_041,
    "2016/test/postediting": 3_043,
    "2016/test/question-question": 1_346,
}
RECIPES = {
    "2012": ["2012/train"],
    "2012-2012": ["2012/train", "2012/test"],
    "2012-2013": ["2012/train", "2012/test", "2013/test"],
    "2012-2014": ["2012/train", "2012/test", "2013/test", "2014/test"],
    "2012-2015": ["2012/train", "2012/test", "2013/test", "2014/test", "2015/test"],
}


@cache
def _load(split: str, holdout: bool = False) -> Split:
    return load_split("semeval-sts", split, data_dir=DATA, holdout=holdout)


def _set_key(ex: Example) -> str:
    """The set key "<year>/<part>/<set>" of an id "<year>/<part>/<set>:<line>"."""
    assert ex.id is not None
    return ex.id.rpartition(":")[0]


def _lines(path: Path) -> list[str]:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8").splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_bytes("".join(line + "\n" for line in lines).encode("utf-8"))
    return path


# --- counts, unscored pairs and the missing 2013 SMT input -----------------------------------


@pytest.mark.parametrize("year", [2012, 2013, 2014, 2015, 2016])
def test_test_sets_per_set_counts(year: int) -> None:
    loaded = _load(f"test-{year}")
    assert (loaded.dataset, loaded.task.kind) == ("semeval-sts", "regression")
    counts = Counter(ex.group for ex in loaded.examples)
    assert counts == {f"{year}/{name}": n for name, n in PUBLISHED[f"{year}/test"].items()}
    assert len(loaded.examples) == SPEC.split_sizes[f"test-{year}"]


def test_published_totals() -> None:
    sizes = {s: len(_load(s).examples) for s in SPEC.split_sizes}
    assert sizes == SPEC.split_sizes
    assert sizes["test-2015"] == 3_000 and sizes["test-2016"] == 1_186
    assert sizes["train-2012"] == 2_234 and sizes["test-2012"] == 3_108
    assert sizes["test-2013"] == 2_250 - 750  # the published 2013 total minus SMT
    assert sizes["test-2014"] == 3_750
    # He et al. (2016), Table 1: 14,342 training pairs from 2012-2015, SMT included.
    assert sizes["train-2012-2015"] == 14_342 - 750


def test_unscored_totals() -> None:
    for year, dropped in (("2015", 5_500), ("2016", 7_997)):
        assert sum(n for key, n in UNSCORED.items() if key.startswith(year)) == dropped


def test_train_2012_per_set_counts() -> None:
    counts = Counter(_set_key(ex) for ex in _load("train-2012").examples)
    assert counts == {f"2012/train/{name}": n for name, n in PUBLISHED["2012/train"].items()}


@pytest.mark.parametrize("sts_set", [s for s in SETS if s.has_unscored], ids=lambda s: s.key)
def test_empty_gold_lines_are_dropped(sts_set: StsSet) -> None:
    inputs = _lines(STS / f"{sts_set.input_name}.gz")
    golds = _lines(STS / sts_set.gold_name)
    assert len(inputs) == len(golds)
    empty = [i for i, g in enumerate(golds, start=1) if not g.strip()]
    assert len(empty) == UNSCORED[sts_set.key]
    loaded = [ex for ex in _load(f"test-{sts_set.year}").examples if _set_key(ex) == sts_set.key]
    assert (
        len(loaded) == len(inputs) - len(empty) == PUBLISHED[f"{sts_set.year}/test"][sts_set.name]
    )
    kept = {int(ex.id.rpartition(":")[2]) for ex in loaded if ex.id is not None}
    assert kept.isdisjoint(empty) and len(kept) == len(loaded)
    # Each kept pair is the input line of the same number, scored by that gold line.
    for ex in loaded[:20]:
        assert ex.id is not None
        lineno = int(ex.id.rpartition(":")[2])
        assert inputs[lineno - 1].split("\t")[:2] == [ex.left, ex.right]
        assert float(golds[lineno - 1]) == ex.label


def test_no_empty_gold_lines_before_2015() -> None:
    for sts_set in SETS:
        if not sts_set.has_unscored:
            assert all(line.strip() for line in _lines(STS / sts_set.gold_name)), sts_set.key


def test_2013_smt_is_skipped() -> None:
    assert "SMT" not in {s.name for s in SETS if s.year == 2013}
    assert not any(ex.group == "2013/SMT" for ex in _load("test-2013").examples)
    names = {name for f in SPEC.files for name, _ in f.candidates}
    assert "2013/test/STS.gs.SMT.txt" in names  # its gold scores are kept, unread
    assert not any("input.SMT." in name for name in names)
    assert len(_lines(STS / "2013/test/STS.gs.SMT.txt")) == 750
    assert not any("SMT.txt" in n for names in SPEC.split_files.values() for n in names)


def test_2016_reads_the_utf8_inputs_and_two_of_four_fields() -> None:
    rows = [
        line.split("\t") for line in _lines(STS / "2016/test/STS2016.input.answer-answer.txt.gz")
    ]
    assert {len(r) for r in rows} == {4}
    by_id = {ex.id: ex for ex in _load("test-2016").examples}
    ex = by_id["2016/test/answer-answer:991"]
    assert (ex.left, ex.right, ex.label) == (
        "Yes, you should mention your experience.",
        "Yes, you should make a résumé.",  # the .ascii copy has "resume"
        2.0,
    )
    assert not any("StackExchange Network" in e.left + e.right for e in by_id.values())
    assert not any(name.endswith(".ascii") for f in SPEC.files for name, _ in f.candidates)


def test_scores_are_within_0_and_5() -> None:
    for split in ("train-2012-2015", "test-2016"):
        scores = [ex.label for ex in _load(split).examples]
        assert all(isinstance(s, float) and 0.0 <= s <= 5.0 for s in scores)
        assert min(scores) == 0.0 and max(scores) == 5.0


def test_exact_rows() -> None:
    first = _load("train-2012").examples[0]
    assert first == Example(
        "But other sources close to the sale said Vivendi was keeping the door open to further "
        "bids and hoped to see bidders interested in individual assets team up.",
        "But other sources close to the sale said Vivendi was keeping the door open for further "
        "bids in the next day or two.",
        4.0,
        group="2012/MSRpar",
        id="2012/train/MSRpar:1",
    )
    # The last scored pair of 2016: the file's last five lines are unscored.
    last = _load("test-2016").examples[-1]
    assert last == Example(
        "What could be wrong with my furnace?",
        "What is wrong with my gas furnace?",
        4.0,
        group="2016/question-question",
        id="2016/test/question-question:1550",
    )


# --- groups and recipes ----------------------------------------------------------------------


def test_groups_are_year_and_set() -> None:
    groups = {ex.group for year in range(2012, 2017) for ex in _load(f"test-{year}").examples}
    expected = {
        f"{release[:4]}/{name}"
        for release, sets in PUBLISHED.items()
        if release.endswith("test")
        for name in sets
    }
    assert groups == expected
    assert {"2015/images", "2012/MSRpar", "2012/surprise.OnWN", "2016/answer-answer"} <= groups
    # The 2012 train sets share the group of the test set of the same source.
    assert {ex.group for ex in _load("train-2012").examples} == {
        "2012/MSRpar",
        "2012/MSRvid",
        "2012/SMTeuroparl",
    }


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_recipes_contain_exactly_the_right_sets(recipe: str) -> None:
    expected = {f"{release}/{name}" for release in RECIPES[recipe] for name in PUBLISHED[release]}
    loaded = _load(f"train-{recipe}")
    assert {_set_key(ex) for ex in loaded.examples} == expected
    total = sum(n for release in RECIPES[recipe] for n in PUBLISHED[release].values())
    assert len(loaded.examples) == total == SPEC.split_sizes[f"train-{recipe}"]


def test_recipes_of_the_paper() -> None:
    # He et al. (2016): the STS2015 ablation trains on 2012-2014, the STS2016 runs on 2012-2015.
    def releases(split: str) -> set[str]:
        return {_set_key(ex).rpartition("/")[0] for ex in _load(split).examples}

    assert releases("train-2012-2014") == {"2012/train", "2012/test", "2013/test", "2014/test"}
    assert releases("train-2012-2015") == releases("train-2012-2014") | {"2015/test"}


def test_ids_are_unique() -> None:
    ids = [ex.id for s in ("train-2012-2015", "test-2016") for ex in _load(s).examples]
    assert len(set(ids)) == len(ids) == 13_592 + 1_186


# --- the holdout -----------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_holdout_is_a_disjoint_stratified_10_percent(recipe: str) -> None:
    full = _load(f"train-{recipe}").examples
    train = _load(f"train-{recipe}", True).examples
    dev = _load(f"dev-{recipe}", True).examples
    assert {ex.id for ex in train}.isdisjoint({ex.id for ex in dev})
    assert sorted(ex.id or "" for ex in train + dev) == sorted(ex.id or "" for ex in full)
    # Order kept within each part.
    order = {ex.id: i for i, ex in enumerate(full)}
    assert [order[ex.id] for ex in dev] == sorted(order[ex.id] for ex in dev)
    per_set_full = Counter(_set_key(ex) for ex in full)
    per_set_dev = Counter(_set_key(ex) for ex in dev)
    assert per_set_dev == {k: round(0.1 * n) for k, n in per_set_full.items()}


def test_holdout_is_consistent_across_cumulative_splits() -> None:
    devs = {r: {ex.id for ex in _load(f"dev-{r}", True).examples} for r in RECIPES}
    trains = {r: {ex.id for ex in _load(f"train-{r}", True).examples} for r in RECIPES}
    recipes = list(RECIPES)
    for smaller, larger in zip(recipes, recipes[1:], strict=False):
        assert devs[smaller] < devs[larger] and trains[smaller] < trains[larger]
        # Restricted to the smaller recipe's sets, the larger holdout is the smaller one.
        sets = {_set_key(ex) for ex in _load(f"train-{smaller}").examples}
        assert {i for i in devs[larger] if i.rpartition(":")[0] in sets} == devs[smaller]
    assert [len(devs[r]) for r in recipes] == [223, 534, 684, 1_059, 1_360]


def test_holdout_is_deterministic_and_seeded_per_set() -> None:
    sts_set = StsSet(2014, "test", "images")
    ids = [f"{sts_set.key}:{i}" for i in range(1, 751)]
    held = holdout_ids(sts_set, ids)
    assert held == holdout_ids(sts_set, ids) and len(held) == 75
    other = holdout_ids(StsSet(2015, "test", "images"), [f"x:{i}" for i in range(1, 751)])
    assert {i.rpartition(":")[2] for i in held} != {i.rpartition(":")[2] for i in other}


def test_holdout_leaves_test_splits_alone() -> None:
    assert _load("test-2015", True).examples == _load("test-2015").examples


@pytest.mark.parametrize("split", [s for s in SPEC.splits if s.startswith("dev-")])
def test_dev_split_needs_holdout(split: str) -> None:
    with pytest.raises(ValueError, match="holdout=True"):
        load_split("semeval-sts", split, data_dir=DATA)
    # Selection on a slice of the training years leaves the test protocol standard.
    assert split not in SPEC.non_standard_splits


def test_protocols() -> None:
    official = _load("test-2016").protocol
    assert isinstance(official, RegressionTask)
    assert (official.name, official.min_score, official.max_score) == ("semeval-sts", 0, 5)
    assert official.by_group and official.primary == "pearson"
    assert official.metrics == ("pearson", "spearman", "mse")
    dev = _load("dev-2012-2014", True).protocol
    assert isinstance(dev, RegressionTask) and dev.by_group
    assert dev.name == "semeval-sts-holdout"
    assert SPEC.protocol("train-2012-2014") == official
    assert SPEC.non_standard_splits == ()
    assert "holdout" in SPEC.protocol_description and SPEC.options == {"holdout": (False, True)}


# --- files -----------------------------------------------------------------------------------


def test_registry() -> None:
    assert get_dataset("semeval-sts") is SPEC


def test_sha256sums_agree_with_spec() -> None:
    listed = {}
    for line in (STS / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        listed[name.removeprefix("./")] = digest
    assert {f.name: f.sha256 for f in SPEC.files}.items() <= listed.items()
    on_disk = {str(p.relative_to(STS)) for p in STS.rglob("*") if p.is_file()}
    assert set(listed) == on_disk - {"SHA256SUMS"}


def test_verify_bundled() -> None:
    assert [c.status for c in verify_dataset("semeval-sts", DATA)] == ["ok"] * len(SPEC.files)
    assert is_available("semeval-sts", DATA)


def test_uncompressed_original_is_accepted(tmp_path: Path) -> None:
    for sts_set in SETS:
        if sts_set.year == 2015:
            target = tmp_path / sts_set.input_name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(gzip.decompress((STS / f"{sts_set.input_name}.gz").read_bytes()))
            target.with_name(Path(sts_set.gold_name).name).write_bytes(
                (STS / sts_set.gold_name).read_bytes()
            )
    loaded = load_split("semeval-sts", "test-2015", data_dir=tmp_path)
    assert loaded.examples == _load("test-2015").examples
    assert not is_available("semeval-sts", tmp_path)


# --- the parser ------------------------------------------------------------------------------

S2014 = StsSet(2014, "test", "images")
S2015 = StsSet(2015, "test", "images")
S2016 = StsSet(2016, "test", "headlines")


def _read(tmp_path: Path, sts_set: StsSet, inputs: list[str], golds: list[str]) -> list[Example]:
    return read_sts_set(
        _write(tmp_path / "in.txt", inputs), _write(tmp_path / "gs.txt", golds), sts_set
    )


def test_parser_reads_pairs_and_drops_unscored(tmp_path: Path) -> None:
    inputs = ['A "b" c.\tD e.', "F.\tG.", " H. \tI."]
    assert _read(tmp_path, S2015, inputs, ["4.2", "", "0"]) == [
        Example('A "b" c.', "D e.", 4.2, group="2015/images", id="2015/test/images:1"),
        Example(" H. ", "I.", 0.0, group="2015/images", id="2015/test/images:3"),
    ]
    four = ["A.\tB.\tsource 1\tsource 2"]
    assert _read(tmp_path, S2016, four, ["5"]) == [
        Example("A.", "B.", 5.0, group="2016/headlines", id="2016/test/headlines:1")
    ]


@pytest.mark.parametrize(
    ("sts_set", "inputs", "golds", "match"),
    [
        (S2014, ["a\tb", "c\td"], ["1"], r"gs\.txt:2: expected one gold line per pair: 1 gold"),
        (S2014, ["a\tb"], ["1", "2"], r"gs\.txt:2: .* 2 gold lines for the 1 pairs of .*in\.txt"),
        (S2014, ["a\tb", "a b"], ["1", "2"], r"in\.txt:2: expected 2 tab-separated fields, got 1"),
        (S2016, ["a\tb"], ["1"], r"in\.txt:1: expected 4 tab-separated fields, got 2"),
        (S2014, ["a\tb", "a\t "], ["1", "2"], r"in\.txt:2: empty sentence"),
        (S2014, ["a\tb", "c\td"], ["1", ""], r"gs\.txt:2: expected a score in 0-5, got '' \(an"),
        (S2015, ["a\tb"], ["5.2"], r"gs\.txt:1: expected a score in 0-5, got '5\.2'"),
        (S2015, ["a\tb"], ["-0.5"], r"gs\.txt:1: .* got '-0\.5'"),
        (S2015, ["a\tb"], ["four"], r"gs\.txt:1: .* got 'four'"),
        (S2015, ["a\tb"], ["nan"], r"gs\.txt:1: .* got 'nan'"),
    ],
)
def test_parser_errors_name_file_and_line(
    tmp_path: Path, sts_set: StsSet, inputs: list[str], golds: list[str], match: str
) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        _read(tmp_path, sts_set, inputs, golds)


def test_the_ascii_copies_trailing_blank_line_would_be_an_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError, match=r"in\.txt:2: expected 4 .* got 1"):
        _read(tmp_path, S2016, ["a\tb\tc\td", ""], ["1", ""])
