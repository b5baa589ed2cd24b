"""The run directory: what a training run writes, and how it is resumed or reused.

    <run>/model/            the dev-selected model directory (`Matcher.save`), with metrics.json
    <run>/checkpoint/       the last epoch: model/ + optimizer.pt + trainer_state.json
    <run>/log.jsonl         one line per epoch
    <run>/result.json       the final result: metrics, commit, environment, training time

A run that finished under the same experiment is reused from its result.json; an interrupted
one resumes from its checkpoint (only `train.epochs` may change in between).
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmatch import __version__
from attnmatch.atomic import write_text_atomic
from attnmatch.matcher import Matcher
from attnmatch.training.checkpoint import load_checkpoint, save_checkpoint
from attnmatch.training.config import ExperimentConfig


@dataclass
class TrainState:
    """Where a run stands after `epoch` epochs (saved in every checkpoint).

    Attributes:
        epoch, step: epochs and optimiser steps done.
        best_score, best_epoch: the best dev primary metric so far and its epoch.
        bad_epochs: epochs since the last improvement (early stopping).
        history: one dict per epoch (train loss, dev metrics, time, pairs).
        wall_time_s: seconds spent by the run in earlier launches (when resumed).
    """

    epoch: int = 0
    step: int = 0
    best_score: float | None = None
    best_epoch: int = 0
    bad_epochs: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0

    @property
    def train_time_s(self) -> float:
        """Seconds spent in training epochs, over every launch of the run (the first and each resume)."""
        return round(sum(h["epoch_time_s"] for h in self.history), 3)

    @property
    def train_pairs_per_s(self) -> float:
        pairs = sum(h["train_pairs"] for h in self.history)
        return round(pairs / self.train_time_s, 1) if self.train_time_s else 0.0


@dataclass
class TrainResult:
    """What `train` returns (and writes to result.json)."""

    output_dir: Path
    model_dir: Path
    best_epoch: int
    dev: dict[str, float] | None
    test: dict[str, float] | None
    history: list[dict[str, Any]]
    wall_time_s: float
    train_time_s: float
    train_pairs_per_s: float
    commit: str
    floors: dict[str, dict[str, dict[str, float]]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["history"]
        out["output_dir"], out["model_dir"] = str(self.output_dir), str(self.model_dir)
        return out


def environment() -> dict[str, Any]:
    """Versions, machine and git commit recorded with every result."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
        # Only changes to code and table definitions make a result's commit "dirty".
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "src", "benchmarks"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
        if commit and dirty:
            commit += "-dirty"
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "commit": commit or "unknown",
        "attnmatch": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "threads": torch.get_num_threads(),
    }


