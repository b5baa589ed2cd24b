"""Trainer: end to end on a tiny fixture dataset, resume equivalence, seeds, errors."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import safetensors.torch
import torch

from attnmatch.configs import ConfigError
from attnmatch.inputs import TransformerInputsConfig, TrigramInputsConfig, WordVectorsConfig
from attnmatch.matcher import Matcher
from attnmatch.tasks import RegressionTask
from attnmatch.training import ExperimentConfig, train, train_seeds
from attnmatch.training.config import load_experiment

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"


def tiny_experiment(**train_overrides: object) -> ExperimentConfig:
    """A tiny MV-LSTM on pairs_tiny. Its answers share the questions' keywords, so word
    overlap scores dev MAP 1.0: the trained model is kept in RUN/model (train.keep =
    "trained") unless a test asks for the best (`attnmatch.training.keep`)."""
    return ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 8, "k": 10},
            "data": {"dataset": "pairs", "data_dir": str(FIXTURE)},
            "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 8},
            "train": {
                "epochs": 3,
                "batch_size": 4,
                "num_negatives": 2,
                "lr": 0.01,
                "patience": 0,
                "keep": "trained",
                **train_overrides,
            },
        }
    )


def test_train_end_to_end(tmp_path: Path) -> None:
    result = train(tiny_experiment(epochs=8), tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "model" / "model.safetensors").is_file()
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in log] == list(range(1, 9))
    best = max(log, key=lambda row: row["dev"]["map"])
    assert result.best_epoch == best["epoch"]
    assert result.dev["map"] == pytest.approx(best["dev"]["map"])
    assert result.test is not None and result.test["num_queries"] == 8
    # The fixture's answers share the question's keywords: a working model learns it.
    assert result.dev["map"] > 0.7
    loaded = Matcher.load(result.model_dir)
    assert loaded.metrics["best_epoch"] == result.best_epoch
    assert loaded.metrics["test"]["map"] == pytest.approx(result.test["map"])


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(path / "model.safetensors"))


def test_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    full = train(tiny_experiment(epochs=4), tmp_path / "full", progress=False)
    train(tiny_experiment(epochs=2), tmp_path / "part", progress=False)
    resumed = train(tiny_experiment(epochs=4), tmp_path / "part", resume=True, progress=False)
    assert [h["dev"] for h in resumed.history] == [h["dev"] for h in full.history]
    a = _weights(tmp_path / "full" / "checkpoint" / "model")
    b = _weights(tmp_path / "part" / "checkpoint" / "model")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=0, rtol=0)


def test_refuses_to_overwrite_and_checks_resume_config(tmp_path: Path) -> None:
    train(tiny_experiment(epochs=1), tmp_path / "run", progress=False)
    with pytest.raises(FileExistsError, match="not empty"):
        train(tiny_experiment(epochs=1), tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match="train.lr"):
        train(tiny_experiment(epochs=2, lr=0.5), tmp_path / "run", resume=True, progress=False)


def test_seeds_summary(tmp_path: Path) -> None:
    summary = train_seeds(tiny_experiment(epochs=1), tmp_path, [1, 2], progress=False)
    runs = summary["test"]["map"]["runs"]
    assert len(runs) == 2
    assert summary["test"]["map"]["mean"] == pytest.approx(sum(runs) / 2)
    assert (tmp_path / "seed-1" / "model").is_dir() and (tmp_path / "summary.json").is_file()


def test_same_seed_same_result(tmp_path: Path) -> None:
    """Same seed: the same run to the last digit (benchmarks/compare_runs.py checks metrics,
    the epoch log and every weight bit); another seed is told apart."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "compare_runs", Path(__file__).parents[2] / "benchmarks" / "compare_runs.py"
    )
    assert spec is not None and spec.loader is not None
    compare_runs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare_runs)

    a = train(tiny_experiment(epochs=2), tmp_path / "a", progress=False)
    b = train(tiny_experiment(epochs=2), tmp_path / "b", progress=False)
    assert a.dev == b.dev and a.test == b.test
    assert all(same for _, same, _ in compare_runs.compare(a.output_dir, b.output_dir))
    c = train(tiny_experiment(epochs=2, seed=7), tmp_path / "c", progress=False)
    differs = {
        name for name, same, _ in compare_runs.compare(a.output_dir, c.output_dir) if not same
    }
    assert "weights bit-equal" in differs and "epoch log (loss, dev)" in differs


