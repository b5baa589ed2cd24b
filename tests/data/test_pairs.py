"""Your own pairs (`pairs:FOLDER`): file rules, the task read from labels, classes and score
ranges, the held-out dev split, positive-only retrieval splits, split references, and the data
commands around them (offline fetch, bundled data from any directory, `datasets list`)."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnmatch.cli import app
from attnmatch.data import labels
from attnmatch.data.datasets import (
    DatasetFormatError,
    DatasetNotFoundError,
    DownloadError,
    find_dataset_dir,
    get_dataset,
    load_split,
    load_train_dev_test,
    pairs,
    parse_dataset_ref,
    resolve_dataset_ref,
)
from attnmatch.data.datasets._spec import download_dataset
from attnmatch.tasks import ClassificationTask, RegressionTask, Task
from attnmatch.training import ExperimentConfig, api
from attnmatch.training.experiment import load_splits
from tests.hostile._util import assert_clear_error, run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
Row = tuple[str, ...]


def write(folder: Path, split: str, rows: list[Row], header: str = "left\tright\tlabel") -> Path:
    """`folder/<split>.tsv` (`.tsv.gz` when split ends with .gz) with `header` and `rows`."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{line}\n" for line in [header, *("\t".join(r) for r in rows)])
    if split.endswith(".gz"):
        path = folder / f"{split[:-3]}.tsv.gz"
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path = folder / f"{split}.tsv"
        path.write_text(text, encoding="utf-8")
    return path


def ranking_rows(queries: int, prefix: str = "q", answers: int = 3) -> list[Row]:
    """`queries` groups (column group first) of one positive and `answers - 1` negatives."""
    return [
        (f"{prefix}{q}", f"question {prefix}{q} ?", f"answer {prefix}{q}.{a}", str(int(a == 0)))
        for q in range(queries)
        for a in range(answers)
    ]


GROUPED = "group\tleft\tright\tlabel"


# --- files and columns ------------------------------------------------------------------------


def test_gz_files_are_read_like_plain_ones(tmp_path: Path) -> None:
    rows = [("a b", "c d", "1"), ("e f", "g h", "0"), ("i j", "k l", "1")]
    write(tmp_path / "plain", "train", rows)
    write(tmp_path / "gz", "train.gz", rows)
    plain = load_split("pairs", "train", data_dir=tmp_path / "plain")
    gz = load_split("pairs", "train", data_dir=tmp_path / "gz")
    assert [(e.left, e.right, e.label) for e in gz.examples] == [
        (e.left, e.right, e.label) for e in plain.examples
    ]
    assert (
        gz.examples[0].id == "train.tsv.gz:2"
        and gz.task == plain.task
        and gz.task.kind == "classification"
    )
    write(tmp_path / "gz", "train", rows)
    with pytest.raises(DatasetFormatError, match=r"train\.tsv and .*train\.tsv\.gz both exist"):
        load_split("pairs", "train", data_dir=tmp_path / "gz")


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (
            "left\tright\tlabel\tscore",
            r"train\.tsv:1: unknown column 'score'; the columns are left, right, label and "
            r"optionally group",
        ),
        ("left\tright", r"train\.tsv:1: the header lacks column\(s\) \['label'\]"),
        ("left\tright\tlabel\tleft", r"train\.tsv:1: column\(s\) \['left'\] named twice"),
    ],
)
def test_header_errors_name_the_file_and_the_column(
    tmp_path: Path, header: str, message: str
) -> None:
    write(tmp_path, "train", [("a", "b", "1", "x")], header=header)
    with pytest.raises(DatasetFormatError, match=message):
        load_split("pairs", "train", data_dir=tmp_path)


