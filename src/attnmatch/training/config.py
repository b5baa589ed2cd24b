"""The experiment config: model + inputs + data + training, loaded strictly from TOML.

Example TOML (every key optional; unknown keys are errors)::

    model = "amvlstm_q"            # a preset or a registered model type
    [model_overrides]              # nested model config values
    k = 50
    [inputs]                       # the input representation (attnmatch.inputs); default:
    kind = "word_vectors"          #   the model's own (word vectors, trigrams for DSSM, ...)
    vectors = "glove-6b-50d"
    [data]
    dataset = "wikiqa"
    [train]
    epochs = 20
    seed = 1
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from attnmatch import configs
from attnmatch.data.sampling import check_hard_options
from attnmatch.devices import Precision, check_device_name, check_precision
from attnmatch.inputs import (
    InputsConfig,
    inputs_config_from_dict,
    inputs_config_to_dict,
    merge_inputs,
    parse_inputs,
)


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Args:
    dataset: a registered dataset name.
    train_split, dev_split, test_split: split names (test may be None).
    data_dir: where the dataset folder is (default: $ATTNMATCH_DATA, ./data, ~/.cache/attnmatch).
    options: dataset loader options (WikiQA: train_questions, filtered).
    """

    dataset: str = "wikiqa"
    train_split: str = "train"
    dev_split: str = "dev"
    test_split: str | None = "test"
    data_dir: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


DEFAULT_EPOCHS = 40
EVAL_MIN_STEPS = 25  # the automatic budget evaluates dev at most once per this many steps


