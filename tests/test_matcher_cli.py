"""Matcher API (load, save, fit, zero-shot encoders, model directory formats) and the command
line (rank, score, evaluate, errors), on a tiny trained model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from typer.testing import CliRunner

from attnmatch import model_dir as model_dir_format
from attnmatch.cli import app
from attnmatch.matcher import Matcher, load_matcher
from attnmatch.research.reproduce import render_markdown
from attnmatch.tasks import Task
from attnmatch.training import fit, train
from tests.models.conftest import tiny_inputs, tiny_model
from tests.tiny_transformer import write_tiny_encoder

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
    m = Matcher.load(model_dir)
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
    maps = Matcher.load(model_dir).explain("what apple river ?", "the apple of river")
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


# --- new in the Matcher API: score, zero-shot encoders, save/load, fit, formats --------------


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT in a Hugging Face model directory (not an attnmatch model)."""
    return write_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny-bert")


def test_cli_score_from_file_and_stdin(model_dir: Path, tmp_path: Path) -> None:
    pairs = [("what apple river ?", "the of apple river in"), ("what apple ?", "castle bridge")]
    file = tmp_path / "pairs.tsv"
    file.write_text("".join(f"{a}\t{b}\n" for a, b in pairs) + "\n")  # a blank line is skipped
    result = runner.invoke(app, ["score", str(model_dir), "--pairs", str(file), "--format", "tsv"])
    assert result.exit_code == 0, result.output
    printed = [float(line) for line in result.output.splitlines()]
    expected = Matcher.load(model_dir).score(pairs)
    np.testing.assert_allclose(printed, expected, rtol=1e-5, atol=1e-6)  # 6 significant digits
    tsv = ["--format", "tsv"]
    result = runner.invoke(
        app, ["score", str(model_dir), *tsv], input=f"{pairs[1][0]}\t{pairs[1][1]}\n"
    )
    assert result.exit_code == 0, result.output
    assert float(result.output) == pytest.approx(float(expected[1]), rel=1e-5, abs=1e-6)
    file.write_text("a\tb\nno tab here\n")
    result = runner.invoke(app, ["score", str(model_dir), "-p", str(file), *tsv])
    assert result.exit_code != 0
    assert "pairs.tsv:2: expected LEFT<TAB>RIGHT, got 1 fields" in str(result.exception)


