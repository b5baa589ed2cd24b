"""Experiment trackers of a training run: `attnmatch train --log mlflow|wandb|tensorboard`.

Each tracker is an `on_epoch` callback (`loop.fit` calls it after each epoch's checkpoint) that
records the epoch's `train/loss`, `train/pairs_per_s` and every dev metric as `dev/<metric>` at
step = epoch, and the run's flattened config (`configs.flatten`) once as its parameters. Several
may be given; each package is imported only here, only when asked for (the `mlflow`, `wandb`
and `tensorboard` extras).

- **tensorboard**: RUN/tensorboard/ (`attnmatch.training.tensorboard`).
- **mlflow**: the tracking server or store of `MLFLOW_TRACKING_URI` when set, else a file store
  in RUN/mlruns/ (`mlflow ui --backend-store-uri RUN/mlruns`); experiment `MLFLOW_EXPERIMENT_NAME`
  or "attnmatch", the run named after the run folder. MLflow allows no `@` in a metric name:
  `dev/ndcg@10` is logged as `dev/ndcg_at_10`. The run ends FINISHED, or FAILED when training
  raised.
- **wandb**: Weights & Biases, project `WANDB_PROJECT` or "attnmatch", files under RUN/wandb/;
  `WANDB_MODE=offline` records without a network (`wandb sync` uploads later).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attnmatch import configs
from attnmatch.training.loop import EpochCallback

TRACKERS = ("tensorboard", "mlflow", "wandb")
_PACKAGES = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}
MLFLOW_BATCH = 100  # params per log_batch call (MLflow's limit)
MLFLOW_PARAM_CHARS = 500


def install_hint(name: str) -> str:
    return f"--log {name} needs the {_PACKAGES[name]} package: pip install 'attnmatch[{name}]'"


def check_installed(names: Sequence[str]) -> None:
    """Raises ImportError, with the command that installs it, for the first tracker whose
    package is missing; ValueError for an unknown tracker."""
    for name in names:
        if name not in TRACKERS:
            raise ValueError(f"--log {name}: unknown tracker; choose {', '.join(TRACKERS)}")
        if importlib.util.find_spec(_PACKAGES[name]) is None:
            raise ImportError(install_hint(name), name=_PACKAGES[name])


def epoch_scalars(entry: dict[str, Any]) -> dict[str, float]:
    """An epoch's log entry as {tag: value}: train/loss, train/pairs_per_s, dev/<metric>."""
    scalars = {
        "train/loss": entry.get("train_loss"),
        "train/pairs_per_s": entry.get("train_pairs_per_s"),
    }
    for name, value in (entry.get("dev") or {}).items():
        scalars[f"dev/{name}"] = value
    return {
        tag: float(value)
        for tag, value in scalars.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


class MLflowLog:
    """An `on_epoch` callback logging to one MLflow run (see the module docstring)."""

    def __init__(self, run_path: Path, config: dict[str, Any]) -> None:
        try:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError as e:
            raise ImportError(install_hint("mlflow"), name="mlflow") from e
        uri = (
            os.environ.get("MLFLOW_TRACKING_URI") or (Path(run_path) / "mlruns").resolve().as_uri()
        )
        # MLflow keeps its file store but asks to opt in; the run folder's own store is ours.
        with _environment("MLFLOW_ALLOW_FILE_STORE", "true" if uri.startswith("file:") else None):
            self.client = MlflowClient(tracking_uri=uri)
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "attnmatch"
            found = self.client.get_experiment_by_name(name)
            experiment = found.experiment_id if found else self.client.create_experiment(name)
        self.run_id = self.client.create_run(experiment, run_name=Path(run_path).name).info.run_id
        params = [Param(k, str(v)[:MLFLOW_PARAM_CHARS]) for k, v in configs.flatten(config).items()]
        for start in range(0, len(params), MLFLOW_BATCH):
            self.client.log_batch(self.run_id, params=params[start : start + MLFLOW_BATCH])

    def __call__(self, entry: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        step, now = int(entry["epoch"]), _milliseconds()
        metrics = [
            Metric(tag.replace("@", "_at_"), value, now, step)
            for tag, value in epoch_scalars(entry).items()
        ]
        self.client.log_batch(self.run_id, metrics=metrics)

    def close(self, failed: bool) -> None:
        self.client.set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")


class WandbLog:
    """An `on_epoch` callback logging to one Weights & Biases run (see the module docstring)."""

    def __init__(self, run_path: Path, config: dict[str, Any]) -> None:
        try:
            import wandb
        except ImportError as e:
            raise ImportError(install_hint("wandb"), name="wandb") from e
        Path(run_path).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or "attnmatch",
            dir=str(run_path),
            name=Path(run_path).name,
            config=configs.flatten(config),
            reinit="create_new",
        )

    def __call__(self, entry: dict[str, Any]) -> None:
        self.run.log(epoch_scalars(entry), step=int(entry["epoch"]))

    def close(self, failed: bool) -> None:
        self.run.finish(exit_code=1 if failed else 0)


@contextmanager
def epoch_logs(
    names: Sequence[str],
    run_path: Path,
    config: dict[str, Any],
    then: EpochCallback | None = None,
) -> Iterator[EpochCallback | None]:
    """The `on_epoch` callback that logs an epoch to each tracker of `names` and then calls
    `then`; the trackers' runs are closed on leaving (failed when an exception leaves).

    Args:
        names: trackers among `TRACKERS` (repeats ignored).
        run_path: the run folder.
        config: the experiment config (`ExperimentConfig.to_dict()`), logged as parameters.
    """
    if not names:
        yield then
        return
    from attnmatch.training.tensorboard import with_tensorboard

    logs: list[EpochCallback] = []
    runs: list[MLflowLog | WandbLog] = []  # closed on leaving, last opened first

    def on_epoch(entry: dict[str, Any]) -> None:
        for log in logs:
            log(entry)
        if then is not None:
            then(entry)

    try:
        for name in dict.fromkeys(names):
            if name == "tensorboard":
                logs.append(with_tensorboard(run_path))
                continue
            run = MLflowLog(run_path, config) if name == "mlflow" else WandbLog(run_path, config)
            runs.append(run)
            logs.append(run)
        yield on_epoch
    except BaseException:
        for run in reversed(runs):
            run.close(failed=True)
        raise
    for run in reversed(runs):
        run.close(failed=False)


@contextmanager
def _environment(key: str, value: str | None) -> Iterator[None]:
    """`os.environ[key] = value` inside (nothing when value is None or the key is set)."""
    if value is None or key in os.environ:
        yield
        return
    os.environ[key] = value
    try:
        yield
    finally:
        os.environ.pop(key, None)


def _milliseconds() -> int:
    import time

    return int(time.time() * 1000)