def test_toml_config_errors_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "exp.toml"
    path.write_text('model = "amvlstm_q"\n[train]\nepoch = 3\n')
    with pytest.raises(ConfigError, match=r"exp.toml.*train\.epoch.*valid keys"):
        load_experiment(path)
    path.write_text('[train]\nlr = "fast"\n')
    with pytest.raises(ConfigError, match=r"train\.lr: expected a number"):
        load_experiment(path)
    path.write_text('[inputs]\noov = "mean"\n')
    with pytest.raises(ConfigError, match=r"inputs\.oov"):
        load_experiment(path)
    path.write_text('[inputs]\nkind = "transformer"\nvectors = "glove-6b-50d"\n')
    with pytest.raises(ConfigError, match=r"inputs\.vectors"):
        load_experiment(path)
    path.write_text('[embeddings]\nsource = "random"\n')  # the section of earlier configs
    with pytest.raises(ConfigError, match=r"\[embeddings\] is now \[inputs\]"):
        load_experiment(path)


def test_staircase_learning_rate_decay() -> None:
    from attnmatch.training.config import TrainConfig
    from attnmatch.training.optim import learning_rate

    t = TrainConfig(lr=0.1, lr_decay=0.96, lr_decay_steps=10)
    assert learning_rate(t, 0) == learning_rate(t, 9) == 0.1
    assert learning_rate(t, 10) == pytest.approx(0.096)
    assert learning_rate(t, 25) == pytest.approx(0.1 * 0.96**2)
    assert learning_rate(TrainConfig(lr=0.1), 10**6) == 0.1
    with pytest.raises(ValueError, match="lr_decay"):
        TrainConfig(lr_decay=1.5)


def test_trainer_adds_the_models_auxiliary_terms(tmp_path: Path) -> None:
    """IARNN-Occam's regulariser reaches the optimised loss: with a huge floor lambda_q the
    logged training loss is dominated by it; with lambda_q = 0 and w_qp . r_q <= 0 it is not."""

    def run(occam_lambda: float, name: str) -> float:
        exp = ExperimentConfig.from_dict(
            tiny_experiment(epochs=1).to_dict()
            | {
                "model": "iarnn_occam_word",
                "model_overrides": {"hidden_size": 6, "occam_lambda": occam_lambda},
            }
        )
        train(exp, tmp_path / name, progress=False)
        log = (tmp_path / name / "log.jsonl").read_text().splitlines()
        return json.loads(log[0])["train_loss"]

    # alpha_t ~ 0.5 on ~5-token answers: the term is ~ lambda * 2.5 per pair.
    assert run(100.0, "big") > 50.0
    assert run(0.0, "small") < 5.0


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_fused_adam_matches_the_default_update(name: str) -> None:
    from attnmatch.training.optim import fused_adam_supported, make_optimizer

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    reference = copy.deepcopy(model)
    exp = ExperimentConfig.from_dict(
        {"train": {"optimizer": name, "lr": 0.01, "weight_decay": 0.1}}
    )
    fused = make_optimizer(model, exp.train)
    assert fused.defaults["fused"]
    plain_cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    plain = plain_cls(reference.parameters(), lr=0.01, weight_decay=0.1, fused=False)
    x = torch.randn(16, 7)
    for _ in range(5):
        for net, opt in ((model, fused), (reference, plain)):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert not fused_adam_supported([torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))])


