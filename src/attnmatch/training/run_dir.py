"""The run directory: what a training run writes, and how it is resumed or reused.

    <run>/model/            the model kept: the dev-selected trained model (`Matcher.save`),
                            with metrics.json, or a floor that beats it on dev
                            (`attnmatch.training.keep`)
    <run>/trained-model/    the dev-selected trained model when a floor is kept in model/
    <run>/checkpoint/       the last epoch: model/ + optimizer.pt + trainer_state.json
    <run>/log.jsonl         one line per epoch
    <run>/test_items.json   the test split's per-item results (per query or pair)
    <run>/result.json       the final result: metrics, commit, environment, training time
    <run>/.lock             held by the process that runs in the folder (`RunDir.claim`)

A run that finished under the same experiment is reused from its result.json; an interrupted
one resumes from its checkpoint (only `train.epochs` may change in between, and never below the
epochs already done). What is reused is checked first: a damaged result.json, log.jsonl or
checkpoint, a missing model/ or weights that do not fit the experiment's model end in one line
that names the file.

One process at a time: `claim` holds an exclusive `fcntl.flock` on `<run>/.lock` for the whole
run (the kernel releases it when the process ends, however it ends), so a second run into the
folder, or an `--overwrite` of it, fails at once and names the holder's pid. Where `fcntl` is
missing (Windows) the folder is not locked and two runs into one folder are not detected.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open

from attnmatch import __version__, configs
from attnmatch.atomic import is_leftover, sweep_folder, write_error, write_text_atomic
from attnmatch.matcher import Matcher
from attnmatch.training.checkpoint import (
    STATE_FILE,
    load_checkpoint,
    read_json,
    save_checkpoint,
)
from attnmatch.training.config import ExperimentConfig

try:
    import fcntl
except ImportError:  # Windows: run folders are not locked (module docstring)
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"


class RunFolderInUse(OSError):
    """Another process is running in the run folder (it holds its lock)."""


@dataclass
class TrainState:
    """Where a run stands after `epoch` epochs (saved in every checkpoint).

    Attributes:
        epoch, step: epochs and optimiser steps done.
        best_score, best_epoch: the best dev primary metric so far and its epoch.
        bad_epochs: epochs since the last improvement (early stopping).
        history: one dict per epoch (train loss, dev metrics, time, pairs).
        wall_time_s: seconds spent by the run in earlier launches (when resumed).
        grad_scaler: fp16 training's loss scale (`torch.amp.GradScaler.state_dict`), so that
            a resumed run continues with it; None in fp32 and bf16 (absent from checkpoints
            made before it existed).
    """

    epoch: int = 0
    step: int = 0
    best_score: float | None = None
    best_epoch: int = 0
    bad_epochs: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0
    grad_scaler: dict[str, Any] | None = None

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
    # Which model model/ holds and why (`attnmatch.training.keep`); None: no floor compared.
    kept: dict[str, Any] | None = None
    # The process's peak resident memory when the run ended (`training.memory`; MB).
    peak_rss_mb: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["history"]
        out["output_dir"], out["model_dir"] = str(self.output_dir), str(self.model_dir)
        return out


def package_repository() -> Path | None:
    """The git repository this package runs from (its checkout's root), or None when the
    package is installed elsewhere (site-packages): provenance is read there only, never in
    the current folder, whose `.git/config` is the user's."""
    import attnmatch

    root = Path(attnmatch.__file__).resolve().parents[2]  # <root>/src/attnmatch/__init__.py
    if (root / "src" / "attnmatch").is_dir() and (root / ".git").exists():
        return root
    return None


# Git with the options that run commands (fsmonitor, hooks) off and no system or global config.
_GIT_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
             "-c", "core.untrackedCache=false", "--no-optional-locks")  # fmt: skip