def test_cli_rank_and_score_a_hugging_face_encoder_zero_shot(encoder_dir: Path) -> None:
    """An encoder directory (not a trained model) ranks by the cosine of mean-pooled vectors:
    the candidate equal to the query scores 1."""
    query = "how are glacier caves formed ?"
    candidates = ["the war ended in 1945 .", query, "a dog plays guitar"]
    result = runner.invoke(
        app, ["rank", str(encoder_dir), "-q", query, "--json"], input="\n".join(candidates) + "\n"
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[0]["index"] == 1 and rows[0]["score"] == pytest.approx(1.0, abs=1e-5)
    zero_shot = Matcher.from_encoder(str(encoder_dir)).score([(query, c) for c in candidates])
    assert {r["index"]: r["score"] for r in rows} == pytest.approx(dict(enumerate(zero_shot)))
    matcher = load_matcher(encoder_dir)
    assert matcher.model_type == "bi_encoder" and matcher.task.kind == "ranking"
    assert matcher.path is None  # nothing was loaded from an attnmatch model directory
    args = ["score", str(encoder_dir), "--format", "tsv"]
    result = runner.invoke(app, args, input=f"{query}\t{query}\n")
    assert result.exit_code == 0, result.output
    assert float(result.output) == pytest.approx(1.0, abs=1e-5)


def test_save_then_load_gives_identical_scores(model_dir: Path, tmp_path: Path) -> None:
    original = Matcher.load(model_dir)
    saved = original.save(tmp_path / "copy")
    assert sorted(p.name for p in saved.iterdir()) == [
        "README.md",
        "config.json",
        "metrics.json",
        "model.safetensors",
        "vocab.json",
    ]
    header = json.loads((saved / "config.json").read_text())
    assert set(header) == {"format", "attnmatch_version", "model_type", "config", "task", "inputs"}
    assert header["format"] == "attnmatch.model/2" and header["model_type"] == "mvlstm"
    # trained with a dev split: the score's Platt calibration on dev goes with the task
    assert header["task"]["kind"] == "ranking" and set(header["task"]) == {"kind", "calibration"}
    assert header["inputs"]["kind"] == "word_vectors" and header["inputs"]["vectors"] == "random"
    copy = Matcher.load(saved)
    assert copy.path == saved and copy.task == original.task
    assert copy.inputs.vocab == original.inputs.vocab
    assert copy.metrics == original.metrics  # metrics.json goes with the model
    pairs = [("what apple river ?", c) for c in ("the of apple river in", "castle", "river was")]
    np.testing.assert_array_equal(copy.score(pairs), original.score(pairs))


def test_fit_on_tuples_learns_a_toy_ranking() -> None:
    """fit on (question, answer, label, group) tuples: the task (ranking: 0/1 labels,
    groups of several answers) is inferred, and a few epochs put the answer about the
    question's topic first for every question (the untrained model does not)."""
    topics = ["apple", "river", "castle", "guitar", "tiger", "bridge"]
    answers = [f"this is about {t} here" for t in topics]
    data = [
        (f"what about {t} ?", a, int(a == answers[i]), f"q{i}")
        for i, t in enumerate(topics)
        for a in answers
    ]
    matcher = fit(
        data, model="mvlstm", inputs="random", epochs=5, lr=0.01, batch_size=4, num_negatives=2
    )
    assert isinstance(matcher, Matcher) and matcher.path is None  # trained in a temporary folder
    assert matcher.task.kind == "ranking" and matcher.model_type == "mvlstm"
    assert matcher.inputs.config.vectors == "random" and "apple" in matcher.inputs.vocab
    firsts = [matcher.rank(f"what about {t} ?", answers)[0].index for t in topics]
    assert firsts == list(range(len(topics)))
    untrained = Matcher.untrained(
        "mvlstm",
        inputs="random",
        task=Task(kind="ranking"),
        train_texts=[a for r in data for a in r[:2]],
        seed=1,
    )
    assert [untrained.rank(f"what about {t} ?", answers)[0].index for t in topics] != firsts


def test_save_never_replaces_a_folder_that_is_not_a_model(model_dir: Path, tmp_path: Path) -> None:
    matcher = Matcher.load(model_dir)
    notes = tmp_path / "mine"
    notes.mkdir()
    (notes / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(FileExistsError, match="is not an attnmatch model directory"):
        matcher.save(notes)
    assert (notes / "notes.txt").read_text(encoding="utf-8") == "keep me"
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError, match="file exists and is not"):
        matcher.save(tmp_path / "file")
    saved = matcher.save(tmp_path / "m")  # a new folder, then a model directory: replaced
    assert matcher.save(saved) == saved and Matcher.load(saved).model_type == "mvlstm"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert matcher.save(empty) == empty


def test_fit_and_untrained_leave_the_callers_random_generators_alone() -> None:
    import random

    def states() -> tuple:
        return random.getstate(), np.random.get_state()[1].tobytes(), torch.get_rng_state()

    random.seed(123)
    np.random.seed(123)
    torch.manual_seed(123)
    before = states()
    data = [("q one", "a b", 1), ("q one", "c d", 0), ("q two", "e f", 1), ("q two", "g h", 0)]
    fit(data, model="mvlstm", inputs="random", epochs=1, batch_size=2, num_negatives=1)
    Matcher.untrained("mvlstm", inputs="random", task=Task(kind="ranking"), train_texts=["a b"])
    after = states()
    assert before[0] == after[0] and before[1] == after[1] and torch.equal(before[2], after[2])


def test_fit_errors_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="names a dataset: its own dev split and task are used"):
        fit("wikiqa", [("a", "b", 1)])
    with pytest.raises(ValueError, match="names a dataset"):
        fit("wikiqa", task="classification")
    with pytest.raises(ValueError, match="train: row 0: the label is NaN"):
        fit([("a", "b", float("nan"))])
    with pytest.raises(ValueError, match="train: row 1: the label must be a number, got 'x'"):
        fit([("a", "b", 1), ("a", "c", "x")])


