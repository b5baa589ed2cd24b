"""Building an experiment: its splits, its fitted inputs, its task and a fresh model.

`build_experiment(config)` loads the configured dataset's splits; `experiment_from_splits`
takes splits already in memory (`attnmatch.training.fit`). Both give an `Experiment`: a `Matcher` (model +
inputs + task) ready to train, built as every new model is (`Matcher.untrained`), the loss, and
the encoded splits with their protocols.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnmatch.configs import ConfigError
from attnmatch.data.datasets import Split, load_train_dev_test
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import Example
from attnmatch.inputs import InputsConfig, check_accepts
from attnmatch.matcher import Matcher
from attnmatch.models import get_model_entry, input_layer, model_type_of
from attnmatch.tasks import GROUP_LOSSES, RankingTask, Task, among, same_kind
from attnmatch.training.config import ExperimentConfig, TrainConfig

# Given a line to print as a step of building an experiment starts (`build_experiment`).
Say = Callable[[str], None]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class EvalSplit:
    """An encoded split with the protocol it is evaluated under."""

    data: EncodedPairs
    protocol: Task
    examples: list[Example] = field(default_factory=list)


@dataclass(frozen=True)
class Distillation:
    """How a student learns from its teacher's targets (`attnmatch.training.distillation`): the
    distillation loss (`attnmatch.training.distillation.DISTILL_LOSSES`) and its weight beside the gold-label
    loss, in [0, 1] (1: the teacher alone)."""

    loss: str
    weight: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"the distillation weight must lie in [0, 1], got {self.weight}")


@dataclass
class Experiment:
    """What a training run works on.

    Attributes:
        config: the experiment config.
        matcher: the model to train, with its fitted inputs and its task.
        loss: the resolved training loss.
        train: the encoded training split.
        dev: the selection split (None: no selection, the last epoch is kept).
        test: evaluated once at the end (None: no test split).
        train_texts: the training split's distinct texts, in `train.texts` order.
        notes: what loading the splits decided (inferred task, carved dev split ...), said
            when the run starts.
        fit_examples: the labelled pairs the floors' calibrations are fitted on (train).
        distill: with a teacher's targets in `train.teacher`, how the student learns from
            them; None: from the labels alone.
    """

    config: ExperimentConfig
    matcher: Matcher
    loss: str
    train: EncodedPairs
    dev: EvalSplit | None
    test: EvalSplit | None
    train_texts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fit_examples: list[Example] = field(default_factory=list)
    distill: Distillation | None = None

    @property
    def model(self) -> torch.nn.Module:
        return self.matcher.model

    @property
    def inputs_stats(self) -> dict[str, Any]:
        inputs = self.matcher.inputs  # None only for a text model, which is never trained
        return inputs.stats if inputs is not None else {}


def load_splits(config: ExperimentConfig) -> tuple[Split, Split, Split | None]:
    """The train, dev and (optional) test splits of the configured dataset.

    Your own pairs (`dataset = "pairs:FOLDER"`) need only train: a missing dev split is held out
    of it, a missing test split is None (see `load_train_dev_test`; each says so in its notes).
    """
    d = config.data
    return load_train_dev_test(
        d.dataset, d.train_split, d.dev_split, d.test_split, data_dir=d.data_dir, **d.options
    )


def build_experiment(config: ExperimentConfig, *, say: Say | None = None) -> Experiment:
    """Loads the configured splits, fits the inputs and builds a fresh model; `say` is given
    a line as each step starts (and the splits' notes as soon as they are read)."""
    check_model_inputs(config)  # before the splits are loaded
    d = config.data
    where = f" ({d.data_dir})" if d.data_dir and ":" not in d.dataset else ""
    (say or _silent)(f"data: reading {d.dataset}{where} ...")
    train, dev, test = load_splits(config)
    return experiment_from_splits(config, train, dev, test, say=say)


def _silent(line: str) -> None:
    """A `Say` that says nothing."""


def check_model_inputs(config: ExperimentConfig) -> InputsConfig:
    """The experiment's inputs config, after checking the model reads their kind."""
    inputs_config = config.resolved_inputs()
    entry = get_model_entry(model_type_of(config.model))
    check_accepts(config.model, entry.inputs, inputs_config)
    return inputs_config


def experiment_task(train: Split, dev: Split | None) -> Task:
    """The task of the splits (from the dev protocol, or the training split's)."""
    reference = dev if dev is not None else train
    if reference.protocol is None:
        raise ValueError(f"{reference.dataset}:{reference.split} has no evaluation protocol")
    if dev is not None and not same_kind(train.task, dev.task):
        raise ValueError(
            f"{train.dataset}: split {train.split!r} is a {train.task.kind} split but "
            f"{dev.split!r} is evaluated as {dev.task.kind}"
        )
    return Task.of(reference.protocol)


def experiment_from_splits(
    config: ExperimentConfig,
    train: Split,
    dev: Split | None,
    test: Split | None,
    *,
    say: Say | None = None,
) -> Experiment:
    """An experiment on splits already loaded (the config's data section names them only);
    `say` is given the splits' notes, then a line before the model is built."""
    say = say or _silent
    inputs = check_model_inputs(config)
    notes = [n for split in (train, dev, test) if split is not None for n in split_notes(split)]
    notes = list(dict.fromkeys(notes))
    for note in notes:
        say(note)
    task = experiment_task(train, dev)
    config = with_recipe(config, task)
    model_type = model_type_of(config.model)
    if not among(task, get_model_entry(model_type).tasks):
        raise ValueError(
            f"model {config.model!r} does not support the {task.kind} task (it supports "
            f"{', '.join(get_model_entry(model_type).tasks)}); choose another model or dataset"
        )
    loss = task.resolve_loss(config.train.loss)
    _check_negatives(config, task, loss)
    seed_everything(config.train.seed)
    zero_shot = (
        config.train.epochs == 0 and not task.similarity_is_output and model_type == "bi_encoder"
    )
    cosine_start = zero_shot or _cosine_start(config, model_type)
    texts = len(set(_texts(train) + _texts(dev) + _texts(test)))
    say(f"model: building {config.model} on {inputs.kind} inputs for {texts:,} distinct texts ...")
    # Zero-shot, no head is trained: the cosine, calibrated on train (never a random head); a
    # fine-tuned cosine head starts from the same calibration (`_cosine_start`).
    overrides = config.model_overrides
    if cosine_start:
        overrides = {k: v for k, v in overrides.items() if k not in _COSINE_HEAD_KEYS}
    matcher = Matcher.untrained(
        config.model,
        inputs=inputs,
        task=RankingTask() if cosine_start else task,
        loss="auto" if cosine_start else loss,
        overrides=overrides,
        train_texts=_texts(train),
        eval_texts=_texts(dev) + _texts(test),
        seed=config.train.seed,
    )
    _enable_cache(matcher)  # frozen encoders: each text encoded once
    if cosine_start:
        metric = config.train.select_metric or (dev or train).protocol.primary  # type: ignore[union-attr]
        metric = metric if metric in ("accuracy", "f1", "macro_f1") else "accuracy"
        matcher = Matcher.with_cosine_head(
            matcher, task=task, calibration=train.examples, metric=metric
        )
        if not zero_shot:
            say(f"head: {_head_line(matcher, metric)}")
        _enable_cache(matcher)
    matcher.batch_size = config.train.eval_batch_size
    dev_split = _eval_split(matcher, dev)
    _check_select_metric(config, dev_split)
    encoded_train = matcher.encode(train.examples)
    if config.overlap_features:
        from attnmatch.nn.overlap import WithOverlapFeatures, idf_table

        wrapped = WithOverlapFeatures(
            matcher.model, task.num_outputs(loss), idf_table(encoded_train.texts)
        )
        matcher = dataclasses.replace(matcher, model=wrapped)
    return Experiment(
        config=config,
        matcher=matcher,
        loss=loss,
        train=encoded_train,
        dev=dev_split,
        test=_eval_split(matcher, test),
        train_texts=distinct_texts(train.examples),
        notes=notes,
        fit_examples=list(train.examples),
    )


_COSINE_HEAD_KEYS = ("cosine_logits", "scale", "shift")


def _cosine_start(config: ExperimentConfig, model_type: str) -> bool:
    """Whether a trained bi-encoder's weightless cosine head (`BiEncoderConfig.cosine_logits`)
    is fitted zero-shot on the training pairs before training: asked for with
    `cosine_logits = true` and no scale or shift given (the MiniLM preset's binary
    classifier: the run starts where zero-shot MiniLM is, with its threshold)."""
    given = config.model_overrides
    return (
        model_type == "bi_encoder"
        and bool(given.get("cosine_logits"))
        and "scale" not in given
        and "shift" not in given
    )


def _head_line(matcher: Matcher, metric: str) -> str:
    """What the zero-shot fit of a cosine head chose, said before training."""
    head: Any = matcher.model.config  # a BiEncoderConfig
    return (
        f"the last class when {head.scale:.3g} * cosine {head.shift:+.3g} > 0, i.e. cosine > "
        f"{-head.shift / head.scale:.4f} (fitted zero-shot on the training pairs to {metric}); "
        "fine-tuning starts there"
    )


def _enable_cache(matcher: Matcher) -> None:
    """Frozen encoders encode each text once (a model that reads ids; a text model has none)."""
    if matcher.inputs is not None:
        matcher.inputs.enable_cache(input_layer(matcher.model))


def split_notes(split: Split) -> tuple[str, ...]:
    """What loading `split` decided, to be said (`Split.notes`)."""
    return tuple(getattr(split, "notes", ()))


def distinct_texts(examples: list[Example]) -> list[str]:
    """The distinct texts of `examples` in the order `encode_examples` numbers them."""
    return list(dict.fromkeys(t for ex in examples for t in (ex.left, ex.right)))


def _check_select_metric(config: ExperimentConfig, dev: EvalSplit | None) -> None:
    chosen = config.train.select_metric
    if chosen is None or dev is None:
        return
    if chosen not in dev.protocol.metrics:
        raise ConfigError(
            f"train.select_metric = {chosen!r} is not a metric of the dev protocol "
            f"{dev.protocol.name!r}; choose one of {', '.join(dev.protocol.metrics)}"
        )


def _check_negatives(config: ExperimentConfig, task: Task, loss: str) -> None:
    """Model-scored negatives choose within ranking groups: a ranking task and a group loss."""
    if config.train.negatives == "model" and loss not in GROUP_LOSSES:
        raise ConfigError(
            f'train.negatives = "model" chooses the negatives of ranking groups: it needs a '
            f"ranking task with the {' or '.join(GROUP_LOSSES)} loss, not the {task.kind} task "
            f"with {loss}"
        )


def with_recipe(config: ExperimentConfig, task: Task) -> ExperimentConfig:
    """`config` with its preset's training recipe for `task` (`Preset.recipe`) filled in
    where the experiment keeps the default: a `[train]` key equal to its default value, a
    model override not given."""
    from attnmatch.models import get_preset, list_presets

    if config.model not in list_presets() or get_preset(config.model).recipe is None:
        return config
    recipe = get_preset(config.model).recipe(task)  # type: ignore[misc]
    defaults = TrainConfig()
    train = {
        k: v
        for k, v in recipe.get("train", {}).items()
        if getattr(config.train, k) == getattr(defaults, k)
    }
    model = {
        k: v
        for k, v in recipe.get("model_overrides", {}).items()
        if k not in config.model_overrides
    }
    if not train and not model:
        return config
    return dataclasses.replace(
        config,
        train=dataclasses.replace(config.train, **train),
        model_overrides={**config.model_overrides, **model},
    )


def _texts(split: Split | None) -> list[str]:
    if split is None:
        return []
    return [text for ex in split.examples for text in (ex.left, ex.right)]


def _eval_split(matcher: Matcher, split: Split | None) -> EvalSplit | None:
    if split is None:
        return None
    if split.protocol is None:
        raise ConfigError(f"{split.dataset}:{split.split} has no evaluation protocol")
    return EvalSplit(matcher.encode(split.examples), split.protocol, list(split.examples))