def source_commit() -> str:
    """The commit of the package's own checkout, with "-dirty" when `src/` or `benchmarks/`
    differ from it; "unknown" outside a checkout (`package_repository`)."""
    root = package_repository()
    if root is None:
        return "unknown"
    env = os.environ | {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                        "GIT_CEILING_DIRECTORIES": str(root.parent), "GIT_OPTIONAL_LOCKS": "0"}  # fmt: skip
    env.pop("GIT_DIR", None), env.pop("GIT_WORK_TREE", None)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *_GIT_SAFE, *args],
            capture_output=True, text=True, timeout=5, check=False, env=env,
        ).stdout.strip()  # fmt: skip

    try:
        commit = git("rev-parse", "--short", "HEAD")
        # Only changes to code and table definitions make a result's commit "dirty".
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src", "benchmarks")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if commit and dirty:
        commit += "-dirty"
    return commit or "unknown"


@functools.cache
def process_commit() -> str:
    """`source_commit` read once per process, at its first run: the code a process runs is the
    code it imported, so every run of a long command (seeds, weights, table rows) records the
    same commit even when the checkout is edited while it trains."""
    return source_commit()


def environment() -> dict[str, Any]:
    """Versions, machine and the package's commit (`process_commit`), recorded with every
    result."""
    commit = process_commit()
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
        self.trained_model_dir = self.path / "trained-model"
        self.checkpoint_dir = self.path / "checkpoint"
        self.log_file = self.path / "log.jsonl"
        self.result_file = self.path / "result.json"
        self.lock_file = self.path / LOCK_FILE

    def is_run(self) -> bool:
        """Whether the folder holds what a run writes (result.json, log.jsonl, checkpoint/ or
        model/)."""
        return self.path.is_dir() and any(
            p.exists()
            for p in (self.result_file, self.log_file, self.checkpoint_dir, self.model_dir)
        )

    def is_empty(self) -> bool:
        """Whether the folder holds nothing but its lock file and leftovers of killed writes
        (swept when a run starts)."""
        return all(p.name == LOCK_FILE or is_leftover(p.name) for p in self.path.iterdir())

    def check_new(self, resume: bool, *, overwrite: bool = False) -> None:
        """Checks that a run may start here (`claim` deletes the previous run of `overwrite`).

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
        if not self.path.exists() or self.is_empty():
            return
        if overwrite:
            if not self.is_run():
                raise FileExistsError(
                    f"{self.path} is not a run folder (no result.json, log.jsonl, checkpoint/ "
                    "or model/): --overwrite replaces only run folders; choose another folder"
                )
        elif not resume:
            raise FileExistsError(
                f"{self.path} is not empty: continue the run there (--resume), replace it "
                "(--overwrite) or choose another folder"
            )

    @contextmanager
    def claim(self, resume: bool, *, overwrite: bool = False) -> Iterator[None]:
        """Holds the folder for a run: checks it (`check_new`), takes its lock, checks it again
        (another run may have written there meanwhile), deletes the previous run if
        `overwrite`, and sweeps the leftovers of killed writes.

        Raises:
            RunFolderInUse: another process holds the folder (its pid named when known).
            FileExistsError, ValueError: as `check_new`.
        """
        self.check_new(resume, overwrite=overwrite)  # before creating .lock in the folder
        with self._locked():
            self.check_new(resume, overwrite=overwrite)
            if overwrite:
                for entry in self.path.iterdir():
                    if entry.name == LOCK_FILE:
                        continue
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
            for folder in (self.path, self.model_dir, self.trained_model_dir, self.checkpoint_dir):
                sweep_folder(folder)
            yield

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise write_error(self.lock_file, e) from e
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.lseek(fd, 0, os.SEEK_SET)
                    holder = os.read(fd, 200).decode("utf-8", "replace").split()
                    who = f" (pid {holder[0]} on {holder[1]})" if len(holder) == 2 else ""
                    raise RunFolderInUse(
                        f"{self.path} is in use by another attnmatch run{who}: wait for it to "
                        "end, or choose another folder"
                    ) from None
            os.ftruncate(fd, 0)  # the holder, for the message of a second process
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
            yield
        finally:
            os.close(fd)  # releases the lock

    def finished(self, config: ExperimentConfig) -> TrainResult | None:
        """The result of a run that finished under the same experiment (same epochs too),
        read from result.json; None when there is none, or when train.epochs differs (the
        run then continues from its checkpoint).

        Raises:
            ValueError: result.json or log.jsonl is damaged, the experiment differs in
                anything but train.epochs (`check_resumable`), or model/ is missing.
        """
        if not self.result_file.exists():
            return None
        where = _RECOMPUTE.format(file=self.result_file.name)
        data = read_json(self.result_file, where)
        try:
            saved = data["metrics"]["experiment"]
            if not isinstance(saved, dict):
                raise TypeError
        except (KeyError, TypeError):
            raise ValueError(f"{self.result_file}: no metrics.experiment {where}") from None
        if not _is_model(self.model_dir):
            raise ValueError(
                f"cannot reuse the finished run in {self.path}: its model ({self.model_dir}) "
                "is missing or damaged; train again with --overwrite, or into another folder"
            )
        config = self._with_recipe(config)
        check_resumable(saved, config.to_dict())
        if saved.get("train", {}).get("epochs") != config.train.epochs:
            return None
        history = self.read_log()
        try:
            train_time = data.get("train_time_s")
            return TrainResult(
                output_dir=self.path,
                model_dir=self.model_dir,  # where it is now, even if the folder was moved
                best_epoch=int(data["best_epoch"]),
                dev=_metrics_or_none(data["dev"]),
                test=_metrics_or_none(data["test"]),
                history=history,
                wall_time_s=float(data["wall_time_s"]),
                train_time_s=float(
                    train_time
                    if train_time is not None
                    else sum(h["epoch_time_s"] for h in history)
                ),
                train_pairs_per_s=float(data["train_pairs_per_s"]),
                floors=data.get("floors"),
                kept=data.get("kept"),
                peak_rss_mb=data.get("peak_rss_mb"),
                commit=str(
                    data.get("commit", data["metrics"].get("environment", {}).get("commit", ""))
                ),
            )
        except KeyError as e:
            raise ValueError(f"{self.result_file}: no {e.args[0]!r} {where}") from None
        except (TypeError, ValueError) as e:
            raise ValueError(f"{self.result_file}: a field is invalid ({e}) {where}") from None

    def _with_recipe(self, config: ExperimentConfig) -> ExperimentConfig:
        """`config` as the run recorded it: with its preset's recipe for the task of the
        saved model (`experiment.with_recipe`), which the splits decide."""
        from attnmatch.tasks import Task
        from attnmatch.training.experiment import with_recipe

        try:
            header = json.loads((self.model_dir / "config.json").read_text(encoding="utf-8"))
            task = Task.from_dict(header["task"])
        except (OSError, ValueError, KeyError, TypeError):
            return config  # a model of the first format: compared as given
        return with_recipe(config, task)

    def read_log(self) -> list[dict[str, Any]]:
        """The epochs of log.jsonl, one dict each.

        Raises:
            ValueError: a line is not a JSON object (file and line named).
        """
        if not self.log_file.is_file():
            return []
        try:
            lines = self.log_file.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as e:
            raise ValueError(f"{self.log_file}: not UTF-8 text ({e.reason}) {_REWRITE}") from None
        out = []
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"{self.log_file}, line {i}: invalid JSON ({e.msg}) {_REWRITE}"
                ) from None
            if not isinstance(entry, dict):
                raise ValueError(f"{self.log_file}, line {i}: not a JSON object {_REWRITE}")
            out.append(entry)
        return out

    def resume(
        self, matcher: Matcher, optimizer: torch.optim.Optimizer | None, config: ExperimentConfig
    ) -> TrainState | None:
        """The state of the last checkpoint, with the model (and optimizer) restored; None
        when there is no checkpoint.

        Raises:
            FileNotFoundError: a file of the checkpoint is missing (named).
            ValueError: a file of the checkpoint is damaged or does not fit the experiment
                (named), the experiment changed (`check_resumable`), or the best model so far
                (model/) is missing.
        """
        if not self.checkpoint_dir.exists():
            return None
        state_file = self.checkpoint_dir / STATE_FILE
        if state_file.is_file():  # the config is compared before the weights are loaded
            experiment = read_json(state_file, _DAMAGED).get("experiment")
            if not isinstance(experiment, dict):
                raise ValueError(f"{state_file}: no experiment config {_DAMAGED}")
            check_resumable(experiment, config.to_dict())
        optim_state, saved = load_checkpoint(self.checkpoint_dir, matcher.model)
        state = _train_state(saved, state_file)
        if state.best_epoch > 0 and not _is_model(self.model_dir):
            raise ValueError(
                f"cannot resume {self.path}: its best model so far (epoch {state.best_epoch}, "
                f"{self.model_dir}) is missing or damaged; train again with --overwrite, or "
                "into another folder"
            )
        if optimizer is not None:
            try:
                optimizer.load_state_dict(optim_state)
            except (ValueError, KeyError, TypeError, RuntimeError) as e:
                reason = " ".join(str(e).split())
                raise ValueError(
                    f"{self.checkpoint_dir / 'optimizer.pt'}: does not fit the experiment's "
                    f"optimizer ({reason}) {_DAMAGED}"
                ) from None
        return state

    def save_checkpoint(
        self,
        matcher: Matcher,
        optimizer: torch.optim.Optimizer,
        state: TrainState,
        config: ExperimentConfig,
    ) -> None:
        data = asdict(state) | {"experiment": config.to_dict()}
        save_checkpoint(self.checkpoint_dir, matcher=matcher, optimizer=optimizer, state=data)
        self.write_log(state.history)

    def write_log(self, history: list[dict[str, Any]]) -> None:
        write_text_atomic(self.log_file, "".join(json.dumps(h) + "\n" for h in history))

    def restore_trained(self) -> None:
        """The trained model back in model/ when a floor was kept there (or a kill came
        between the two moves of `keep_floor`): a resumed run trains on and chooses again."""
        if not self.trained_model_dir.is_dir():
            return
        if self.model_dir.exists():
            shutil.rmtree(self.model_dir)
        os.replace(self.trained_model_dir, self.model_dir)

    def keep_floor(self, staged: Path) -> None:
        """The model folder `staged` (in the run folder) becomes model/, the trained model
        trained-model/. A kill between the two moves leaves trained-model/ and no model/,
        which `restore_trained` puts back when the run resumes."""
        if self.trained_model_dir.exists():
            shutil.rmtree(self.trained_model_dir)
        os.replace(self.model_dir, self.trained_model_dir)
        os.replace(staged, self.model_dir)

    def save_best(self, matcher: Matcher, dev: dict[str, float] | None) -> None:
        matcher.save(self.model_dir, metrics={"dev": dev})

    def items_file(self, split: str) -> Path:
        """<run>/<split>_items.json: the split's per-item results (`evaluation.report_items`)."""
        return self.path / f"{split}_items.json"

    def write_items(self, split: str, items: dict[str, Any]) -> None:
        write_text_atomic(self.items_file(split), json.dumps(items) + "\n")

    def write_result(self, result: TrainResult, metrics: dict[str, Any]) -> None:
        """Writes the trained model's metrics.json (in trained-model/ when a floor was kept in
        model/: the floor's folder has its own), log.jsonl (complete even if a kill came
        between the last checkpoint and its log) and, last, result.json."""
        from attnmatch.model_dir import write_metrics

        trained = self.trained_model_dir if self.trained_model_dir.is_dir() else self.model_dir
        write_metrics(trained, metrics)
        self.write_log(result.history)
        write_text_atomic(
            self.result_file, json.dumps(result.to_dict() | {"metrics": metrics}, indent=2) + "\n"
        )


