"""Training, saving and serving with a transformer token encoder (a tiny random BERT on disk)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmatch import Matcher
from attnmatch.configs import ConfigError
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.model_dir import load_model
from attnmatch.models.build import transformer_encoder_of
from attnmatch.reproduce import load_table, reproduce
from attnmatch.training import ExperimentConfig, prepare, train
from tests.tiny_transformer import write_tiny_encoder
from tests.training.test_trainer import tiny_experiment

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"
STS_FIXTURE = Path(__file__).parents[1] / "fixtures" / "pairs_sts_tiny"


def _fixture_words(folder: Path) -> tuple[str, ...]:
    words: set[str] = set()
    for split in ("train", "dev", "test"):
        with (folder / f"{split}.tsv").open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                words.update(row["left"].lower().split() + row["right"].lower().split())
    return tuple(sorted(words))


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    words = _fixture_words(FIXTURE) + _fixture_words(STS_FIXTURE)
    return write_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny-bert", extra_words=words)


def experiment(encoder: Path, *, model: str = "mvlstm", trainable: bool = False, **train_over):
    """The trainer tests' tiny experiment, reading `encoder` (MV-LSTM keeps its tiny sizes)."""
    data = tiny_experiment(**train_over).to_dict()
    if model != "mvlstm":
        data.update(model=model, model_overrides={})
    data["model_overrides"]["encoder"] = {
        "kind": "transformer",
        "source": str(encoder),
        "trainable": trainable,
    }
    return ExperimentConfig.from_dict(data)


def test_prepare_uses_the_encoders_tokenizer_and_weights(encoder_dir: Path) -> None:
    p = prepare(experiment(encoder_dir))
    assert isinstance(p.tokenizer, SubwordTokenizer) and p.vocab is None
    contextual = transformer_encoder_of(p.model)
    assert contextual is not None and not contextual.config.trainable
    assert contextual.config.transformer_config["hidden_size"] == 8
    # Ids are the tokenizer's, with [CLS] ... [SEP]; the weights are the directory's.
    cls, sep = p.tokenizer.token_id("[CLS]"), p.tokenizer.token_id("[SEP]")
    assert all(t[0] == cls and t[-1] == sep for t in p.train.texts)
    from safetensors.torch import load_file

    saved = load_file(str(encoder_dir / "model.safetensors"))
    torch.testing.assert_close(
        contextual.transformer.embeddings.word_embeddings.weight,
        saved["bert.embeddings.word_embeddings.weight"],
    )
    assert p.embedding_stats["kind"] == "transformer"
    assert p.embedding_stats["ignored_weights"]  # the checkpoint's pooler


def test_train_frozen_encoder_round_trips_and_serves(encoder_dir: Path, tmp_path: Path) -> None:
    result = train(experiment(encoder_dir), tmp_path / "run", progress=False)
    model_dir = result.model_dir
    assert (model_dir / "tokenizer.json").is_file() and not (model_dir / "vocab.json").exists()
    header = json.loads((model_dir / "config.json").read_text())
    assert header["tokenizer"] == {"kind": "subword", "max_length": 256}
    assert header["config"]["encoder"]["transformer_config"]["model_type"] == "bert"
    # The directory is self-contained: delete the encoder's source and it still loads.
    loaded = load_model(model_dir)
    assert loaded.vocab is None and isinstance(loaded.tokenizer, SubwordTokenizer)
    matcher = Matcher(loaded)
    pairs = [("what bridge window ?", "window for by is with bridge"), ("a", "b c")]
    first = matcher.score(pairs)
    again = Matcher(load_model(model_dir)).score(pairs)
    np.testing.assert_allclose(first, again, rtol=0, atol=1e-6)
    ranked = matcher.rank("what bridge window ?", ["apple music", "window bridge"])
    assert {r.index for r in ranked} == {0, 1}
    # A frozen encoder is not trained: its weights are the source's.
    from safetensors.torch import load_file

    weights = load_file(str(model_dir / "model.safetensors"))
    saved = load_file(str(encoder_dir / "model.safetensors"))
    torch.testing.assert_close(
        weights["token_encoder.transformer.encoder.layer.0.output.dense.weight"],
        saved["bert.encoder.layer.0.output.dense.weight"],
    )


