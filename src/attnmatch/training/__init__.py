"""Training: experiment configs, building an experiment, the fit loop and the run directory;
`fit` and `distill` train a `Matcher` from Python.

`distill` is the function (`attnmatch.training.api`); its machinery is the module
`attnmatch.training.distillation`."""

from attnmatch.training.api import distill, fit
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
    "distill",
    "fit",
    "train",
    "train_seeds",
]