def test_fit_takes_numpy_labels() -> None:
    from attnmatch.training.api import as_examples

    rows = [("q", "a", np.int64(1)), ("q", "b", np.float32(0.5)), ("q", "c", np.bool_(True))]
    with pytest.raises(ValueError, match="row 2: the label must be a number"):
        as_examples(rows, "train")
    examples = as_examples(rows[:2], "train")
    assert [ex.label for ex in examples] == [1, 0.5] and type(examples[0].label) is int


def _tiny_matcher(num_outputs: int = 1, task: Task | None = None) -> Matcher:
    model = tiny_model("mvlstm", num_outputs=num_outputs)
    return Matcher(
        model=model.eval(),
        model_type="mvlstm",
        inputs=tiny_inputs(model),
        task=task or Task(kind="ranking"),
    )


def _write_format_1(path: Path, matcher: Matcher, task: str, label_space: dict) -> Path:
    """A model directory as attnmatch.model/1 wrote it: the tokenizer beside the model config,
    a "static" token encoder with an informational source, the task as a name."""
    path.mkdir()
    config = model_dir_format.config_dict(matcher.model)
    encoder = config["encoder"]
    config["encoder"] = {
        "kind": "static",
        "vocab_size": encoder["vocab_size"],
        "embedding_dim": encoder["embedding_dim"],
        "trainable": False,
        "dropout": 0.0,
        "source": "",
        "layer": -1,
        "max_length": 256,
        "transformer_config": {},
    }
    header = {
        "format": "attnmatch.model/1",
        "attnmatch_version": "0.0.1",
        "model_type": "mvlstm",
        "config": config,
        "task": task,
        "tokenizer": {"lowercase": True, "max_length": None},
        "label_space": label_space,
    }
    (path / "config.json").write_text(json.dumps(header), encoding="utf-8")
    (path / "vocab.json").write_text(matcher.inputs.vocab.to_json(), encoding="utf-8")
    safetensors.torch.save_model(matcher.model, str(path / "model.safetensors"))
    return path


PAIRS = [("w1 w2 w3", "w3 w4 w5 w6"), ("w7", "w8 w9 w1"), ("w2 unknownword", "w2")]