def test_resume_accepts_a_config_saved_before_a_field_existed() -> None:
    from attnmatch.training.run_dir import check_resumable as _check_resumable

    current = ExperimentConfig.from_dict({"model": "mvlstm", "train": {"epochs": 5}}).to_dict()
    saved = copy.deepcopy(current)
    del saved["train"]["lr_decay"]  # a field added later, at its default in `current`
    _check_resumable(saved, current)
    changed = copy.deepcopy(current)
    changed["train"]["lr_decay"] = 0.5
    with pytest.raises(ValueError, match="train.lr_decay"):
        _check_resumable(saved, changed)
    with pytest.raises(ValueError, match="train.lr"):
        _check_resumable({**saved, "train": {**saved["train"], "lr": 0.5}}, current)


def test_trigram_models_train_on_their_own_inputs_by_default(tmp_path: Path) -> None:
    """`--model dssm` with no [inputs]: DSSM's own letter-trigram inputs, end to end."""
    base = tiny_experiment(epochs=2).to_dict()
    exp = ExperimentConfig.from_dict(
        base
        | {"model": "cdssm", "model_overrides": {"filters": 4, "output_size": 5}, "inputs": None}
    )
    with pytest.raises(ConfigError, match="window \\* filters = 12"):
        train(exp, tmp_path / "bad", progress=False)  # CDSSM's default dim is 3 x 300
    exp = exp.with_overrides({"inputs": {"kind": "trigrams", "buckets": 101, "dim": 12}})
    result = train(exp, tmp_path / "run", progress=False)
    matcher = Matcher.load(result.model_dir)
    assert matcher.model.token_encoder.table.shape == (101, 12)
    assert matcher.inputs.encode(["hello world"])[0].shape[0] == 2  # (words, trigrams)
    dssm = ExperimentConfig.from_dict(
        base | {"model": "dssm", "model_overrides": {}, "inputs": None}
    )
    assert dssm.resolved_inputs().kind == "trigrams"


def test_a_smaller_is_better_primary_metric_selects_the_minimum(tmp_path: Path) -> None:
    from attnmatch.training.experiment import EvalSplit
    from attnmatch.training.loop import select
    from attnmatch.training.run_dir import RunDir, TrainState

    @dataclasses.dataclass
    class FakeMatcher:  # dev outputs of a regression model, its task calibrates nothing
        task: RegressionTask = RegressionTask(min_score=0, max_score=5)

        def predict(self, data: object) -> np.ndarray:
            return np.zeros((2, 1), dtype=np.float32)

    class FakeExperiment:
        def __init__(self) -> None:
            dev = SimpleNamespace(labels=np.array([1.0, 4.0]))
            self.dev = EvalSplit(data=dev, protocol=None)  # type: ignore[arg-type]
            self.matcher = FakeMatcher()
            self.config = ExperimentConfig()

    state, saved = TrainState(), []
    run = RunDir(tmp_path)
    run.save_best = lambda matcher, dev: saved.append(dev["mse"])  # type: ignore[method-assign]
    import attnmatch.training.loop as loop

    scores = iter([0.9, 0.5, 0.7, 0.4])

    class Report:
        primary = "mse"

        def __init__(self) -> None:
            self.metrics = {"mse": next(scores)}

    original = loop.report_from_outputs
    loop.report_from_outputs = lambda outputs, data, protocol, task: Report()  # type: ignore[assignment]
    try:
        for epoch in range(1, 5):
            select(FakeExperiment(), state, epoch, run)  # type: ignore[arg-type]
    finally:
        loop.report_from_outputs = original
    assert saved == [0.9, 0.5, 0.4] and state.best_epoch == 4 and state.best_score == 0.4


def test_inputs_without_a_kind_change_the_models_own_inputs() -> None:
    dssm = ExperimentConfig.from_dict({"model": "dssm", "inputs": {"dropout": 0.1}})
    assert dssm.resolved_inputs() == TrigramInputsConfig(dim=300, dropout=0.1)
    bi = ExperimentConfig.from_dict({"model": "minilm_bi_encoder", "inputs": {"max_length": 128}})
    assert bi.resolved_inputs() == TransformerInputsConfig(
        source="minilm-l6", trainable=True, max_length=128
    )


