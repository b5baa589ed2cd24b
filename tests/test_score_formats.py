"""`attnmatch score` on CSV and parquet files: the same scores and columns as from TSV and
JSONL, errors naming file, line and column."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from attnmatch.cli import app
from attnmatch.training import train
from tests.training.test_trainer import tiny_experiment

runner = CliRunner()
PAIRS = [
    ("what apple river ?", "the of apple river in", "7"),
    ("what apple ?", 'castle, "bridge"', "8"),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("score") / "run"
    return train(tiny_experiment(epochs=1, floors="none"), out, progress=False).model_dir


def write_all(folder: Path) -> dict[str, Path]:
    header = ["id", "left", "right"]
    rows = [[i, left, right] for left, right, i in PAIRS]
    files = {fmt: folder / f"pairs.{fmt}" for fmt in ("tsv", "csv", "jsonl", "parquet")}
    files["tsv"].write_text("".join("\t".join(r) + "\n" for r in [header, *rows]))
    with files["csv"].open("w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    objects = [dict(zip(header, r, strict=True)) for r in rows]
    files["jsonl"].write_text("".join(json.dumps(o) + "\n" for o in objects))
    pq.write_table(
        pa.table({c: [r[i] for r in rows] for i, c in enumerate(header)}), files["parquet"]
    )
    return files


def test_score_reads_csv_and_parquet_as_tsv_and_jsonl(model_dir: Path, tmp_path: Path) -> None:
    outputs = {}
    for fmt, file in write_all(tmp_path).items():
        out = tmp_path / f"scored-{fmt}.tsv"
        result = runner.invoke(app, ["score", str(model_dir), str(file), "-o", str(out)])
        assert result.exit_code == 0, result.output
        outputs[fmt] = out.read_text()
    assert outputs["tsv"].splitlines()[0] == "left\tright\tid\tscore"
    assert len(set(outputs.values())) == 1, outputs
    printed = runner.invoke(app, ["score", str(model_dir), str(tmp_path / "pairs.parquet")])
    scores = [line.split("\t")[-1] for line in outputs["tsv"].splitlines()[1:]]
    assert printed.stdout.split() == scores


def test_format_csv_and_parquet_name_what_the_file_holds(model_dir: Path, tmp_path: Path) -> None:
    """`--format csv` (or parquet) reads a file whose name does not say so, as the name would;
    from stdin it is refused in one line."""
    files = write_all(tmp_path)
    expected = runner.invoke(app, ["score", str(model_dir), str(files["csv"])]).stdout
    for fmt in ("csv", "parquet"):
        renamed = files[fmt].rename(tmp_path / f"pairs-{fmt}.data")
        args = ["score", str(model_dir), str(renamed), "--format", fmt]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert result.stdout == expected
    piped = runner.invoke(app, ["score", str(model_dir), "--format", "csv"], input="left,right\n")
    assert piped.exit_code != 0  # `attnmatch` prints the ValueError as one line, exit 2
    assert "--format csv reads a file" in str(piped.exception) + piped.output


@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        (
            "p.csv",
            lambda p: p.write_text("id,left\n1,a\n"),
            r"p\.csv:1: the header lacks column\(s\) \['right'\]",
        ),
        (
            "p.csv",
            lambda p: p.write_text("left,right\na,b\nc\n"),
            r"p\.csv:3: expected 2 comma-separated fields",
        ),
        (
            "p.parquet",
            lambda p: pq.write_table(pa.table({"left": ["a", "b"], "right": ["c", None]}), p),
            r"p\.parquet:3: column 'right' is null",
        ),
        (
            "p.parquet",
            lambda p: pq.write_table(pa.table({"left": ["a"], "right": [3]}), p),
            r"p\.parquet:2: column 'right' must be text, got int 3",
        ),
    ],
)
def test_score_errors_name_file_line_and_column(
    model_dir: Path, tmp_path: Path, name: str, make: object, message: str
) -> None:
    path = tmp_path / name
    make(path)  # type: ignore[operator]
    result = runner.invoke(app, ["score", str(model_dir), str(path)])
    assert result.exit_code != 0

    assert re.search(message, str(result.exception) + result.output), (
        result.exception,
        result.output,
    )