def test_fine_tuned_encoder_changes_and_resume_matches(encoder_dir: Path, tmp_path: Path) -> None:
    exp = experiment(encoder_dir, model="minilm_bi_encoder", trainable=True, lr=1e-3)
    full = train(exp, tmp_path / "full", progress=False)
    from safetensors.torch import load_file

    tuned = load_file(str(full.model_dir / "model.safetensors"))
    saved = load_file(str(encoder_dir / "model.safetensors"))
    key = "encoder.layer.0.output.dense.weight"
    assert not torch.equal(tuned[f"token_encoder.transformer.{key}"], saved[f"bert.{key}"])
    # Interrupted after 2 epochs, then resumed: the same run.
    train(exp.with_overrides({"train": {"epochs": 2}}), tmp_path / "part", progress=False)
    resumed = train(exp, tmp_path / "part", resume=True, progress=False)
    assert resumed.dev == pytest.approx(full.dev)


def test_zero_epochs_evaluates_the_model_as_it_is(encoder_dir: Path, tmp_path: Path) -> None:
    exp = experiment(encoder_dir, model="minilm_zero_shot", epochs=0)
    result = train(exp, tmp_path / "zs", progress=False)
    assert result.best_epoch == 0 and result.history == []
    assert (tmp_path / "zs" / "model" / "model.safetensors").is_file()
    # Mean-pooled cosine of the raw encoder, scored by hand for one dev pair.
    p = prepare(exp)
    from attnmatch.evaluation import predict

    outputs = predict(load_model(result.model_dir).model, p.dev)
    np.testing.assert_allclose(outputs, predict(p.model, p.dev), atol=1e-6)
    # Reusing the finished run does not retrain or re-evaluate.
    again = train(exp, tmp_path / "zs", resume=True, progress=False)
    assert again.dev == result.dev and again.test == result.test


def test_a_frozen_model_with_nothing_to_train_needs_zero_epochs(
    encoder_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="epochs = 0"):
        train(experiment(encoder_dir, model="minilm_zero_shot"), tmp_path / "x", progress=False)


def test_missing_source_and_trigram_models_are_clear_errors(encoder_dir: Path) -> None:
    exp = ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"encoder": {"kind": "transformer"}},
            "data": {"dataset": "pairs", "data_dir": str(FIXTURE)},
        }
    )
    with pytest.raises(ConfigError, match="encoder.source"):
        prepare(exp)
    exp = exp.with_overrides(
        {"model": "dssm", "model_overrides": {"encoder": {"source": str(encoder_dir)}}}
    )
    with pytest.raises(ConfigError, match="letter trigrams"):
        prepare(exp)
    missing = experiment(encoder_dir.parent / "nowhere")
    with pytest.raises(FileNotFoundError, match="neither a known name"):
        prepare(missing)


def test_cross_encoder_trains_on_regression(encoder_dir: Path, tmp_path: Path) -> None:
    exp = ExperimentConfig.from_dict(
        {
            "model": "minilm_cross_encoder",
            "model_overrides": {"encoder": {"source": str(encoder_dir)}},
            "data": {
                "dataset": "pairs",
                "data_dir": str(STS_FIXTURE),
                "options": {"task": "regression"},
            },
            "train": {"epochs": 1, "batch_size": 8, "lr": 1e-3, "loss": "mse"},
        }
    )
    result = train(exp, tmp_path / "ce", progress=False)
    assert result.test is not None and np.isfinite(result.test["pearson"])


