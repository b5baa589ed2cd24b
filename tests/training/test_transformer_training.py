"""Training, saving and serving on transformer inputs (a tiny random BERT on disk)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmatch.configs import ConfigError
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.inputs import TransformerInputs
from attnmatch.inputs.transformer_layer import TransformerTokenEncoder
from attnmatch.matcher import Matcher
from attnmatch.models import input_layer
from attnmatch.research.reproduce import load_table, reproduce
from attnmatch.training import ExperimentConfig, build_experiment, train
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
    """The trainer tests' tiny experiment on transformer inputs read from `encoder` (MV-LSTM
    keeps its tiny sizes)."""
    data = tiny_experiment(**train_over).to_dict()
    if model != "mvlstm":
        data.update(model=model, model_overrides={})
    data["inputs"] = {"kind": "transformer", "source": str(encoder), "trainable": trainable}
    return ExperimentConfig.from_dict(data)


def test_build_experiment_uses_the_encoders_tokenizer_and_weights(encoder_dir: Path) -> None:
    exp = build_experiment(experiment(encoder_dir))
    inputs = exp.matcher.inputs
    assert isinstance(inputs, TransformerInputs) and isinstance(inputs.tokenizer, SubwordTokenizer)
    assert getattr(inputs, "vocab", None) is None  # no word vocabulary
    contextual = input_layer(exp.model)
    assert isinstance(contextual, TransformerTokenEncoder) and not contextual.config.trainable
    assert contextual.config.transformer_config["hidden_size"] == 8
    # Ids are the tokenizer's, with [CLS] ... [SEP]; the weights are the directory's.
    cls, sep = inputs.tokenizer.token_id("[CLS]"), inputs.tokenizer.token_id("[SEP]")
    assert all(t[0] == cls and t[-1] == sep for t in exp.train.texts)
    from safetensors.torch import load_file

    saved = load_file(str(encoder_dir / "model.safetensors"))
    torch.testing.assert_close(
        contextual.transformer.embeddings.word_embeddings.weight,
        saved["bert.embeddings.word_embeddings.weight"],
    )
    assert exp.inputs_stats["kind"] == "transformer"
    assert exp.inputs_stats["ignored_weights"]  # the checkpoint's pooler


def test_train_frozen_encoder_round_trips_and_serves(encoder_dir: Path, tmp_path: Path) -> None:
    import shutil

    source = shutil.copytree(encoder_dir, tmp_path / "encoder-copy")
    result = train(experiment(source), tmp_path / "run", progress=False)
    model_dir = result.model_dir
    assert (model_dir / "tokenizer.json").is_file() and not (model_dir / "vocab.json").exists()
    header = json.loads((model_dir / "config.json").read_text())
    assert header["format"] == "attnmatch.model/2"
    assert header["inputs"] == {
        "kind": "transformer",
        "source": str(source),
        "trainable": False,
        "layer": -1,
        "max_length": 256,
        "dropout": 0.0,
    }
    assert header["config"]["encoder"]["transformer_config"]["model_type"] == "bert"
    # The directory is self-contained: delete the encoder's source and it still loads.
    shutil.rmtree(source)
    matcher = Matcher.load(model_dir)
    assert isinstance(matcher.inputs, TransformerInputs)
    assert isinstance(matcher.inputs.tokenizer, SubwordTokenizer)
    assert getattr(matcher.inputs, "vocab", None) is None
    pairs = [("what bridge window ?", "window for by is with bridge"), ("a", "b c")]
    first = matcher.score(pairs)
    again = Matcher.load(model_dir).score(pairs)
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
    # The saved model's outputs are the raw encoder's mean-pooled cosines.
    built = build_experiment(exp)
    assert built.dev is not None
    outputs = Matcher.load(result.model_dir).predict(built.dev.data)
    np.testing.assert_allclose(outputs, built.matcher.predict(built.dev.data), atol=1e-6)
    # Reusing the finished run does not retrain or re-evaluate.
    again = train(exp, tmp_path / "zs", resume=True, progress=False)
    assert again.dev == result.dev and again.test == result.test


def test_a_frozen_model_with_nothing_to_train_needs_zero_epochs(
    encoder_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="epochs = 0"):
        train(experiment(encoder_dir, model="minilm_zero_shot"), tmp_path / "x", progress=False)


def test_moved_keys_empty_sources_and_unreadable_input_kinds_are_clear_errors(
    encoder_dir: Path,
) -> None:
    data = {"model": "mvlstm", "data": {"dataset": "pairs", "data_dir": str(FIXTURE)}}
    # The encoder is configured in [inputs], not in the model config.
    with pytest.raises(ConfigError, match=r"model_overrides.encoder is now \[inputs\]"):
        ExperimentConfig.from_dict(data | {"model_overrides": {"encoder": {"kind": "transformer"}}})
    with pytest.raises(ConfigError, match="inputs: source is empty"):
        ExperimentConfig.from_dict(data | {"inputs": {"kind": "transformer", "source": ""}})
    # A model refuses an input kind it cannot read (the cross-encoder needs a transformer's joint
    # sequence; the bi-encoder one id per token), naming what it reads.
    refused = [
        ("minilm_cross_encoder", {"kind": "word_vectors", "vectors": "random", "dim": 8}),
        ("bi_encoder", {"kind": "trigrams", "dim": 8}),
    ]
    for model, inputs in refused:
        exp = ExperimentConfig.from_dict(data | {"model": model, "inputs": inputs})
        reads = "transformer" if model == "minilm_cross_encoder" else "word_vectors or transformer"
        with pytest.raises(
            ConfigError, match=f"'{model}' cannot read {inputs['kind']} inputs; it reads {reads}"
        ):
            build_experiment(exp)
    # DSSM is a tower over token vectors now (trigrams by default): a transformer's will do.
    exp = ExperimentConfig.from_dict(
        data
        | {
            "model": "dssm",
            "model_overrides": {"hidden_sizes": [], "output_size": 5},
            "inputs": {"kind": "transformer", "source": str(encoder_dir)},
        }
    )
    assert isinstance(input_layer(build_experiment(exp).model), TransformerTokenEncoder)
    missing = experiment(encoder_dir.parent / "nowhere")
    with pytest.raises(FileNotFoundError, match="neither a known name"):
        build_experiment(missing)


def test_cross_encoder_trains_on_regression(encoder_dir: Path, tmp_path: Path) -> None:
    """Fine-tuning a cross-encoder with MSE fits the training pairs: the epochs' training loss
    falls, and scored on those pairs (dev is a copy of train here) Pearson rises from the
    untrained model's (about 0) to above 0.5."""
    import shutil

    from attnmatch.evaluation import evaluate

    data = tmp_path / "sts"
    data.mkdir()
    for split, source in (("train", "train"), ("dev", "train"), ("test", "test")):
        shutil.copyfile(STS_FIXTURE / f"{source}.tsv", data / f"{split}.tsv")
    exp = ExperimentConfig.from_dict(
        {
            "model": "cross_encoder",  # the model type: no preset recipe (encoder_lr 2e-5)
            "inputs": {"kind": "transformer", "source": str(encoder_dir), "trainable": True},
            "data": {"dataset": "pairs", "data_dir": str(data), "options": {"task": "regression"}},
            "train": {"epochs": 12, "batch_size": 8, "lr": 5e-3, "loss": "mse", "patience": 0},
        }
    )
    built = build_experiment(exp)
    assert built.dev is not None and input_layer(built.model).config.trainable
    untrained = evaluate(built.matcher, built.dev.data, built.dev.protocol).metrics["pearson"]
    result = train(exp, tmp_path / "ce", progress=False)
    losses = [h["train_loss"] for h in result.history]
    assert len(losses) == 12 and losses[-1] < 0.8 * losses[0], losses
    trained = result.dev["pearson"]
    assert trained > 0.5 and trained > untrained + 0.3, (untrained, trained)
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
overrides = {{ inputs = {{ kind = "transformer", source = "{encoder_dir}" }} }}
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
    common = ["train", "--model", "mvlstm", "--dataset", "pairs", "--no-progress"]
    common += ["--keep-trained"]  # overlap scores the fixture's dev perfectly
    common += ["--set", f"data.data_dir={FIXTURE}", "--set", "model_overrides.hidden_size=4"]
    common += ["--set", "train.num_negatives=2", "--set", "train.batch_size=4"]
    args = [*common, "--epochs", "1", "--inputs", str(encoder_dir), "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    header = json.loads((out / "model" / "config.json").read_text())
    encoder = header["config"]["encoder"]
    assert encoder["kind"] == "transformer" and encoder["trainable"] is False
    assert header["inputs"]["kind"] == "transformer" and header["inputs"]["trainable"] is False
    assert header["inputs"]["source"] == str(encoder_dir)
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
    # --fine-tune makes the inputs trainable (0 epochs: the model is saved as it is).
    tuned = tmp_path / "tuned"
    args = [*common, "--epochs", "0", "--inputs", str(encoder_dir), "--fine-tune", "-o", str(tuned)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    header = json.loads((tuned / "model" / "config.json").read_text())
    assert header["inputs"]["trainable"] is True and header["config"]["encoder"]["trainable"]
    # The earlier --encoder option is gone (--inputs replaces it).
    result = runner.invoke(app, [*common, "--encoder", str(encoder_dir), "-o", str(tmp_path / "x")])
    assert result.exit_code != 0 and "--encoder" in result.output
    assert not (tmp_path / "x").exists()


def test_encoder_lr_gives_the_fine_tuned_encoder_its_own_rate(encoder_dir: Path) -> None:
    from attnmatch.training.optim import learning_rate, make_optimizer, set_learning_rate

    exp = experiment(encoder_dir, trainable=True, lr=1e-3, encoder_lr=2e-5, lr_decay=0.5)
    exp = exp.with_overrides({"train": {"lr_decay_steps": 1}})
    model = build_experiment(exp).model
    optimizer = make_optimizer(model, exp.train)
    own, enc = optimizer.param_groups
    contextual = input_layer(model)
    assert isinstance(contextual, TransformerTokenEncoder)
    assert {id(q) for q in enc["params"]} == {id(q) for q in contextual.parameters()}
    assert own["lr"] == pytest.approx(1e-3) and enc["lr"] == pytest.approx(2e-5)
    set_learning_rate(optimizer, learning_rate(exp.train, 1))  # decayed once
    assert own["lr"] == pytest.approx(5e-4) and enc["lr"] == pytest.approx(1e-5)
    # Without encoder_lr (or with a frozen encoder) there is one group at lr.
    frozen = experiment(encoder_dir, lr=1e-3, encoder_lr=2e-5)
    assert len(make_optimizer(build_experiment(frozen).model, frozen.train).param_groups) == 1
    untuned = experiment(encoder_dir, trainable=True, lr=1e-3)
    assert len(make_optimizer(build_experiment(untuned).model, untuned.train).param_groups) == 1
    with pytest.raises(ConfigError, match="encoder_lr"):
        experiment(encoder_dir, encoder_lr=0.0)


def test_zero_shot_bi_encoder_on_classification_uses_a_calibrated_cosine(
    encoder_dir: Path, tmp_path: Path
) -> None:
    """epochs = 0 on a classification split: the cosine read through a threshold fitted on
    train, never an untrained (random) classifier; two seeds give the same model."""
    outputs = []
    for seed in (1, 2):
        exp = ExperimentConfig.from_dict(
            {
                "model": "bi_encoder",
                "inputs": {"kind": "transformer", "source": str(encoder_dir)},
                "data": {
                    "dataset": "pairs",
                    "data_dir": str(FIXTURE),
                    "options": {"task": "classification"},
                },
                "train": {"epochs": 0, "seed": seed, "floors": "none"},
            }
        )
        built = build_experiment(exp)
        config = built.model.config
        assert config.cosine_logits and built.model.classifier is None
        outputs.append(built.matcher.predict(built.dev.data))  # type: ignore[union-attr]
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_a_classifier_is_evaluated_as_a_classifier_on_ranking_pairs(
    encoder_dir: Path, tmp_path: Path
) -> None:
    """A classifier evaluated on 0/1 ranking pairs gets accuracy and F1, not MAP."""
    from attnmatch.matcher import Matcher
    from attnmatch.tasks import Task

    clf = Matcher.untrained(
        "bi_encoder",
        inputs={"kind": "transformer", "source": str(encoder_dir)},
        task=Task(kind="classification", class_names=("0", "1")),
    )
    report = clf.evaluate(f"pairs:{FIXTURE}:test")
    assert "accuracy" in report.metrics and "map" not in report.metrics
