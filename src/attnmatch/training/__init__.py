"""Training: experiment configs, the trainer and checkpoints."""

from attnmatch.training.config import DataConfig, EmbeddingConfig, ExperimentConfig, TrainConfig
from attnmatch.training.trainer import TrainResult, prepare, train, train_seeds

__all__ = [
    "DataConfig",
    "EmbeddingConfig",
    "ExperimentConfig",
    "TrainConfig",
    "TrainResult",
    "prepare",
    "train",
    "train_seeds",
]
