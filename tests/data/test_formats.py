"""Your pairs as CSV, JSONL, parquet and Hugging Face datasets: the same rows, the same rules,
the same errors (file, line, column), and the same trained model as from TSV."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import safetensors.torch

from attnmatch.data.datasets import load_split
from attnmatch.data.datasets.pairs import read_pairs_file
from attnmatch.data.tabular import read_table
from attnmatch.data.textfile import DatasetFormatError
from attnmatch.training import ExperimentConfig, fit, train

EXAMPLES = Path(__file__).parents[2] / "examples" / "own_data"
OWN_DATA = ("faq", "paraphrase", "similarity")


def tsv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    header, *rows = [line.split("\t") for line in path.read_text("utf-8").splitlines()]
    return header, rows


def number(text: str) -> float | int:
    value = float(text)
    return int(value) if value.is_integer() else value


def write_as(source: Path, target: Path, fmt: str) -> None:
    """`source`'s TSV files written as `fmt` into `target` (labels as numbers where typed)."""
    target.mkdir(parents=True, exist_ok=True)
    for tsv in sorted(source.glob("*.tsv")):
        header, rows = tsv_rows(tsv)
        file = target / f"{tsv.stem}.{fmt}"
        if fmt == "csv":
            with file.open("w", encoding="utf-8", newline="") as f:
                csv.writer(f).writerows([header, *rows])
        elif fmt == "jsonl":
            objects = [dict(zip(header, row, strict=True)) for row in rows]
            for obj in objects:
                obj["label"] = number(obj["label"])
            file.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
        else:
            columns = {name: [row[i] for row in rows] for i, name in enumerate(header)}
            columns["label"] = [number(v) for v in columns["label"]]  # type: ignore[misc]
            pq.write_table(pa.table(columns), file)


def tiny(folder: Path) -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 8, "k": 5},
            "data": {"dataset": "pairs", "data_dir": str(folder)},
            "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 8},
            "train": {"epochs": 2, "batch_size": 16, "num_negatives": 2, "floors": "none"},
        }
    )


def weights(model_dir: Path) -> dict[str, object]:
    return safetensors.torch.load_file(str(model_dir / "model.safetensors"))


@pytest.mark.parametrize("example", OWN_DATA)
def test_own_data_trains_identically_from_tsv_csv_jsonl_and_parquet(
    example: str, tmp_path: Path
) -> None:
    runs = {"tsv": train(tiny(EXAMPLES / example), tmp_path / "tsv", progress=False)}
    for fmt in ("csv", "jsonl", "parquet"):
        write_as(EXAMPLES / example, tmp_path / fmt / "data", fmt)
        runs[fmt] = train(tiny(tmp_path / fmt / "data"), tmp_path / fmt / "run", progress=False)
    reference = runs["tsv"]
    assert reference.dev and reference.test
    first = weights(reference.model_dir)
    reference_data = json.loads((reference.model_dir / "metrics.json").read_text())["data"]
    for fmt, run in runs.items():
        assert (run.dev, run.test, run.best_epoch) == (
            reference.dev,
            reference.test,
            reference.best_epoch,
        ), fmt
        assert [h["train_loss"] for h in run.history] == [
            h["train_loss"] for h in reference.history
        ], fmt
        card_data = json.loads((run.model_dir / "metrics.json").read_text())["data"]
        assert card_data == reference_data, fmt  # the card's hashes: the rows, not the file
        other = weights(run.model_dir)
        assert all(other[k].equal(first[k]) for k in first), fmt  # type: ignore[attr-defined]


def table(example: str, split: str) -> dict[str, list[str]]:
    header, rows = tsv_rows(EXAMPLES / example / f"{split}.tsv")
    return {name: [row[i] for row in rows] for i, name in enumerate(header)}


FIT = {
    "model": "mvlstm",
    "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 8},
    "epochs": 1,
    "batch_size": 16,
    "floors": "none",
}


def test_matcher_fit_and_score_read_a_datasets_dataset_as_the_same_rows() -> None:
    datasets = pytest.importorskip("datasets")
    import pandas as pd

    train_rows, dev_rows = table("similarity", "train"), table("similarity", "dev")
    as_tuples = [list(zip(*t.values(), strict=True)) for t in (train_rows, dev_rows)]
    by_tuples = fit(*as_tuples, **FIT)  # type: ignore[arg-type]
    frames = [pd.DataFrame(t) for t in (train_rows, dev_rows)]
    by_frame = fit(*frames, **FIT)  # type: ignore[arg-type]
    sets = [datasets.Dataset.from_dict(t) for t in (train_rows, dev_rows)]
    by_dataset = fit(*sets, **FIT)  # type: ignore[arg-type]
    renamed = {"left": "sentence1", "right": "sentence2", "label": "score"}
    other = [s.rename_columns(renamed) for s in sets]
    by_mapping = fit(*other, columns=renamed, **FIT)  # type: ignore[arg-type]
    dev = by_tuples.metrics["dev"]
    assert dev and "spearman" in dev
    for matcher in (by_frame, by_dataset, by_mapping):
        assert matcher.metrics["dev"] == dev
    pairs = list(zip(dev_rows["left"], dev_rows["right"], strict=True))
    expected = by_tuples.score(pairs)
    assert by_dataset.score(sets[1]).tolist() == expected.tolist()
    assert by_dataset.score(other[1], columns=renamed).tolist() == expected.tolist()
    with pytest.raises(ValueError, match=r"train: the Dataset lacks column\(s\) \['left', 'right'"):
        fit(other[0], **FIT)
    with pytest.raises(ValueError, match=r"a DatasetDict \('train'\); pass one split"):
        fit(datasets.DatasetDict({"train": sets[0]}), **FIT)


