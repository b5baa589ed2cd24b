"""Matcher API and the command line, on a tiny trained model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnmatch import Matcher
from attnmatch.cli import app
from attnmatch.reproduce import render_markdown
from attnmatch.training import train

from .training.test_trainer import tiny_experiment

runner = CliRunner()
ENV = {"attnmatch": "0", "torch": "2", "python": "3", "threads": 2, "platform": "x"}


def _result(rows: list[dict]) -> dict:
    """A reproduce result for `render_markdown` around `rows`."""
    return {
        "table": "t",
        "title": "T",
        "paper": "",
        "protocol": "proto",
        "commit": "abc",
        "environment": ENV,
        "rows": rows,
    }


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "run"
    return train(tiny_experiment(epochs=8), out, progress=False).model_dir


def test_matcher_score_and_rank(model_dir: Path) -> None:
    m = Matcher(model_dir)
    cands = ["the of apple river in", "the castle bridge a", "river apple was"]
    scores = m.score([("what apple river ?", c) for c in cands])
    assert scores.shape == (3,)
    ranked = m.rank("what apple river ?", cands, top_k=2)
    assert len(ranked) == 2 and ranked[0].score >= ranked[1].score
    assert ranked[0].text == cands[ranked[0].index]
    # Scoring a pair alone equals scoring it in a batch.
    assert m.score([("what apple river ?", cands[1])])[0] == pytest.approx(scores[1], abs=1e-5)
    with pytest.raises(ValueError, match="empty"):
        m.rank("  ", cands)


def test_matcher_explain(model_dir: Path) -> None:
    maps = Matcher(model_dir).explain("what apple river ?", "the apple of river")
    assert maps["left_tokens"] == ["what", "apple", "river", "?"]
    assert maps["interaction"].shape == (1, 4, 4)


def test_cli_rank_from_file_and_stdin(model_dir: Path, tmp_path: Path) -> None:
    cands = tmp_path / "c.txt"
    cands.write_text("the castle bridge a\n\nriver apple was\n")
    result = runner.invoke(
        app, ["rank", str(model_dir), "-q", "what apple river ?", "-c", str(cands), "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [r["rank"] for r in rows] == [1, 2] and {r["text"] for r in rows} == {
        "the castle bridge a",
        "river apple was",
    }
    result = runner.invoke(
        app, ["rank", str(model_dir), "-q", "what apple ?"], input="apple one\nbridge two\n"
    )
    assert result.exit_code == 0 and "apple one" in result.output


def test_cli_evaluate(model_dir: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "pairs_tiny"
    result = runner.invoke(
        app,
        [
            "evaluate",
            str(model_dir),
            "--dataset",
            "pairs:test",
            "--data-dir",
            str(fixture),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["metrics"]["num_queries"] == 8


def test_cli_errors_are_one_clear_line(model_dir: Path, tmp_path: Path) -> None:
    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "attnmatch", *args],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=120,
        )

    r = run("rank", str(model_dir), "-q", " ", stdin="a\n")
    assert r.returncode == 2 and "error:" in r.stderr and "query is empty" in r.stderr
    r = run("rank", str(model_dir), "-q", "x", "-c", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "missing.txt" in r.stderr
    bad = tmp_path / "exp.toml"
    bad.write_text("[train]\nepochz = 1\n")
    r = run("train", str(bad), "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "train.epochz" in r.stderr
    r = run("evaluate", str(tmp_path), "--dataset", "wikiqa:test")
    assert r.returncode == 2 and ("config.json" in r.stderr or "model.safetensors" in r.stderr)


def test_render_markdown_table() -> None:
    result = {
        "table": "t",
        "title": "T",
        "paper": "P",
        "protocol": "proto",
        "commit": "abc",
        "environment": ENV,
        "notes": ["n1"],
        "rows": [
            {
                "id": "mvlstm",
                "label": "MV-LSTM",
                "paper": {"map": 0.6},
                "note": "",
                "seeds": [1, 2],
                "metrics": {"map": {"mean": 0.65, "std": 0.01, "runs": [0.64, 0.66]}},
                "dev": {"map": {"mean": 0.7, "std": 0.0, "runs": [0.7, 0.7]}},
                "best_epochs": [3, 4],
                "train_pairs_per_s": [1.0, 1.0],
            }
        ],
    }
    md = render_markdown(result, ["map"])
    assert "| MV-LSTM | `mvlstm` | 0.6500 ± 0.0100 (0.6000) |" in md
    assert "proto" in md and "--seeds 1,2" in md


def test_render_markdown_mixed_tasks_and_non_standard_rows() -> None:
    def row(id_: str, dataset: str, metrics: dict[str, float], non_standard: list[str]) -> dict:
        return {
            "id": id_,
            "label": id_.upper(),
            "paper": {},
            "note": "",
            "seeds": [1],
            "dataset": dataset,
            "train_split": "train-on-dev" if non_standard else "train",
            "split": "test",
            "non_standard": non_standard,
            "metric_names": list(metrics),
            "metrics": {m: {"mean": v, "std": 0.0, "runs": [v]} for m, v in metrics.items()},
            "per_group": {},
            "dev": {},
            "best_epochs": [1],
            "train_pairs_per_s": [1.0],
        }

    result = _result(
        [
            row("trec", "trecqa", {"map": 0.7, "mrr": 0.8}, []),
            row("quora", "quora", {"accuracy": 0.75}, ["train-on-dev", "dev-holdout"]),
        ]
    )
    md = render_markdown(result, ["map", "mrr"])
    assert "| model | id | data (train → test) | MAP | MRR |" in md
    assert "| model | id | data (train → test) | Accuracy |" in md
    assert "| QUORA — **non-standard protocol** | `quora` | quora: train-on-dev → test |" in md
    assert "| TREC | `trec` | trecqa: train → test | 0.7000 ± 0.0000 |" in md


def test_render_markdown_per_set_values_carry_the_papers_per_set_numbers() -> None:
    metric = {"mean": 0.74, "std": 0.01, "runs": [0.73, 0.75]}
    result = _result(
        [
            {
                "id": "sts",
                "label": "STS",
                "paper": {"pearson": 0.742, "pearson/2016/headlines": 0.7946},
                "note": "",
                "seeds": [1, 2],
                "dataset": "semeval-sts",
                "train_split": "train-2012-2015",
                "split": "test-2016",
                "non_standard": [],
                "metric_names": ["pearson"],
                "metrics": {"pearson": metric},
                "per_group": {"pearson/2016/headlines": metric, "pearson/2016/plagiarism": metric},
                "dev": {},
                "best_epochs": [1, 2],
                "train_pairs_per_s": [1.0, 1.0],
            }
        ]
    )
    md = render_markdown(result, ["pearson"])
    assert "- pearson/2016/headlines: 0.7400 ± 0.0100 (0.7946)" in md
    assert "- pearson/2016/plagiarism: 0.7400 ± 0.0100\n" in md


def test_render_markdown_lists_rows_that_were_not_run() -> None:
    result = _result(
        [
            {
                "id": "ubuntu",
                "label": "HCRN",
                "paper": {"r2@1": 0.816},
                "note": "",
                "seeds": [],
                "dataset": "ubuntu-v1",
                "train_split": "train",
                "split": "test",
                "non_standard": [],
                "metric_names": ["r2@1"],
                "not_run": "data not available",
                "metrics": {},
                "per_group": {},
                "dev": {},
            }
        ]
    )
    md = render_markdown(result, ["r2@1"])
    assert "| HCRN — *not run: data not available* | `ubuntu` | — (0.8160) |" in md
    assert "Per-seed" in md and "`ubuntu` seeds" not in md


def test_reproduce_skips_not_run_rows_without_training(tmp_path: Path) -> None:
    from attnmatch.reproduce import reproduce

    table = tmp_path / "t.toml"
    table.write_text(
        'table = "t"\ntitle = "T"\nprotocol = "p"\nmetrics = ["map"]\n'
        '[[rows]]\nid = "mvlstm"\nlabel = "MV-LSTM"\nnot_run = "data not available"\n'
        'paper = { map = 0.5 }\noverrides = { data = { dataset = "ubuntu-v1" } }\n'
    )
    out = reproduce(table, runs_dir=tmp_path / "runs", results_dir=tmp_path / "res", progress=False)
    assert out["rows"][0]["not_run"] == "data not available"
    assert not (tmp_path / "runs").exists()
    assert "— (0.5000)" in (tmp_path / "res" / "t.md").read_text()


def test_print_metrics_with_different_per_group_keys_per_split(capsys) -> None:
    """A SemEval run's dev (held-out 2012 sets) and test (2015 sets) have different groups."""
    from attnmatch import cli

    cli._print_metrics(
        {
            "dev": {"pearson": 0.7, "pearson/2012/MSRpar": 0.5},
            "test": {"pearson": 0.6, "pearson/2015/belief": 0.4},
        },
        title="t",
    )
    text = capsys.readouterr().out
    assert "0.7000" in text and "0.4000" in text and "—" in text
