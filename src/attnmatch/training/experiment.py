"""Building an experiment: its splits, its fitted inputs, its task and a fresh model.

`build_experiment(config)` loads the configured dataset's splits; `experiment_from_splits`
takes splits already in memory (`Matcher.fit`). Both give an `Experiment`: a `Matcher` (model +
inputs + task) ready to train, the loss, and the encoded splits with their protocols.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attnmatch.configs import ConfigError
from attnmatch.data.datasets import Split, load_split
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.protocol import Protocol
from attnmatch.inputs import Inputs, build_inputs, check_accepts
from attnmatch.matcher import Matcher
from attnmatch.models import (
    build_model,
    get_model_entry,
    input_layer,
    model_type_of,
    resolve_model_config,
)
from attnmatch.tasks import Task
from attnmatch.training.config import ExperimentConfig


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class EvalSplit:
    """An encoded split with the protocol it is evaluated under."""

    data: EncodedPairs
    protocol: Protocol


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
    """

    config: ExperimentConfig
    matcher: Matcher
    loss: str
    train: EncodedPairs
    dev: EvalSplit | None
    test: EvalSplit | None

    @property
    def model(self) -> torch.nn.Module:
        return self.matcher.model

    @property
    def inputs_stats(self) -> dict[str, Any]:
        return self.matcher.inputs.stats


def load_splits(config: ExperimentConfig) -> tuple[Split, Split, Split | None]:
    """The train, dev and (optional) test splits of the configured dataset."""
    d = config.data
    train = load_split(d.dataset, d.train_split, data_dir=d.data_dir, **d.options)
    dev = load_split(d.dataset, d.dev_split, data_dir=d.data_dir, **d.options)
    test = (
        load_split(d.dataset, d.test_split, data_dir=d.data_dir, **d.options)
        if d.test_split
        else None
    )
    return train, dev, test


def build_experiment(config: ExperimentConfig) -> Experiment:
    """Loads the configured splits, fits the inputs and builds a fresh model."""
    inputs = check_model_inputs(config)
    train, dev, test = load_splits(config)
    return experiment_from_splits(config, train, dev, test, inputs=inputs)


def check_model_inputs(config: ExperimentConfig) -> Inputs:
    """The experiment's (unfitted) inputs, after checking the model reads their kind."""
    inputs_config = config.resolved_inputs()
    entry = get_model_entry(model_type_of(config.model))
    check_accepts(config.model, entry.inputs, inputs_config)
    return build_inputs(inputs_config)


def experiment_task(train: Split, dev: Split | None) -> Task:
    """The task of the splits (from the dev protocol, or the training split's)."""
    reference = dev if dev is not None else train
    if reference.protocol is None:
        raise ValueError(f"{reference.dataset}:{reference.split} has no evaluation protocol")
    if dev is not None and train.task != dev.task:
        raise ValueError(
            f"{train.dataset}: split {train.split!r} is a {train.task} split but {dev.split!r} "
            f"is evaluated as {dev.task}"
        )
    return Task.of(reference.protocol)


def experiment_from_splits(
    config: ExperimentConfig,
    train: Split,
    dev: Split | None,
    test: Split | None,
    *,
    inputs: Inputs | None = None,
) -> Experiment:
    """An experiment on splits already loaded (the config's data section names them only)."""
    inputs = inputs or check_model_inputs(config)
    task = experiment_task(train, dev)
    model_type = model_type_of(config.model)
    if task.kind not in get_model_entry(model_type).tasks:
        raise ValueError(
            f"model {config.model!r} does not support the {task.kind} task (it supports "
            f"{', '.join(get_model_entry(model_type).tasks)}); choose another model or dataset"
        )
    loss = task.resolve_loss(config.train.loss)
    seed_everything(config.train.seed)
    inputs.fit(_texts(train), _texts(dev) + _texts(test), seed=config.train.seed)
    model_type, model_config = resolve_model_config(
        config.model,
        encoder=inputs.encoder_config(),
        num_outputs=task.num_outputs(loss),
        overrides=config.model_overrides,
    )
    model = build_model(model_type, model_config)
    inputs.init_encoder(input_layer(model))
    inputs.enable_cache(input_layer(model))  # frozen encoders: each text encoded once
    matcher = Matcher(model=model, model_type=model_type, inputs=inputs, task=task)
    matcher.batch_size = config.train.eval_batch_size
    return Experiment(
        config=config,
        matcher=matcher,
        loss=loss,
        train=matcher.encode(train.examples),
        dev=_eval_split(matcher, dev),
        test=_eval_split(matcher, test),
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
    return EvalSplit(matcher.encode(split.examples), split.protocol)
