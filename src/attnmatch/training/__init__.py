"""Training: experiment configs, building an experiment, the fit loop and the run directory."""

from attnmatch.training.config import DataConfig, ExperimentConfig, TrainConfig
from attnmatch.training.experiment import Experiment, build_experiment
from attnmatch.training.run_dir import RunFolderInUse, TrainResult, TrainState
from attnmatch.training.trainer import train, train_seeds

__all__ = [
    "DataConfig",
    "Experiment",
    "ExperimentConfig",
    "RunFolderInUse",
    "TrainConfig",
    "TrainResult",
    "TrainState",
    "build_experiment",
    "train",
    "train_seeds",
]