_RECOMPUTE = (
    "(the run's result is damaged: delete {file} and resume to compute it again from the "
    "checkpoint, or train again with --overwrite)"
)
_REWRITE = (
    "(the run's epoch log is damaged: delete it and result.json, and resume to write both "
    "again from the checkpoint)"
)
_DAMAGED = "(the checkpoint is damaged: train again with --overwrite, or into another folder)"


def _is_model(path: Path) -> bool:
    """Whether `path` holds a model directory whose weights file opens (its header read)."""
    if not (path / "config.json").is_file():
        return False
    try:
        with safe_open(str(path / "model.safetensors"), framework="pt") as f:
            f.keys()
    except Exception:  # missing, or damaged: safetensors raises its own error types
        return False
    return True


def _metrics_or_none(value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"metrics must be an object, got {type(value).__name__}")
    return value


_ADDED_STATE = frozenset({"grad_scaler"})  # TrainState fields that older checkpoints lack


def _train_state(saved: dict[str, Any], state_file: Path) -> TrainState:
    """The TrainState of a checkpoint's trainer_state.json, every field checked."""
    known = {f.name: f for f in fields(TrainState)}
    unknown = sorted(set(saved) - set(known) - {"experiment"})
    if unknown:
        raise ValueError(f"{state_file}: unknown field(s) {unknown} {_DAMAGED}")
    kinds: dict[str, tuple[type, ...]] = {
        "epoch": (int,),
        "step": (int,),
        "best_score": (int, float, type(None)),
        "best_epoch": (int,),
        "bad_epochs": (int,),
        "history": (list,),
        "wall_time_s": (int, float),
        "grad_scaler": (dict, type(None)),
    }
    values: dict[str, Any] = {}
    for name in known:
        if name not in saved and name in _ADDED_STATE:
            continue  # a checkpoint made before the field existed: its default
        if name not in saved:
            raise ValueError(f"{state_file}: no field {name!r} {_DAMAGED}")
        value = saved[name]
        if isinstance(value, bool) or not isinstance(value, kinds[name]):
            raise ValueError(
                f"{state_file}: field {name!r} is a {type(value).__name__}, not a "
                f"{kinds[name][0].__name__} {_DAMAGED}"
            )
        values[name] = value
    state = TrainState(**values)
    if state.epoch < 0 or not 0 <= state.best_epoch <= state.epoch or state.bad_epochs < 0:
        raise ValueError(
            f"{state_file}: inconsistent epochs (epoch {state.epoch}, best_epoch "
            f"{state.best_epoch}, bad_epochs {state.bad_epochs}) {_DAMAGED}"
        )
    if len(state.history) != state.epoch or not all(isinstance(h, dict) for h in state.history):
        raise ValueError(
            f"{state_file}: the history has {len(state.history)} entries for {state.epoch} "
            f"epochs {_DAMAGED}"
        )
    return state


_MAY_CHANGE = frozenset({"train.epochs", "train.device", "train.max_memory"})


def check_resumable(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Refuse to resume under a different experiment, except for train.epochs and
    train.device (where it runs: a run started on a GPU may continue on the CPU). A key the
    saved config lacks (a field added to the config since that run) counts as its default,
    which keeps the earlier behaviour."""
    if "embeddings" in saved:  # input settings in [embeddings] and [data]: before [inputs]
        raise ValueError(
            "cannot resume: the run was made by an earlier attnmatch whose experiment config "
            "kept input settings in [embeddings] and [data] (now [inputs]); its model/ still "
            "loads, but the run cannot continue: train it again in a new folder"
        )
    a, b = configs.flatten(saved), configs.flatten(current)
    defaults = configs.flatten(ExperimentConfig().to_dict())
    changed = sorted(
        k for k in set(a) | set(b) if a.get(k, defaults.get(k)) != b.get(k) and k not in _MAY_CHANGE
    )
    if changed:
        raise ValueError(
            f"cannot resume: the experiment config changed ({', '.join(changed)}); "
            "only train.epochs may change (and train.device, train.max_memory)"
        )