def test_with_inputs_reads_a_name_on_top_of_the_current_inputs() -> None:
    cdssm = ExperimentConfig.from_dict({"model": "cdssm"})
    assert cdssm.with_inputs("trigrams").resolved_inputs() == TrigramInputsConfig(dim=900)
    mine = ExperimentConfig.from_dict(
        {"model": "mvlstm", "inputs": {"kind": "word_vectors", "normalize": False}}
    )
    other = mine.with_inputs("vectors.txt")
    assert other.resolved_inputs() == WordVectorsConfig(vectors="vectors.txt", normalize=False)
    assert mine.with_inputs("trigrams").resolved_inputs() == TrigramInputsConfig()
    assert mine.with_inputs(None) is mine
    # --fine-tune / --no-fine-tune: both ways, whatever the preset says.
    tuned = ExperimentConfig.from_dict({"model": "minilm_bi_encoder"})
    assert tuned.resolved_inputs().trainable
    assert not tuned.with_inputs(None, trainable=False).resolved_inputs().trainable
    assert mine.with_inputs(None, trainable=True).resolved_inputs() == WordVectorsConfig(
        normalize=False, trainable=True
    )


def test_set_inputs_on_a_toml_config_merges_with_its_inputs(tmp_path: Path) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(
        'model = "mvlstm"\n[inputs]\nkind = "word_vectors"\nnormalize = false\nmin_freq = 3\n',
        encoding="utf-8",
    )
    exp = load_experiment(path, {"inputs": {"dropout": 0.2}})
    assert exp.resolved_inputs() == WordVectorsConfig(normalize=False, min_freq=3, dropout=0.2)
    exp = load_experiment(path, {"inputs": {"kind": "trigrams"}})  # another kind: its defaults
    assert exp.resolved_inputs() == TrigramInputsConfig()


def test_a_run_made_before_inputs_existed_is_refused_in_one_line() -> None:
    from attnmatch.training.run_dir import check_resumable

    current = tiny_experiment().to_dict()
    saved = {k: v for k, v in current.items() if k != "inputs"}
    saved["embeddings"] = {"source": "glove-6b-50d", "dim": 50}
    with pytest.raises(ValueError, match="earlier attnmatch .*train it again in a new folder"):
        check_resumable(saved, current)


def test_a_run_says_what_it_selects_keeps_and_leaves_out(tmp_path: Path) -> None:
    from rich.console import Console

    console = Console(record=True, width=400)
    # A learning rate too small to learn: word overlap beats the model on dev.
    config = tiny_experiment(epochs=2, lr=1e-9, floors="lexical")
    train(config, tmp_path / "run", progress=False, console=console)
    text = console.export_text()
    assert "selection: the epoch with the best dev map (the primary metric of the dev" in text
    assert "; a Platt scaling of its scores into probabilities is fitted on dev" in text
    assert "model: epoch " in text and "of 2, the best dev map" in text
    assert 'the MiniLM zero-shot floor is off (train.floors = "lexical")' in text
    assert "does not beat the" in text
    assert "kept: the trained model in " in text and '(train.keep = "trained"), though the' in text


def test_without_dev_no_dev_schedule_is_announced_and_the_last_epoch_is_kept(
    tmp_path: Path,
) -> None:
    from rich.console import Console

    from attnmatch.data.datasets import load_split
    from attnmatch.training.experiment import experiment_from_splits

    console = Console(record=True, width=400)
    config = tiny_experiment(epochs=None, floors="none")
    train_split = load_split("pairs", "train", data_dir=str(FIXTURE))
    exp = experiment_from_splits(config, train_split, None, None)
    train(config, tmp_path / "run", progress=False, console=console, experiment=exp)
    text = console.export_text()
    assert "dev evaluated every" not in text
    assert "selection: no dev split: the model of the last epoch is kept" in text
    assert "model: the last epoch's (" in text