class RunDir:
    """The folder of one training run (layout in the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.model_dir = self.path / "model"
        self.checkpoint_dir = self.path / "checkpoint"
        self.log_file = self.path / "log.jsonl"
        self.result_file = self.path / "result.json"

    def is_run(self) -> bool:
        """Whether the folder holds what a run writes (result.json, log.jsonl, checkpoint/ or
        model/)."""
        return self.path.is_dir() and any(
            p.exists()
            for p in (self.result_file, self.log_file, self.checkpoint_dir, self.model_dir)
        )

    def check_new(self, resume: bool, *, overwrite: bool = False) -> None:
        """Checks that a run may start here; with `overwrite`, deletes the previous run first.

        Raises:
            FileExistsError: the folder is not empty and neither `resume` nor `overwrite` is
                set, or `overwrite` is set and the folder is not a run folder (it is never
                deleted then).
            ValueError: both `resume` and `overwrite` are set.
        """
        if resume and overwrite:
            raise ValueError("--resume and --overwrite exclude each other: choose one")
        if self.path.exists() and not self.path.is_dir():
            raise FileExistsError(f"{self.path} is a file, not a run folder: choose another path")
        if not self.path.exists() or not any(self.path.iterdir()):
            return
        if overwrite:
            if not self.is_run():
                raise FileExistsError(
                    f"{self.path} is not a run folder (no result.json, log.jsonl, checkpoint/ "
                    "or model/): --overwrite replaces only run folders; choose another folder"
                )
            shutil.rmtree(self.path)
        elif not resume:
            raise FileExistsError(
                f"{self.path} is not empty: continue the run there (--resume), replace it "
                "(--overwrite) or choose another folder"
            )

    def finished(self, config: ExperimentConfig) -> TrainResult | None:
        """The result of a run that finished under the same experiment (same epochs too),
        read from result.json; None when there is none or anything differs."""
        try:
            data = json.loads(self.result_file.read_text(encoding="utf-8"))
            saved = data["metrics"]["experiment"]
            check_resumable(saved, config.to_dict())
            if saved.get("train", {}).get("epochs") != config.train.epochs:
                return None
            history = self.read_log()
            train_time = data.get("train_time_s")
            return TrainResult(
                output_dir=self.path,
                model_dir=Path(data["model_dir"]),
                best_epoch=int(data["best_epoch"]),
                dev=data["dev"],
                test=data["test"],
                history=history,
                wall_time_s=float(data["wall_time_s"]),
                train_time_s=float(
                    train_time
                    if train_time is not None
                    else sum(h["epoch_time_s"] for h in history)
                ),
                train_pairs_per_s=float(data["train_pairs_per_s"]),
                floors=data.get("floors"),
                commit=str(
                    data.get("commit", data["metrics"].get("environment", {}).get("commit", ""))
                ),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def read_log(self) -> list[dict[str, Any]]:
        if not self.log_file.is_file():
            return []
        lines = self.log_file.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def resume(
        self, matcher: Matcher, optimizer: torch.optim.Optimizer | None, config: ExperimentConfig
    ) -> TrainState | None:
        """The state of the last checkpoint, with the model (and optimizer) restored; None
        when there is no checkpoint."""
        if not self.checkpoint_dir.exists():
            return None
        optim_state, saved = load_checkpoint(self.checkpoint_dir, matcher.model)
        check_resumable(saved["experiment"], config.to_dict())
        if optimizer is not None:
            optimizer.load_state_dict(optim_state)
        fields = {k: v for k, v in saved.items() if k != "experiment"}
        return TrainState(**fields)

    def save_checkpoint(
        self,
        matcher: Matcher,
        optimizer: torch.optim.Optimizer,
        state: TrainState,
        config: ExperimentConfig,
    ) -> None:
        data = asdict(state) | {"experiment": config.to_dict()}
        save_checkpoint(self.checkpoint_dir, matcher=matcher, optimizer=optimizer, state=data)
        write_text_atomic(self.log_file, "".join(json.dumps(h) + "\n" for h in state.history))

    def save_best(self, matcher: Matcher, dev: dict[str, float] | None) -> None:
        matcher.save(self.model_dir, metrics={"dev": dev})

    def write_result(self, result: TrainResult, metrics: dict[str, Any]) -> None:
        from attnmatch.model_dir import write_metrics

        write_metrics(self.model_dir, metrics)
        write_text_atomic(
            self.result_file, json.dumps(result.to_dict() | {"metrics": metrics}, indent=2) + "\n"
        )


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def check_resumable(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Refuse to resume under a different experiment, except for train.epochs. A key the saved
    config lacks (a field added to the config since that run) counts as its default, which keeps
    the earlier behaviour."""
    if "embeddings" in saved:  # input settings in [embeddings] and [data]: before [inputs]
        raise ValueError(
            "cannot resume: the run was made by an earlier attnmatch whose experiment config "
            "kept input settings in [embeddings] and [data] (now [inputs]); its model/ still "
            "loads, but the run cannot continue: train it again in a new folder"
        )
    a, b = _flatten(saved), _flatten(current)
    defaults = _flatten(ExperimentConfig().to_dict())
    changed = sorted(
        k for k in set(a) | set(b) if a.get(k, defaults.get(k)) != b.get(k) and k != "train.epochs"
    )
    if changed:
        raise ValueError(
            f"cannot resume: the experiment config changed ({', '.join(changed)}); "
            "only train.epochs may change"
        )