def test_table_rows_with_their_own_seeds(encoder_dir: Path, tmp_path: Path) -> None:
    table = tmp_path / "t.toml"
    table.write_text(
        f"""
table = "t"
title = "t"
protocol = "p"
metrics = ["map"]
seeds = [1, 2]
[defaults]
data = {{ dataset = "pairs", data_dir = "{FIXTURE}" }}
train = {{ epochs = 0, batch_size = 4, num_negatives = 2 }}
[[rows]]
id = "zs"
label = "zero-shot"
model = "minilm_zero_shot"
seeds = [1]
overrides = {{ model_overrides = {{ encoder = {{ source = "{encoder_dir}" }} }} }}
""",
        encoding="utf-8",
    )
    assert load_table(table).rows[0].seeds == (1,)
    result = reproduce(
        table, runs_dir=tmp_path / "runs", results_dir=tmp_path / "res", progress=False
    )
    assert result["rows"][0]["seeds"] == [1]
    assert not (tmp_path / "runs" / "t" / "zs" / "seed-2").exists()
    assert "--seeds 1" in (tmp_path / "res" / "t.md").read_text()


def test_cli_train_with_an_encoder_then_rank_and_evaluate(encoder_dir: Path, tmp_path: Path):
    from typer.testing import CliRunner

    from attnmatch.cli import app

    runner = CliRunner()
    out = tmp_path / "run"
    args = ["train", "--model", "mvlstm", "--dataset", "pairs", "--epochs", "1"]
    args += ["--encoder", str(encoder_dir), "-o", str(out), "--no-progress"]
    args += ["--set", f"data.data_dir={FIXTURE}", "--set", "model_overrides.hidden_size=4"]
    args += ["--set", "train.num_negatives=2", "--set", "train.batch_size=4"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    header = json.loads((out / "model" / "config.json").read_text())
    encoder = header["config"]["encoder"]
    assert encoder["kind"] == "transformer" and encoder["trainable"] is False
    assert encoder["source"] == str(encoder_dir)
    result = runner.invoke(
        app, ["rank", str(out / "model"), "-q", "what bridge ?", "--json"], input="a\nbridge\n"
    )
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) == 2
    evaluated = runner.invoke(
        app,
        ["evaluate", str(out / "model"), "--dataset", "pairs:test"]
        + ["--data-dir", str(FIXTURE), "--json"],
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.output)["metrics"]["num_queries"] == 8
    result = runner.invoke(app, ["train", "--fine-tune", "-o", str(tmp_path / "x")])
    assert result.exit_code != 0 and "--encoder" in result.output


def test_encoder_lr_gives_the_fine_tuned_encoder_its_own_rate(encoder_dir: Path) -> None:
    from attnmatch.training.trainer import learning_rate, make_optimizer, set_learning_rate

    exp = experiment(encoder_dir, trainable=True, lr=1e-3, encoder_lr=2e-5, lr_decay=0.5)
    exp = exp.with_overrides({"train": {"lr_decay_steps": 1}})
    p = prepare(exp)
    optimizer = make_optimizer(p.model, exp)
    own, enc = optimizer.param_groups
    contextual = transformer_encoder_of(p.model)
    assert contextual is not None
    assert {id(q) for q in enc["params"]} == {id(q) for q in contextual.parameters()}
    assert own["lr"] == pytest.approx(1e-3) and enc["lr"] == pytest.approx(2e-5)
    set_learning_rate(optimizer, learning_rate(exp.train, 1), exp.train)  # decayed once
    assert own["lr"] == pytest.approx(5e-4) and enc["lr"] == pytest.approx(1e-5)
    # Without encoder_lr (or with a frozen encoder) there is one group at lr.
    frozen = experiment(encoder_dir, lr=1e-3, encoder_lr=2e-5)
    assert len(make_optimizer(prepare(frozen).model, frozen).param_groups) == 1
    with pytest.raises(ConfigError, match="encoder_lr"):
        experiment(encoder_dir, encoder_lr=0.0)