@dataclass(frozen=True)
class Budget:
    """How long a run trains: `epochs` epochs of `steps_per_epoch` steps, dev evaluated after
    every `eval_every`-th epoch and after the last."""

    epochs: int
    steps_per_epoch: int
    eval_every: int

    @property
    def steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    def evaluates(self, epoch: int) -> bool:
        return epoch % self.eval_every == 0 or epoch == self.epochs


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Args:
    epochs: maximum epochs; 0 evaluates the initial model without training (zero-shot
        baselines such as `minilm_zero_shot`); None (the default): at least 40, and as many
        more as `min_steps` optimiser steps need, so that a small training set still gets a
        real budget.
    steps: a budget in optimiser steps instead of epochs (rounded up to whole epochs);
        overrides `epochs`.
    min_steps, min_epochs: the automatic budget (epochs and steps None): at least
        min_epochs epochs and min_steps optimiser steps.
    eval_every: epochs between dev evaluations; None: every epoch, or under the automatic
        budget with short epochs (fewer than `EVAL_MIN_STEPS` steps), every
        ceil(EVAL_MIN_STEPS / steps per epoch) epochs. Patience counts evaluations.
    select_metric: the dev metric the best model is selected on (one of the dev protocol's
        metrics, e.g. "f1", "macro_f1", "spearman", "mrr"); None: the protocol's primary.
    negatives: where a ranking group's negatives come from. "auto": the query's own
        negatives where it has some, else answers of other queries ("random"); "random":
        answers of other queries drawn at random; "bm25": other queries' answers that BM25
        ranks highest for the query (lexical hard negatives); "in_batch": the other answers of
        the batch (a listwise loss over the batch); "model": hard negatives the model being
        trained scores highest among `hard_pool` sampled candidates (HCRN's mix sampling,
        IARNN's hardest sampled negative; ranking groups only). Queries that have negatives of
        their own keep them under "auto", "random", "bm25" and "model" (whose pools are then
        drawn from them).
    hard_pool: for negatives = "model", the candidates drawn per positive and scored with the
        current model before its batch trains (>= num_negatives).
    hard_share: for negatives = "model", the fraction of the k negatives that are the pool's
        top-scored (rounded, halves up); the rest are other candidates of the pool at random.
        1: the hardest (IARNN, after Tan et al. and Feng et al.); 0.5: HCRN's mix; 0: random.
    warmup: the fraction of the step budget over which the learning rate rises linearly
        from 0 (0: none).
    lr_schedule: "staircase" (lr_decay every lr_decay_steps) or "linear" (decays linearly
        to 0 at the end of the step budget, after warm-up; the recipe of BERT fine-tuning).
    floors: print and record the no-training baselines beside dev/test metrics
        (`attnmatch.floors`): "all" (random, word overlap, BM25 and the MiniLM zero-shot
        encoder when installed), "lexical" (without the encoder) or "none".
    keep: what RUN/model holds at the end: "best", the best on dev of the trained model and
        every floor but random (a floor that beats the trained model on the selection metric
        is saved there as a model folder, the trained model moved to RUN/trained-model:
        `attnmatch.training.keep`), or "trained", the trained model whatever the floors score.
    seed: seeds Python, numpy, torch and sampling.
    loss: "auto" (the task's default: rank_hinge, cross_entropy or kl), "rank_hinge" or
        "listwise" (ranking groups), "cross_entropy" (classification; or pointwise ranking with
        a 2-class head scored by P(match)), "kl" (regression: KL to the sparse score
        distribution of Tai et al. 2015, one output per integer score level) or "mse"
        (regression: squared error of one output).
    margin: rank hinge margin (aMV-LSTM eq. 5: 1).
    num_negatives: k negatives per positive in a ranking group.
    batch_size: ranking groups per batch (ranking) or pairs per batch (classification).
    optimizer, lr, weight_decay, grad_clip: the optimiser (grad_clip 0 disables clipping;
        weight_decay is the L2 term).
    encoder_lr: the learning rate of the input layer's trained parameters (e.g. a fine-tuned
        transformer), when it should differ from `lr` (the model's own layers); None: `lr` for
        every parameter. Decays with `lr`.
    lr_decay, lr_decay_steps: staircase decay, lr * lr_decay ** (step // lr_decay_steps)
        (HCRN: 0.96 every 10,000 steps); lr_decay = 1 (the default) keeps lr constant.
    patience: stop after this many dev evaluations without an improvement (0: never stop
        early).
    eval_batch_size: pairs per inference batch.
    bucket_pool: length-bucketing pool in batches (0 disables).
    threads: torch CPU threads (0: automatic, torch's default less the CPUs busy with other
        work, `attnmatch.devices.cpu_threads`).
    max_memory: the peak resident memory (MB) a run aims to stay under: when its estimate is
        above it, a fine-tuned transformer encoder recomputes its activations in the backward
        pass (`attnmatch.training.memory`: the same results, about 40% more CPU time); None:
        no limit. It changes no result, and may change when a run is resumed.
    device: where the run trains and evaluates: "cpu" (the default), "cuda", "cuda:N" or
        "auto" (CUDA when available, else the CPU); `attnmatch.devices`. The default stays
        "cpu" so that a config gives the same run wherever it is started; the device may
        change when a run is resumed.
    precision: "fp32" (the default: no autocast, exactly as before), "bf16" or "fp16"
        (`torch.autocast` over forward passes; fp16 adds a `GradScaler`, and is CUDA only).
    """

    epochs: int | None = None
    steps: int | None = None
    min_steps: int = 1000
    min_epochs: int = DEFAULT_EPOCHS
    eval_every: int | None = None
    select_metric: str | None = None
    negatives: Literal["auto", "random", "bm25", "in_batch", "model"] = "auto"
    hard_pool: int = 20
    hard_share: float = 0.5
    warmup: float = 0.0
    lr_schedule: Literal["staircase", "linear"] = "staircase"
    floors: Literal["all", "lexical", "none"] = "all"
    keep: Literal["best", "trained"] = "best"
    seed: int = 1
    loss: Literal["auto", "rank_hinge", "listwise", "cross_entropy", "kl", "mse"] = "auto"
    margin: float = 1.0
    num_negatives: int = 4
    batch_size: int = 32
    optimizer: Literal["adam", "adamw", "adadelta", "sgd"] = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    grad_clip: float = 5.0
    encoder_lr: float | None = None
    lr_decay: float = 1.0
    lr_decay_steps: int = 10_000
    patience: int = 8
    eval_batch_size: int = 512
    bucket_pool: int = 50
    threads: int = 0
    max_memory: int | None = None
    device: str = "cpu"
    precision: Precision = "fp32"

    def __post_init__(self) -> None:
        if self.epochs is not None and self.epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {self.epochs}")
        for name in ("steps", "eval_every"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 or unset, got {getattr(self, name)}")
        if self.min_steps < 0 or self.min_epochs < 1:
            raise ValueError("min_steps must be >= 0 and min_epochs >= 1")
        if not 0.0 <= self.warmup < 1.0:
            raise ValueError(f"warmup must be a fraction in [0, 1), got {self.warmup}")
        for name in ("num_negatives", "batch_size", "eval_batch_size", "lr_decay_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        scored = self.negatives == "model"  # the pool holds k only where it is used
        check_hard_options(self.hard_pool, self.hard_share, self.num_negatives if scored else None)
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr}")
        if self.encoder_lr is not None and not (
            math.isfinite(self.encoder_lr) and self.encoder_lr > 0
        ):
            raise ValueError(
                f"encoder_lr must be a finite number > 0 or unset, got {self.encoder_lr}"
            )
        if not 0.0 < self.lr_decay <= 1.0:
            raise ValueError(f"lr_decay must be in (0, 1], got {self.lr_decay}")
        for name in ("patience", "bucket_pool", "threads"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("margin", "weight_decay", "grad_clip"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if self.max_memory is not None and self.max_memory < 1:
            raise ValueError(f"max_memory must be >= 1 (MB) or unset, got {self.max_memory}")
        if not 0 <= self.seed < 2**32:
            raise ValueError(f"seed must be in [0, 2**32 - 1], got {self.seed}")
        check_device_name(self.device, "device")  # its presence: when the run starts
        check_precision(self.precision, option="precision")

    def budget(self, steps_per_epoch: int) -> Budget:
        """The run's length for epochs of `steps_per_epoch` optimiser steps."""
        spe = max(1, steps_per_epoch)
        automatic = self.epochs is None and self.steps is None
        if self.steps is not None:
            epochs = -(-self.steps // spe)
        elif self.epochs is not None:
            epochs = self.epochs
        else:
            epochs = max(self.min_epochs, -(-self.min_steps // spe))
        every = self.eval_every
        if every is None:
            every = -(-EVAL_MIN_STEPS // spe) if automatic and spe < EVAL_MIN_STEPS else 1
        return Budget(epochs=epochs, steps_per_epoch=spe, eval_every=every)


# Keys of earlier configs that now live in [inputs]: where they went (and [tune], read by
# `attnmatch tune` only).
_MOVED = {
    "embeddings": '[embeddings] is now [inputs] (kind = "word_vectors", vectors = "glove-6b-50d", '
    "dim, normalize, oov)",
    "data.lowercase": "data.lowercase is now inputs.lowercase",
    "data.max_length": "data.max_length is now inputs.max_length",
    "data.min_freq": "data.min_freq is now inputs.min_freq",
    "data.vocab_from_eval_splits": "data.vocab_from_eval_splits is now inputs.vocab_from_eval_splits",
    "model_overrides.encoder": "model_overrides.encoder is now [inputs] (e.g. kind = "
    '"transformer", source = "minilm-l6", trainable = false)',
    "tune": "[tune] is the search space of `attnmatch tune`, not an experiment setting: train "
    "the search's RUN/best.toml, or this file without [tune]",
}


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """Everything a training run needs; `to_dict` of it is recorded with every result.

    `inputs` None means the model's own default inputs (`attnmatch.models.default_inputs`).
    `overlap_features` adds exact-match features to the model's outputs
    (`attnmatch.nn.overlap.WithOverlapFeatures`, idf from the training split).
    """

    model: str = "amvlstm_q"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    overlap_features: bool = False
    inputs: InputsConfig | None = None
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
        if not isinstance(data, dict):
            raise configs.ConfigError(f"config: expected a table/object, got {type(data).__name__}")
        for key, message in _MOVED.items():
            section, _, name = key.partition(".")
            node = data.get(section)
            if (not name and section in data) or (isinstance(node, dict) and name in node):
                raise configs.ConfigError(message)
        rest = {k: v for k, v in data.items() if k != "inputs"}
        exp = configs.from_dict(cls, rest)
        if data.get("inputs") is not None:
            from attnmatch.models import default_inputs

            own = default_inputs(exp.model)  # what an [inputs] without `kind` completes
            exp = dataclasses.replace(
                exp, inputs=inputs_config_from_dict(data["inputs"], default=own)
            )
        return exp

    def to_dict(self) -> dict[str, Any]:
        return configs.to_dict(self)

    def with_overrides(self, overrides: dict[str, Any]) -> ExperimentConfig:
        current = self.to_dict()
        merged = configs.merge(current, {k: v for k, v in overrides.items() if k != "inputs"})
        if "inputs" in overrides:
            merged["inputs"] = merge_inputs(current.get("inputs"), overrides["inputs"])
        return ExperimentConfig.from_dict(merged)

    def with_inputs(self, name: str | None, *, trainable: bool | None = None) -> ExperimentConfig:
        """The experiment with the inputs a short name gives (`attnmatch.inputs.shortcut`:
        "glove-6b-50d", "random", "trigrams", "minilm-l6", a vectors file or an encoder
        directory), read on top of its current ones (or its model's own): a name of the same
        kind keeps their other settings. `trainable` fine-tunes or freezes the input layer;
        None leaves both as they are."""
        if name is None and trainable is None:
            return self
        chosen = inputs_config_to_dict(self.resolved_inputs())
        if name is not None:
            chosen = inputs_config_to_dict(parse_inputs(name, default=chosen))
        if trainable is not None:
            chosen["trainable"] = trainable
        return dataclasses.replace(self, inputs=parse_inputs(chosen))

    def resolved_inputs(self) -> InputsConfig:
        """The inputs this experiment reads: its own, or its model's default."""
        if self.inputs is not None:
            return self.inputs
        from attnmatch.models import default_inputs

        return inputs_config_from_dict(default_inputs(self.model))


OWN_DATA_MODEL = "minilm_bi_encoder"
OWN_DATA_FALLBACK = "amvlstm_q"


def own_data_model() -> tuple[str, str]:
    """The model trained on a user's own pairs when none is named, and a line saying so:
    the fine-tuned MiniLM bi-encoder where the minilm extra is installed (it beats word
    overlap and BM25 on small sets where models trained from scratch do not: docs/training.md,
    "Your own data"), else aMV-LSTM (Q) on GloVe, which then adds the exact-match features
    (`overlap_features`: better on the dev splits of all three small sets)."""
    import importlib.util

    from attnmatch.encoders import ENCODERS

    if importlib.util.find_spec(ENCODERS["minilm-l6"].package) is not None:
        return OWN_DATA_MODEL, (
            f"model: {OWN_DATA_MODEL} (fine-tuned MiniLM, the default for your own pairs; "
            "--model to choose another)"
        )
    return OWN_DATA_FALLBACK, (
        f"model: {OWN_DATA_FALLBACK} with exact-match features (the default for your own pairs "
        "without MiniLM; pip install 'attnmatch[minilm]' for the better default, a fine-tuned "
        "MiniLM)"
    )


def load_experiment(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Reads a TOML experiment config; errors name the file and the offending key."""
    path = Path(path)
    data = configs.load_toml(path)
    overrides = dict(overrides or {})
    merged = configs.merge(data, {k: v for k, v in overrides.items() if k != "inputs"})
    if "inputs" in overrides:
        merged["inputs"] = merge_inputs(data.get("inputs"), overrides["inputs"])
    try:
        exp = ExperimentConfig.from_dict(merged)
    except configs.ConfigError as e:
        raise configs.ConfigError(f"{path}: {e}") from e
    return exp