def test_a_format_1_directory_loads_and_scores_like_its_model(tmp_path: Path) -> None:
    original = _tiny_matcher()
    old = _write_format_1(tmp_path / "v1", original, "ranking", {})
    loaded = Matcher.load(old)
    assert loaded.model_type == "mvlstm" and loaded.task == Task(kind="ranking")
    assert loaded.inputs.config.kind == "word_vectors" and loaded.inputs.config.lowercase
    assert loaded.inputs.vocab == original.inputs.vocab
    assert loaded.model.config.encoder == original.model.config.encoder
    np.testing.assert_array_equal(loaded.score(PAIRS), original.score(PAIRS))
    # Saved again, it is a current-format directory that scores the same.
    again = Matcher.load(loaded.save(tmp_path / "v2"))
    assert json.loads((tmp_path / "v2" / "config.json").read_text())["format"] == (
        "attnmatch.model/2"
    )
    np.testing.assert_array_equal(again.score(PAIRS), original.score(PAIRS))
    # Format 1's label space becomes the task: class names.
    three = _tiny_matcher(3, Task(kind="classification", class_names=("a", "b", "c")))
    old3 = _write_format_1(
        tmp_path / "v1c", three, "classification", {"class_names": ["a", "b", "c"]}
    )
    loaded3 = Matcher.load(old3)
    assert loaded3.task.kind == "classification" and loaded3.task.class_names == ("a", "b", "c")
    assert loaded3.classify(PAIRS) == three.classify(PAIRS)
    # A `num_classes` key (accepted by format 1 readers before) is an unknown key now.
    header = json.loads((old / "config.json").read_text())
    (old / "config.json").write_text(json.dumps(header | {"num_classes": 2}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"unknown keys \['num_classes'\]"):
        Matcher.load(old)


def test_an_unknown_format_is_one_value_error_naming_it(tmp_path: Path) -> None:
    path = _tiny_matcher().save(tmp_path / "m")
    header = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(header | {"format": "attnmatch.model/9"}))
    with pytest.raises(ValueError) as info:
        Matcher.load(path)
    message = str(info.value)
    assert "\n" not in message
    assert "'attnmatch.model/9'" in message and str(path / "config.json") in message
    assert "re-train the model or load it with the attnmatch version that wrote it" in message
    with pytest.raises(ValueError, match="attnmatch.model/9"):
        load_matcher(path)  # the CLI's loader: an attnmatch directory, not an encoder


def test_an_unknown_format_is_refused_before_its_weights_are_read(tmp_path: Path) -> None:
    """A later format may store its weights differently: the format is checked first."""
    path = _tiny_matcher().save(tmp_path / "m")
    header = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(header | {"format": "attnmatch.model/9"}))
    (path / "model.safetensors").write_bytes(b"weights in a later layout")
    with pytest.raises(ValueError, match="attnmatch.model/9"):
        Matcher.load(path)


def test_a_damaged_weights_file_is_one_value_error_naming_it(tmp_path: Path) -> None:
    path = _tiny_matcher().save(tmp_path / "m")
    (path / "model.safetensors").write_bytes(b"\x00" * 5)
    with pytest.raises(ValueError, match="model.safetensors: not a readable safetensors file"):
        Matcher.load(path)


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
    from attnmatch.research.reproduce import reproduce

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
    from attnmatch.cli.console import print_metrics

    print_metrics(
        {
            "dev": {"pearson": 0.7, "pearson/2012/MSRpar": 0.5},
            "test": {"pearson": 0.6, "pearson/2015/belief": 0.4},
        },
        title="t",
    )
    text = capsys.readouterr().out
    assert "0.7000" in text and "0.4000" in text and "—" in text


def test_fit_ranks_a_positive_only_dev_against_all_its_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Questions with their answers only: dev ranks each question among every dev answer
    (3 questions x 3 answers), not against its one answer (a MAP of 1 whatever the model)."""
    import attnmatch.training.api as api

    seen = {}
    original = api.experiment_from_splits

    def spy(config, train, dev, test, **kwargs):  # type: ignore[no-untyped-def]
        seen["dev"] = dev
        return original(config, train, dev, test, **kwargs)

    monkeypatch.setattr(api, "experiment_from_splits", spy)
    answers = ["reset it from the sign in page", "the app works offline", "pro costs 8 dollars"]
    train = [
        (f"{q} {i}", a, 1)
        for i in range(3)
        for q, a in zip(["pw", "app", "price"], answers, strict=True)
    ]
    dev = [("pw question", answers[0], 1), ("app question", answers[1], 1), ("cost", answers[2], 1)]
    matcher = fit(
        train,
        dev,
        model="mvlstm",
        inputs="random",
        epochs=1,
        batch_size=2,
        num_negatives=1,
        output_dir=tmp_path / "run",
        floors="none",
    )
    assert matcher.task.kind == "ranking"
    examples = seen["dev"].examples
    assert len(examples) == 9 and sum(ex.label for ex in examples) == 3
    assert {(ex.left, ex.right) for ex in examples} == {(q, a) for q, _, _ in dev for a in answers}
