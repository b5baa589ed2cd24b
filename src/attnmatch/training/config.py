"""The experiment config: model + data + embeddings + training, loaded strictly from TOML.

Example TOML (every key optional except where noted; unknown keys are errors)::

    model = "amvlstm_q"            # a preset or a registered model type
    [model_overrides]              # nested model config values
    k = 50
    [data]
    dataset = "wikiqa"
    [embeddings]
    source = "glove-6b-50d"
    [train]
    epochs = 20
    seed = 1
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from attnmatch import configs


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Args:
    dataset: a registered dataset name.
    train_split, dev_split, test_split: split names (test may be None).
    data_dir: where the dataset folder is (default: $ATTNMATCH_DATA, ./data, ~/.cache/attnmatch).
    options: dataset loader options (WikiQA: train_questions, filtered).
    lowercase, max_length: tokenizer settings.
    min_freq: minimum training-set frequency of a vocabulary word.
    vocab_from_eval_splits: also add dev/test words that have a pretrained vector (texts only,
        never labels), so fixed pretrained vectors are not lost to `<unk>` at evaluation.
    """

    dataset: str = "wikiqa"
    train_split: str = "train"
    dev_split: str = "dev"
    test_split: str | None = "test"
    data_dir: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    lowercase: bool = True
    max_length: int | None = None
    min_freq: int = 1
    vocab_from_eval_splits: bool = True


@dataclass(frozen=True, kw_only=True)
class EmbeddingConfig:
    """Args:
    source: "glove-6b-50d", a path to a vectors file, or "random" (no pretrained vectors).
    dim: the vector size when source = "random".
    normalize: L2-normalise the vectors (aMV-LSTM does).
    oov: vectors of words without a pretrained vector: "random" (normal, scaled to the
        pretrained std) or "zero".
    """

    source: str = "glove-6b-50d"
    dim: int = 50
    normalize: bool = True
    oov: Literal["random", "zero"] = "random"


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Args:
    epochs: maximum epochs; 0 evaluates the initial model without training (zero-shot
        baselines such as `minilm_zero_shot`).
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
    encoder_lr: the learning rate of a fine-tuned transformer token encoder, when it should
        differ from `lr` (the model's own layers); None: `lr` for every parameter. Decays with
        `lr`.
    lr_decay, lr_decay_steps: staircase decay, lr * lr_decay ** (step // lr_decay_steps)
        (HCRN: 0.96 every 10,000 steps); lr_decay = 1 (the default) keeps lr constant.
    patience: stop after this many epochs without a dev improvement (0: never stop early).
    eval_batch_size: pairs per inference batch.
    bucket_pool: length-bucketing pool in batches (0 disables).
    threads: torch CPU threads (0: torch's default).
    """

    epochs: int = 40
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

    def __post_init__(self) -> None:
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {self.epochs}")
        for name in ("num_negatives", "batch_size", "eval_batch_size", "lr_decay_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.encoder_lr is not None and self.encoder_lr <= 0:
            raise ValueError(f"encoder_lr must be > 0 or unset, got {self.encoder_lr}")
        if not 0.0 < self.lr_decay <= 1.0:
            raise ValueError(f"lr_decay must be in (0, 1], got {self.lr_decay}")


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """Everything a training run needs; `to_dict` of it is recorded with every result."""

    model: str = "amvlstm_q"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    data: DataConfig = field(default_factory=DataConfig)
    embeddings: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
        return configs.from_dict(cls, data)

    def to_dict(self) -> dict[str, Any]:
        return configs.to_dict(self)

    def with_overrides(self, overrides: dict[str, Any]) -> ExperimentConfig:
        return configs.replace(self, overrides)


def load_experiment(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Reads a TOML experiment config; errors name the file and the offending key."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise configs.ConfigError(f"{path}: invalid TOML: {e}") from e
    try:
        exp = ExperimentConfig.from_dict(configs.merge(data, overrides or {}))
    except configs.ConfigError as e:
        raise configs.ConfigError(f"{path}: {e}") from e
    return exp
