"""`attnmatch tune`: the space, a tiny search end to end, pruning, resume, and that the test
split is never read."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("optuna")
import optuna  # noqa: E402

from attnmatch import cli  # noqa: E402
from attnmatch.atomic import file_lock
from attnmatch.configs import ConfigError  # noqa: E402
from attnmatch.research.tune import (  # noqa: E402
    STUDY_FILE,
    STUDY_NAME,
    _storage,
    apply_params,
    check_space,
    load_tune_config,
    parse_space,
    tune,
)
from attnmatch.training import ExperimentConfig, train  # noqa: E402
from attnmatch.training.config import load_experiment  # noqa: E402
from attnmatch.training.run_dir import RunFolderInUse  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "pairs_tiny"

EXPERIMENT = """
model = "mvlstm"
[model_overrides]
hidden_size = 8
k = 10
[data]
dataset = "pairs"
data_dir = "{data_dir}"
[inputs]
kind = "word_vectors"
vectors = "random"
dim = 8
[train]
epochs = 2
batch_size = 4
num_negatives = 2
patience = 0
"""

SPACE = """
[tune]
seed = 3
startup_trials = 1
warmup_epochs = 0
[tune.params]
train.lr = { type = "float", low = 1e-3, high = 3e-2, log = true }
"model_overrides.k" = { type = "int", low = 4, high = 12, step = 4 }
"train.batch_size" = { type = "categorical", choices = [4, 8] }
"""


def tiny_data(tmp_path: Path, *, test_readable: bool = True) -> Path:
    """A copy of the tiny fixture; its test file unparseable unless `test_readable`."""
    folder = tmp_path / "data"
    shutil.copytree(FIXTURE, folder)
    if not test_readable:  # reading it would fail: a search that runs never read it
        (folder / "test.tsv").write_bytes(b"\xff\xfe not a pairs file\n")
    return folder


def write_config(tmp_path: Path, data_dir: Path, space: str = SPACE) -> Path:
    path = tmp_path / "search.toml"
    path.write_text(EXPERIMENT.format(data_dir=data_dir) + space, encoding="utf-8")
    return path


def base_config(tmp_path: Path) -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 8, "k": 10},
            "data": {"dataset": "pairs", "data_dir": str(FIXTURE)},
        }
    )


# ---- the space --------------------------------------------------------------------------------


def test_space_accepts_dotted_and_quoted_keys() -> None:
    spec = parse_space(
        {
            "seed": 7,
            "params": {
                "train": {"lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
                "model_overrides.dropout": {"type": "float", "low": 0.0, "high": 0.5},
                "train.batch_size": {"type": "categorical", "choices": [16, 32]},
                "model_overrides.hidden_size": {"type": "int", "low": 8, "high": 32, "step": 8},
            },
        }
    )
    assert spec.seed == 7 and spec.pruner == "median"
    by_key = {p.key: p for p in spec.params}
    assert set(by_key) == {
        "train.lr",
        "model_overrides.dropout",
        "train.batch_size",
        "model_overrides.hidden_size",
    }
    assert by_key["train.lr"].log and by_key["train.lr"].kind == "float"
    assert by_key["train.batch_size"].choices == (16, 32)
    assert by_key["model_overrides.hidden_size"].step == 8


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({}, "tune.params: no parameters"),
        ({"params": {"train.lr": {"low": 1, "high": 2}}}, "tune.params.train.lr.type"),
        (
            {"params": {"train.lr": {"type": "float", "low": 1, "high": 2, "lg": True}}},
            r"tune.params.train.lr: unknown field\(s\) lg",
        ),
        (
            {"params": {"train.lr": {"type": "float", "low": 0.1, "high": 0.01}}},
            r"tune.params.train.lr: low \(0.1\) must be below high",
        ),
        (
            {"params": {"train.lr": {"type": "float", "low": 0, "high": 1, "log": True}}},
            "tune.params.train.lr: log = true needs low > 0",
        ),
        (
            {
                "params": {
                    "train.lr": {"type": "float", "low": 1, "high": 2, "log": True, "step": 1}
                }
            },
            "tune.params.train.lr: log and step exclude each other",
        ),
        (
            {"params": {"train.epochs": {"type": "int", "low": 1.5, "high": 3}}},
            "tune.params.train.epochs.low: expected an integer",
        ),
        (
            {"params": {"train.lr": {"type": "float", "high": 2}}},
            "tune.params.train.lr: no low",
        ),
        (
            {"params": {"train.loss": {"type": "categorical", "choices": []}}},
            "tune.params.train.loss.choices: give a non-empty list",
        ),
        ({"params": {"train.lr": 0.01}}, "tune.params.train.lr: expected a table"),
        (
            {"sed": 1, "params": {"train.lr": {"type": "float", "low": 1, "high": 2}}},
            r"unknown key\(s\) tune.sed",
        ),
        (
            {"pruner": "hyperband", "params": {"train.lr": {"type": "float", "low": 1, "high": 2}}},
            "tune.pruner: 'hyperband' is not one of",
        ),
    ],
)
def test_space_errors_name_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_space(table)


@pytest.mark.parametrize(
    ("key", "spec", "message"),
    [
        ("train.lrr", {"type": "float", "low": 1e-3, "high": 1e-2}, "not a key of the experiment"),
        ("model_overrides.hiden", {"type": "int", "low": 1, "high": 4}, "has no setting 'hiden'"),
        ("data.dev_split", {"type": "categorical", "choices": ["dev"]}, "'data' is not searched"),
        ("train.batch_size", {"type": "int", "low": 0, "high": 4}, "the value 0 does not fit"),
        ("train.loss", {"type": "categorical", "choices": ["hinge"]}, "'hinge' is not one of"),
        ("learning_rate", {"type": "float", "low": 1e-3, "high": 1e-2}, "is not searched"),
    ],
)
def test_space_keys_are_checked_against_the_experiment(
    tmp_path: Path, key: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=f"tune.params.{key}") as info:
        check_space(base_config(tmp_path), parse_space({"params": {key: spec}}))
    assert info.match(message)


def test_apply_params_sets_dotted_keys(tmp_path: Path) -> None:
    config = apply_params(
        base_config(tmp_path),
        {"train.lr": 0.02, "model_overrides.k": 4, "inputs.dropout": 0.1},
    )
    assert config.train.lr == 0.02 and config.model_overrides == {"hidden_size": 8, "k": 4}
    assert config.inputs is not None and config.inputs.dropout == 0.1


def test_load_tune_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "plain.toml"
    path.write_text(EXPERIMENT.format(data_dir=FIXTURE), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"plain.toml: no \[tune\] table"):
        load_tune_config(path)
    bad = write_config(tmp_path, FIXTURE, SPACE.replace("train.lr =", "train.lrr ="))
    with pytest.raises(ConfigError, match=r"search.toml: tune.params.train.lrr"):
        load_tune_config(bad)
    with pytest.raises(ConfigError, match=r"\[tune\] is the search space of `attnmatch tune`"):
        load_experiment(write_config(tmp_path, FIXTURE))  # `train` points at best.toml


# ---- the search -------------------------------------------------------------------------------


def test_search_writes_best_toml_that_train_accepts_and_never_reads_test(tmp_path: Path) -> None:
    data = tiny_data(tmp_path, test_readable=False)
    config, spec = load_tune_config(write_config(tmp_path, data))
    with pytest.raises(ValueError, match="test.tsv"):  # the file would break a loader
        train(config, tmp_path / "plain-run", progress=False)
    result = tune(config, spec, tmp_path / "search", trials=3, threads=1)
    out = tmp_path / "search"
    assert {"study.db", "tune.json", "best.toml", "history.png", "trial-000"} <= {
        p.name for p in out.iterdir()
    }
    summary = json.loads((out / "tune.json").read_text())
    assert summary["metric"] == "map" and summary["direction"] == "maximize"
    if summary["counts"]["complete"] >= 2:
        assert set(summary["importances"]) == {"train.lr", "model_overrides.k", "train.batch_size"}
    assert len(summary["trials"]) == 3
    complete = [t for t in summary["trials"] if t["state"] == "complete"]
    assert complete and result.best is not None
    assert summary["best"]["value"] == max(t["value"] for t in complete)
    for trial in summary["trials"]:  # every trial trained in its folder, without test
        run = json.loads((out / trial["folder"] / "log.jsonl").read_text().splitlines()[0])
        assert run["epoch"] == 1
        if trial["state"] == "complete":
            saved = json.loads((out / trial["folder"] / "result.json").read_text())
            assert saved["test"] is None and saved["dev"]["map"] == trial["value"]
            assert saved["metrics"]["experiment"]["data"]["test_split"] is None
    # best.toml: the experiment with the best parameters, test split as configured.
    best = load_experiment(out / "best.toml", {"data": {"data_dir": str(FIXTURE)}})
    params = summary["best"]["params"]
    assert summary["best"]["overrides"] == {  # what a reproduce table's row takes
        "train": {"lr": params["train.lr"], "batch_size": params["train.batch_size"]},
        "model_overrides": {"k": params["model_overrides.k"]},
    }
    assert (
        best.train.lr == params["train.lr"]
        and best.model_overrides["k"] == params["model_overrides.k"]
    )
    assert best.train.batch_size == params["train.batch_size"]
    assert best.data.test_split == "test" and best.train.floors == config.train.floors
    trained = train(best, tmp_path / "best-run", progress=False)
    assert trained.test is not None and trained.dev is not None


def test_pruning_stops_a_trial_after_the_reported_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[int, int | None]] = []

    def prune(self: Any, study: Any, trial: Any) -> bool:
        calls.append((trial.number, trial.last_step))
        return trial.number >= 1  # every trial after the first, at its first report

    monkeypatch.setattr(optuna.pruners.MedianPruner, "prune", prune)
    config, spec = load_tune_config(write_config(tmp_path, FIXTURE))
    tune(config, spec, tmp_path / "search", trials=3, threads=1)
    summary = json.loads((tmp_path / "search" / "tune.json").read_text())
    states = [t["state"] for t in summary["trials"]]
    assert states == ["complete", "pruned", "pruned"]
    assert calls == [(0, 1), (0, 2), (1, 1), (2, 1)]
    for trial in summary["trials"][1:]:
        assert list(trial["dev_curve"]) == ["1"]
        log = (tmp_path / "search" / trial["folder"] / "log.jsonl").read_text().splitlines()
        assert len(log) == 1  # training stopped after epoch 1 of 2
    assert len(summary["trials"][0]["dev_curve"]) == 2


def test_resume_continues_the_study_to_n_trials(tmp_path: Path) -> None:
    config, spec = load_tune_config(write_config(tmp_path, FIXTURE))
    out = tmp_path / "search"
    tune(config, spec, out, trials=2, threads=1)
    with pytest.raises(FileExistsError, match="--resume"):
        tune(config, spec, out, trials=3, threads=1)
    other = apply_params(config, {"train.epochs": 3})
    with pytest.raises(ValueError, match="experiment changed"):
        tune(other, spec, out, trials=3, threads=1, resume=True)
    # A search killed during a trial leaves it running: resume retries its parameters.
    study = optuna.load_study(study_name=STUDY_NAME, storage=_storage(out))
    killed = study.ask()
    killed_params = {p.key: p.suggest(killed) for p in spec.params}
    result = tune(config, spec, out, trials=3, threads=1, resume=True)
    summary = json.loads((out / "tune.json").read_text())
    states = [t["state"] for t in summary["trials"]]
    assert len(states) == 4 and states[2] == "fail"  # 2 + the killed one + its retry
    assert summary["trials"][2]["interrupted"] is True
    retry = summary["trials"][3]
    assert retry["retry_of"] == 2 and retry["params"] == killed_params
    assert retry["state"] in ("complete", "pruned")
    assert len(result.trials) == 4
    tune(config, spec, out, trials=3, threads=1, resume=True)  # done: no new trial
    assert len(json.loads((out / "tune.json").read_text())["trials"]) == 4


def test_one_search_at_a_time_holds_the_folder(tmp_path: Path) -> None:
    config, spec = load_tune_config(write_config(tmp_path, FIXTURE))
    out = tmp_path / "search"
    out.mkdir()
    with file_lock(out / ".lock") as held:
        assert held
        with pytest.raises(RunFolderInUse, match="in use by another attnmatch tune"):
            tune(config, spec, out, trials=1, threads=1)
    assert not (out / STUDY_FILE).exists()


def test_a_failing_trial_is_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    space = SPACE.replace(
        '"train.batch_size" = { type = "categorical", choices = [4, 8] }',
        '"train.loss" = { type = "categorical", choices = ["rank_hinge", "kl"] }',
    ).replace("seed = 3", "seed = 5")
    config, spec = load_tune_config(write_config(tmp_path, FIXTURE, space))
    result = tune(config, spec, tmp_path / "search", trials=4, threads=1)
    failed = [t for t in result.trials if t["state"] == "fail"]
    assert failed and all(t["params"]["train.loss"] == "kl" for t in failed)
    assert all("kl" in t["error"] for t in failed)
    assert any(t["state"] == "complete" for t in result.trials)


def test_select_metric_is_the_objective_and_is_checked_first(tmp_path: Path) -> None:
    config, spec = load_tune_config(write_config(tmp_path, FIXTURE))
    bad = apply_params(config, {"train.select_metric": "accuracy"})
    with pytest.raises(ConfigError, match="train.select_metric = 'accuracy'"):
        tune(bad, spec, tmp_path / "bad", trials=1, threads=1)
    chosen = apply_params(config, {"train.select_metric": "mrr"})
    result = tune(chosen, spec, tmp_path / "mrr", trials=1, threads=1)
    assert result.metric == "mrr" and result.best is not None
    saved = json.loads((tmp_path / "mrr" / "trial-000" / "result.json").read_text())
    assert result.best["value"] == saved["dev"]["mrr"] and saved["floors"] is None


def test_one_complete_trial_skips_the_importances_plot(tmp_path: Path) -> None:
    config, spec = load_tune_config(write_config(tmp_path, FIXTURE))
    result = tune(config, spec, tmp_path / "search", trials=1, threads=1)
    assert [p.name for p in result.plots] == ["history.png"]
    assert any("importances.png not drawn" in n for n in result.notes)


@pytest.mark.slow  # two process starts (torch imported twice): ~15 s on 2 busy cores
def test_two_processes_share_the_study(tmp_path: Path) -> None:
    config, spec = load_tune_config(write_config(tmp_path, FIXTURE))
    result = tune(config, spec, tmp_path / "search", trials=3, jobs=2, threads=1)
    assert len(result.trials) == 3
    assert {t["number"] for t in result.trials} == {0, 1, 2}
    assert (tmp_path / "search" / STUDY_FILE).is_file()


def test_cli_error_names_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write_config(tmp_path, FIXTURE, SPACE.replace("high = 3e-2", "high = 1e-4"))
    monkeypatch.setattr(
        sys, "argv", ["attnmatch", "tune", str(bad), "--trials", "2", "-o", str(tmp_path / "s")]
    )
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    message = " ".join(capsys.readouterr().err.split())
    assert message.startswith("error:") and "tune.params.train.lr: low" in message
    assert not (tmp_path / "s").exists()