def test_a_csv_reads_quoted_fields_a_bom_and_gzip_and_numbers_rows_by_their_first_line(
    tmp_path: Path,
) -> None:
    text = '\ufeffleft,right,label\n\nwhat is "x"?,"a, b",1\n"two\nlines",b,0\n  ,  \nc,d,0\n'
    (tmp_path / "train.csv").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "dev.csv.gz", "wt", encoding="utf-8") as f:
        f.write(text)
    for name in ("train.csv", "dev.csv.gz"):
        header, rows = read_table(tmp_path / name)
        assert header == ["left", "right", "label"]
        assert list(rows) == [
            (3, {"left": 'what is "x"?', "right": "a, b", "label": "1"}),
            (4, {"left": "two\nlines", "right": "b", "label": "0"}),
            (7, {"left": "c", "right": "d", "label": "0"}),
        ]
    file = read_pairs_file(tmp_path / "train.csv")
    assert file.lines == [3, 4, 7] and file.labels == [1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("train.csv", "left,right,label\na,b\n", r"train\.csv:2: expected 3 comma-separated"),
        ("train.csv", "left,right,score\na,b,1\n", r"train\.csv:1: unknown column 'score'"),
        ("train.csv", "left,right,label\n\na,,1\n", r"train\.csv:3: empty left or right text"),
        ("train.csv", 'left,right,label\na,"b,1\n', r"train\.csv:2: not valid CSV"),
        ("train.csv", "left,left,label\n", r"train\.csv:1: column\(s\) \['left'\] named twice"),
        ("train.csv", "", r"train\.csv: empty file"),
        (
            "train.jsonl",
            '{"left": "a", "right": "b", "label": 1}\n{"left": "a", "right": 2, "label": 1}\n',
            r"train\.jsonl:2: column 'right' must be text, got int 2",
        ),
        (
            "train.jsonl",
            '{"left": "a", "right": "b", "label": 1}\n\n{"left": "c", "right": "d"}\n',
            r"train\.jsonl:3: the keys \['left', 'right'\] differ from the first object's",
        ),
        (
            "train.jsonl",
            '{"left": "a", "right": "b", "label": true}\n',
            r"train\.jsonl:1: the label must be a number, got True",
        ),
        (
            "train.jsonl",
            '{"left": "a", "right": "b", "label": NaN}\n',
            r"train\.jsonl:1: not valid JSON: NaN",
        ),
        ("train.parquet", b"PAR1 not really", r"train\.parquet: not a readable parquet file"),
    ],
)
def test_errors_name_file_line_and_column(
    tmp_path: Path, name: str, content: str | bytes, message: str
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=message):
        read_pairs_file(path)


def test_parquet_rows_are_numbered_as_in_a_spreadsheet_and_nulls_refused(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    pq.write_table(
        pa.table({"group": [7, 7], "left": ["q", "q"], "right": ["a", "b"], "label": [1, 0]}),
        path,
    )
    file = read_pairs_file(path)
    assert (file.lines, file.groups, file.labels) == ([2, 3], ["7", "7"], [1.0, 0.0])
    pq.write_table(pa.table({"left": ["q", None], "right": ["a", "b"], "label": [1, 0]}), path)
    with pytest.raises(DatasetFormatError, match=r"train\.parquet:3: column 'left' is null"):
        read_pairs_file(path)


def test_a_folder_holds_one_file_per_split(tmp_path: Path) -> None:
    (tmp_path / "train.tsv").write_text("left\tright\tlabel\nq\ta\t1\nq\tb\t0\n")
    (tmp_path / "train.csv").write_text("left,right,label\nq,a,1\nq,b,0\n")
    with pytest.raises(DatasetFormatError, match=r"train\.tsv and .*train\.csv both exist"):
        load_split("pairs", "train", data_dir=tmp_path)
    (tmp_path / "train.tsv").unlink()
    assert [e.right for e in load_split("pairs", "train", data_dir=tmp_path).examples] == ["a", "b"]