def test_columns_in_any_order_blank_lines_skipped_and_errors_name_the_line(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path, "train", [("1", "b", "a"), ("", "", ""), ("0", "d", "c")], "label\tright\tleft"
    )
    split = load_split("pairs", "train", data_dir=tmp_path)
    assert [(e.left, e.right, e.label) for e in split.examples] == [("a", "b", 1), ("c", "d", 0)]
    assert [e.id for e in split.examples] == ["train.tsv:2", "train.tsv:4"]  # line 3 is blank
    path.write_text("left\tright\tlabel\na\tb\t1\n\nc\td\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=rf"{path}:4: expected 3 tab-separated fields"):
        load_split("pairs", "train", data_dir=tmp_path)
    path.write_text("left\tright\tlabel\na\tb\t1\nc\td\tx\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=rf"{path}:3: the label must be a number, got 'x'"):
        load_split("pairs", "train", data_dir=tmp_path)


def test_unknown_option_lists_the_valid_ones(tmp_path: Path) -> None:
    write(tmp_path, "train", [("a", "b", "1"), ("c", "d", "0")])
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['num_classes'\]; valid options: "):
        load_split("pairs", "train", data_dir=tmp_path, num_classes=2)
    with pytest.raises(ValueError, match="task='ranked' is not one of auto, ranking"):
        load_split("pairs", "train", data_dir=tmp_path, task="ranked")


# --- labels and the task ----------------------------------------------------------------------


def test_one_point_zero_is_the_class_1(tmp_path: Path) -> None:
    write(tmp_path, "train", [("a", "b", "0"), ("c", "d", "1.0"), ("e", "f", "1"), ("g", "h", "0")])
    split = load_split("pairs", "train", data_dir=tmp_path)
    assert split.task.kind == "classification"
    assert isinstance(split.protocol, ClassificationTask)
    assert split.protocol.class_names == ("0", "1")
    assert [e.label for e in split.examples] == [0, 1, 1, 0]


def test_string_labels_are_classes_sorted_by_name(tmp_path: Path) -> None:
    names = ["neutral", "entailment", "contradiction", "entailment"]
    write(tmp_path, "train", [(f"p{i}", f"h{i}", y) for i, y in enumerate(names)])
    write(tmp_path, "dev", [("p", "h", "entailment"), ("p", "k", "unknown")])
    split = load_split("pairs", "train", data_dir=tmp_path)
    assert isinstance(split.protocol, ClassificationTask)
    assert split.protocol.class_names == ("contradiction", "entailment", "neutral")
    assert [e.label for e in split.examples] == [2, 1, 0, 1]
    assert Task.of(split.protocol).class_names == ("contradiction", "entailment", "neutral")
    with pytest.raises(
        DatasetFormatError,
        match=r"dev\.tsv:3: label 'unknown' is not a class of train \(contradiction, entailment, ",
    ):
        load_split("pairs", "dev", data_dir=tmp_path)


CHANGE = "set task= to change"


@pytest.mark.parametrize(
    ("header", "rows", "task", "note"),
    [
        (
            "left\tright\tlabel",
            [("a", "b", "duplicate"), ("c", "d", "different"), ("e", "f", "duplicate")],
            "classification",
            f"task: classification (labels are not numbers: 2 classes different, duplicate; {CHANGE})",
        ),
        (
            "left\tright\tlabel",
            [("q1", "a1", "1"), ("q2", "a2", "1.0")],
            "ranking",
            f"task: ranking (every label is 1: positive pairs only; {CHANGE})",
        ),
        (
            GROUPED,
            [row for row in ranking_rows(2)],
            "ranking",
            f"task: ranking (labels 0/1, 2 queries with several candidates; {CHANGE})",
        ),
        (  # a recurring left text is no group (paraphrase sets repeat sentences)
            "left\tright\tlabel",
            [("same q", "a", "1"), ("same q", "b", "0"), ("other", "c", "0")],
            "classification",
            f"task: classification (labels 0/1, no group column; {CHANGE})",
        ),
        (
            GROUPED,
            [("g1", "s1", "t1", "1"), ("g2", "s2", "t2", "0"), ("g3", "s3", "t3", "0")],
            "classification",
            f"task: classification (labels 0/1, no group with several candidates; {CHANGE})",
        ),
        (
            "left\tright\tlabel",
            [("s1", "t1", "1"), ("s2", "t2", "5"), ("s3", "t3", "3.0")],
            "regression",
            f"task: regression (integer labels 1..5, 3 levels; {CHANGE})",
        ),
        (
            "left\tright\tlabel",
            [("s1", "t1", "0.5"), ("s2", "t2", "2.5"), ("s3", "t3", "1")],
            "regression",
            f"task: regression (real-valued labels 0.5..2.5; {CHANGE})",
        ),
    ],
)
def test_task_inference(tmp_path: Path, header: str, rows: list[Row], task: str, note: str) -> None:
    write(tmp_path, "train", rows, header=header)
    split = load_split("pairs", "train", data_dir=tmp_path)
    assert (split.task.kind, split.notes[0]) == (task, note)
    # fit reads the same rows by the same rule.
    tuples = [(*r[1:], r[0]) for r in rows] if header == GROUPED else rows
    texts, values, grouped = api.read_grouped_pairs(tuples, "train")
    scheme = labels.choose_task(values, [g for _, _, g in texts] if grouped else None)
    assert (scheme.task, scheme.reason) == (task, note)


def test_an_explicit_task_wins_and_one_rule_serves_matcher_fit(tmp_path: Path) -> None:
    write(tmp_path, "train", ranking_rows(2), header=GROUPED)
    split = load_split("pairs", "train", data_dir=tmp_path, task="classification")
    assert (split.task.kind, split.notes) == (
        "classification",
        ("task: classification (given by task=)",),
    )
    assert api.choose_task is labels.choose_task and pairs.choose_task is labels.choose_task
    with pytest.raises(ValueError, match="train: every label is 0: nothing to learn"):
        labels.choose_task([0.0, 0.0], ["a", "b"])
    with pytest.raises(ValueError, match="a ranking task needs numeric labels"):
        labels.choose_task(["yes", "no"], ["a", "b"], task="ranking")


def test_real_score_bounds_train_with_mse(tmp_path: Path) -> None:
    write(tmp_path, "train", [("a", "b", "0.5"), ("c", "d", "2.5"), ("e", "f", "1.25")])
    write(tmp_path, "dev", [("a", "b", "2.75")])  # outside train's range: refused, unless widened
    split = load_split("pairs", "train", data_dir=tmp_path)
    protocol = split.protocol
    assert isinstance(protocol, RegressionTask)
    assert (protocol.min_score, protocol.max_score) == (0.5, 2.5)
    task = Task.of(protocol)
    assert task.resolve_loss("auto") == "mse" and task.num_outputs("mse") == 1
    with pytest.raises(ValueError, match=r"loss 'kl' needs integer score bounds .* 0\.5\.\.2\.5"):
        task.resolve_loss("kl")
    assert Task.from_dict(task.to_dict()) == task
    with pytest.raises(
        DatasetFormatError, match=r"dev\.tsv:2: score 2\.75 outside 0\.5\.\.2\.5 .*max_score"
    ):
        load_split("pairs", "dev", data_dir=tmp_path)
    widened = load_split("pairs", "dev", data_dir=tmp_path, min_score=0.5, max_score=3)
    assert widened.examples[0].label == 2.75


def test_integral_bounds_stay_ints_and_given_bounds_are_checked(tmp_path: Path) -> None:
    write(tmp_path, "train", [("a", "b", "1.5"), ("c", "d", "2.5"), ("e", "f", "1")])
    split = load_split("pairs", "train", data_dir=tmp_path, min_score=0, max_score=5.0)
    assert isinstance(split.protocol, RegressionTask)
    task = Task.of(split.protocol)
    assert task.to_dict() == {"kind": "regression", "min_score": 0, "max_score": 5}
    assert type(task.max_score) is int and task.resolve_loss("auto") == "kl"
    assert task.num_outputs("kl") == 6
    with pytest.raises(DatasetFormatError, match=r"train\.tsv:3: score 2\.5 outside 1\.\.2"):
        load_split("pairs", "train", data_dir=tmp_path, task="regression", max_score=2)


@pytest.mark.parametrize(
    ("labels_", "primary", "metrics"),
    [
        (["0", "1", "0", "1", "0"], "accuracy", ("accuracy", "f1")),  # 40% >= 35%
        (["0", "1", "0", "0", "0"], "f1", ("accuracy", "f1")),  # 20%
        (["a", "b", "c", "a", "a", "a", "b"], "macro_f1", ("accuracy", "macro_f1")),  # 1 in 7
    ],
)
def test_classification_primary_metric_follows_class_balance(
    tmp_path: Path, labels_: list[str], primary: str, metrics: tuple[str, ...]
) -> None:
    write(tmp_path, "train", [(f"s{i}", f"t{i}", y) for i, y in enumerate(labels_)])
    protocol = load_split("pairs", "train", data_dir=tmp_path).protocol
    assert isinstance(protocol, ClassificationTask)
    assert (protocol.primary, protocol.metrics) == (primary, metrics)
    assert f"primary {'F1' if primary == 'f1' else primary.replace('_f1', ' F1')}" in (
        protocol.description
    )


# --- splits: held-out dev, no test ------------------------------------------------------------


def test_no_dev_file_holds_out_queries_of_train(tmp_path: Path) -> None:
    write(tmp_path, "train", ranking_rows(20), header=GROUPED)
    write(tmp_path, "test", ranking_rows(4, prefix="t"), header=GROUPED)
    train, dev, test = load_train_dev_test(f"pairs:{tmp_path}")
    assert dev.notes[1] == "dev: no dev.tsv; held out 3 of 20 queries of train.tsv (seed 0)"
    train_groups = {e.group for e in train.examples}
    dev_groups = {e.group for e in dev.examples}
    assert len(dev_groups) == 3 and len(train_groups) == 17 and not train_groups & dev_groups
    assert len(train.examples) + len(dev.examples) == 60
    assert test is not None and len(test.examples) == 12
    # Deterministic, and the seed is an option.
    again = load_train_dev_test(f"pairs:{tmp_path}")[1]
    assert [e.id for e in again.examples] == [e.id for e in dev.examples]
    other = load_train_dev_test(f"pairs:{tmp_path}", holdout_seed=5)[1]
    assert {e.group for e in other.examples} != dev_groups
    assert other.notes[1].endswith("(seed 5)")


def test_load_splits_reads_a_pairs_folder_from_the_config(tmp_path: Path) -> None:
    write(tmp_path, "train", ranking_rows(10), header=GROUPED)
    config = ExperimentConfig.from_dict(
        {"model": "mvlstm", "data": {"dataset": f"pairs:{tmp_path}"}}
    )
    train, dev, test = load_splits(config)
    assert test is None and len({e.group for e in dev.examples}) == 2  # round(1.5) = 2
    assert train.notes == (
        f"task: ranking (labels 0/1, 10 queries with several candidates; {CHANGE})",
        f"test: no test.tsv in {tmp_path}: no test evaluation",
    )
    with pytest.raises(ValueError, match="the pairs folder is named twice"):
        load_train_dev_test(f"pairs:{tmp_path}", data_dir=tmp_path / "other")


def test_registered_datasets_load_their_three_splits_as_before() -> None:
    train, dev, test = load_train_dev_test("msrp", "train", "dev", "test")
    assert (train.split, dev.split, test and test.split) == ("train", "dev", "test")
    assert train.notes == dev.notes == ()


# --- positive-only ranking evaluation -----------------------------------------------------------


def test_positive_only_evaluation_splits_rank_against_every_answer(tmp_path: Path) -> None:
    positives = [("q1", "a1", "1"), ("q2", "a2", "1"), ("q2", "a2b", "1"), ("q3", "a3", "1")]
    write(tmp_path, "train", positives)
    write(tmp_path, "test", [*positives, ("q4", "a1", "1")])  # q4 shares q1's answer
    train = load_split("pairs", "train", data_dir=tmp_path)
    assert train.task.kind == "ranking" and len(train.examples) == 4  # training: never expanded
    test = load_split("pairs", "test", data_dir=tmp_path)
    assert test.notes[1] == "test: each of 4 questions ranked against all 4 answers of the split"
    assert len(test.examples) == 16
    positive = {(e.left, e.right) for e in test.examples if e.label > 0}
    assert positive == {(q, a) for q, a, _ in [*positives, ("q4", "a1", "1")]}
    assert sum(e.label == 0 for e in test.examples) == 16 - 5
    # A split with any negative is left as it is.
    write(tmp_path, "dev", [("q1", "a1", "1"), ("q1", "a2", "0"), ("q2", "a2", "1")])
    dev = load_split("pairs", "dev", data_dir=tmp_path)
    assert len(dev.examples) == 3 and len(dev.notes) == 1


def test_large_positive_only_splits_sample_other_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pairs, "MAX_EXPANDED_PAIRS", 20)
    monkeypatch.setattr(pairs, "SAMPLED_ANSWERS", 3)
    write(tmp_path, "train", [(f"q{i}", f"a{i}", "1") for i in range(10)])
    test = write(tmp_path, "test", [(f"q{i}", f"a{i}", "1") for i in range(10)])
    split = load_split("pairs", "test", data_dir=tmp_path)
    assert len(split.examples) == 10 * 4  # its answer and 3 others each
    assert split.notes[1] == (
        "test: each of 10 questions ranked against its answers and 3 others sampled from the "
        "10 answers of the split (seed 0; all would be 100 pairs)"
    )
    again = load_split("pairs", "test", data_dir=tmp_path)
    assert [(e.left, e.right) for e in again.examples] == [
        (e.left, e.right) for e in split.examples
    ]
    assert test.is_file()


# --- references: pairs:FOLDER[:SPLIT] -----------------------------------------------------------


def test_dataset_references_with_a_folder(tmp_path: Path) -> None:
    folder = str(FIXTURES / "pairs_tiny")
    assert resolve_dataset_ref(f"pairs:{folder}", default_split="test") == ("pairs", "test", folder)
    assert resolve_dataset_ref(f"pairs:{folder}:dev") == ("pairs", "dev", folder)
    assert resolve_dataset_ref("pairs:test") == ("pairs", "test", None)  # folder: data_dir
    assert resolve_dataset_ref("wikiqa:dev") == ("wikiqa", "dev", None)
    assert resolve_dataset_ref("wikiqa", default_split="test") == ("wikiqa", "test", None)
    with pytest.raises(ValueError, match="wikiqa has no split 'valid'"):
        resolve_dataset_ref("wikiqa:valid")
    assert parse_dataset_ref(f"pairs:{folder}:dev") == (f"pairs:{folder}", "dev")
    dev = load_split(*parse_dataset_ref(f"pairs:{folder}:dev"))
    assert dev.dataset == "pairs" and len({e.group for e in dev.examples}) == 8
    with pytest.raises(ValueError, match=r"'nowhere' is not a folder here\): name one as pairs:"):
        load_split(*parse_dataset_ref("pairs:nowhere"))
    with pytest.raises(DatasetNotFoundError, match=r"pairs: no valid\.tsv \(or valid\.tsv\.gz\)"):
        load_split(f"pairs:{folder}", "valid")


def test_matcher_evaluate_takes_a_pairs_folder() -> None:
    from attnmatch.matcher import Matcher

    folder = FIXTURES / "pairs_tiny"
    train = load_split("pairs", "train", data_dir=folder)
    texts = [t for e in train.examples for t in (e.left, e.right)]
    matcher = Matcher.untrained(
        "mvlstm", inputs="random", task=Task(kind="ranking"), train_texts=texts, seed=1
    )
    report = matcher.evaluate(f"pairs:{folder}")  # the test split
    assert report.metrics["num_queries"] == 8
    assert matcher.evaluate(f"pairs:{folder}:dev").metrics["num_queries"] == 8


# --- data commands --------------------------------------------------------------------------------


def test_fetch_without_network_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    outcome = run_cli(["datasets", "fetch", "wikiqa", "--dest", str(tmp_path)], capsys)
    line = assert_clear_error(outcome)
    url = get_dataset("wikiqa").url
    assert line == (
        f"error: cannot download wikiqa from {url} (no route to host); put the files in "
        f"{tmp_path / 'wikiqa'} by hand: see `attnmatch datasets info wikiqa`"
    )

    def slow(*args: object, **kwargs: object) -> None:
        raise TimeoutError("timed out")

    monkeypatch.setattr(urllib.request, "urlopen", slow)
    with pytest.raises(DownloadError, match=r"cannot download wikiqa from .* \(timed out\)"):
        download_dataset(get_dataset("wikiqa"), tmp_path)
    assert not (tmp_path / "wikiqa").exists()


def test_bundled_data_is_found_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ATTNMATCH_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    checkout = Path(__file__).parents[2] / "data"
    assert find_dataset_dir(get_dataset("sick")) == checkout / "sick"
    assert len(load_split("sick", "dev").examples) == 500


def test_datasets_commands_show_pairs() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["datasets", "list"])
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if " pairs " in line)
    assert "any" in row
    info = runner.invoke(
        app, ["datasets", "info", "pairs", "--data-dir", str(FIXTURES / "pairs_tiny")]
    )
    assert info.exit_code == 0, info.output
    text = " ".join(info.output.split())
    assert "a header naming left, right, label and optionally group" in text
    assert "any other column is an error" in text and "holdout_seed" in text
    assert "task: ranking (labels 0/1, 24 queries with several candidates" in text
    fetch = runner.invoke(app, ["datasets", "fetch", "pairs"])
    assert isinstance(fetch.exception, ValueError)
    assert "pairs is your own folder" in str(fetch.exception)
