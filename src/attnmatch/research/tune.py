"""Hyper-parameter search on dev with Optuna: `attnmatch tune CONFIG --trials N -o RUN`.

The search space is a `[tune]` table in the experiment TOML (the rest of the file is the
experiment every trial starts from; `attnmatch train` refuses a file with `[tune]`, and trains
the search's `RUN/best.toml`)::

    model = "amvlstm_q"
    [data]
    dataset = "wikiqa"
    [train]
    epochs = 20
    [tune]
    seed = 1                  # the TPE sampler's seed (default 1)
    pruner = "median"         # "median" (MedianPruner on per-epoch dev values) or "none"
    startup_trials = 5        # trials before pruning starts
    warmup_epochs = 3         # epochs of a trial before it may be pruned
    [tune.params]             # dotted keys of the experiment config
    "train.lr" = { type = "float", low = 1e-4, high = 1e-2, log = true }
    "model_overrides.hidden_size" = { type = "int", low = 25, high = 100, step = 25 }
    "train.batch_size" = { type = "categorical", choices = [16, 32, 64] }

A parameter is `float` (low, high, optional `log` or `step`), `int` (low, high, optional `log`
or `step`) or `categorical` (choices: numbers, strings or booleans). Keys name fields of
`[train]`, `[inputs]`, `model_overrides` (the model config's fields) or `overlap_features`;
`[data]` is never searched (the search selects on one dev split).

The objective is the dev split's selection metric (`train.select_metric`, else the dev
protocol's primary metric), maximised or minimised as `attnmatch.metrics.greater_is_better`
says: the value of the epoch each trial's run selects. Trials never load the test split (their
`data.test_split` is None) and skip the no-training floors. Each trial is a normal run of
`attnmatch.training.train` in RUN/trial-NNN/, reporting its dev value after every evaluation to
a MedianPruner.

The study lives in RUN/study.db (SQLite). `--resume` continues it until it has N trials
(complete, pruned or failed); a trial that was running when the search was killed is marked
failed, is not counted, and its parameters are tried again first. A trial that raises (a bad
combination of values) is recorded as failed with its error and the search goes on. `--jobs J`
runs J processes sharing the study, each with `threads` torch threads.

At the end: RUN/best.toml (the experiment with the best parameters, test split and floors as in
CONFIG: ready for `attnmatch train`), RUN/tune.json (every trial's parameters, state, value and
dev curve, and the best), RUN/history.png and RUN/importances.png (Optuna's matplotlib plots;
importances need two complete trials).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console

from attnmatch import configs
from attnmatch.atomic import file_lock, write_bytes_atomic, write_text_atomic
from attnmatch.configs import ConfigError
from attnmatch.metrics import greater_is_better
from attnmatch.terminal import visible
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.run_dir import RunFolderInUse

if TYPE_CHECKING:
    import optuna

STUDY_FILE = "study.db"
STUDY_NAME = "attnmatch"
LOCKS = (".lock", ".ask.lock")  # the search's, and the one its processes ask for trials under
INSTALL_HINT = "pip install 'attnmatch[tune]'"
SEARCHED_SECTIONS = ("train", "inputs", "model_overrides", "overlap_features")

ParamKind = Literal["float", "int", "categorical"]


@dataclass(frozen=True, kw_only=True)
class Param:
    """One searched value: `key` is a dotted path of the experiment config."""

    key: str
    kind: ParamKind
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: optuna.Trial) -> Any:
        """The trial's value of this parameter (sampled, or fixed by an enqueued retry)."""
        if self.kind == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        assert self.low is not None and self.high is not None
        if self.kind == "int":
            step = 1 if self.step is None else int(self.step)
            return trial.suggest_int(
                self.key, int(self.low), int(self.high), step=step, log=self.log
            )
        return trial.suggest_float(self.key, self.low, self.high, step=self.step, log=self.log)

    def examples(self) -> list[Any]:
        """Values that span the parameter's range (checked against the config up front)."""
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "int":
            return [int(self.low or 0), int(self.high or 0)]
        return [self.low, self.high]


@dataclass(frozen=True, kw_only=True)
class TuneSpec:
    """The `[tune]` table: the space and how it is searched.

    Args:
        params: the searched values.
        seed: the TPE sampler's seed.
        pruner: "median" (stop a trial whose dev value is below the median of earlier trials
            at the same epoch) or "none".
        startup_trials: complete trials before the pruner acts (and TPE's random start).
        warmup_epochs: epochs of each trial before it may be pruned.
    """

    params: tuple[Param, ...]
    seed: int = 1
    pruner: Literal["median", "none"] = "median"
    startup_trials: int = 5
    warmup_epochs: int = 3

    def to_dict(self) -> dict[str, Any]:
        return configs.to_dict(self)


@dataclass
class TuneResult:
    """What a search wrote: the folder, the best trial (None when none completed), all trials."""

    output_dir: Path
    metric: str
    direction: str
    best: dict[str, Any] | None
    trials: list[dict[str, Any]] = field(default_factory=list)
    best_config: Path | None = None
    plots: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ---- the space ------------------------------------------------------------------------------


_SPEC_KEYS = {
    "float": {"type", "low", "high", "log", "step"},
    "int": {"type", "low", "high", "log", "step"},
    "categorical": {"type", "choices"},
}
_TUNE_KEYS = ("params", "seed", "pruner", "startup_trials", "warmup_epochs")


def parse_param(key: str, spec: Any) -> Param:
    """One `[tune.params]` entry.

    Raises:
        ConfigError: naming `tune.params.<key>`: a missing or unknown field, bounds that are
            not numbers or not ordered, `log` with a bound <= 0 or with `step`, no choices.
    """
    where = f"tune.params.{key}"
    if not isinstance(spec, dict):
        raise ConfigError(
            f'{where}: expected a table such as {{ type = "float", low = 1e-4, high = 1e-2 }}, '
            f"got {spec!r}"
        )
    kind = spec.get("type")
    if kind not in _SPEC_KEYS:
        raise ConfigError(f"{where}.type: {kind!r} is not one of ['float', 'int', 'categorical']")
    unknown = sorted(set(spec) - _SPEC_KEYS[kind])
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(unknown)} for type {kind!r}; valid: "
            f"{', '.join(sorted(_SPEC_KEYS[kind]))}"
        )
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f"{where}.choices: give a non-empty list of values")
        for value in choices:
            if not isinstance(value, bool | int | float | str) or (
                isinstance(value, float) and not math.isfinite(value)
            ):
                raise ConfigError(f"{where}.choices: {value!r} is not a number, string or boolean")
        if len(set(map(repr, choices))) != len(choices):
            raise ConfigError(f"{where}.choices: a value is given twice")
        return Param(key=key, kind="categorical", choices=tuple(choices))
    number = int if kind == "int" else (int, float)
    bounds = {}
    for name in ("low", "high"):
        value = spec.get(name)
        if value is None:
            raise ConfigError(f"{where}: no {name} (a {kind} needs low and high)")
        if isinstance(value, bool) or not isinstance(value, number) or not math.isfinite(value):
            raise ConfigError(
                f"{where}.{name}: expected {'an integer' if kind == 'int' else 'a number'}, got {value!r}"
            )
        bounds[name] = value
    low, high = bounds["low"], bounds["high"]
    if not low < high:
        raise ConfigError(f"{where}: low ({low}) must be below high ({high})")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{where}.log: expected true or false, got {log!r}")
    step = spec.get("step")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, number) or not step > 0:
            raise ConfigError(f"{where}.step: expected a number > 0, got {step!r}")
        if log:
            raise ConfigError(f"{where}: log and step exclude each other (Optuna): choose one")
    if log and low <= 0:
        raise ConfigError(f"{where}: log = true needs low > 0, got {low}")
    return Param(key=key, kind=kind, low=low, high=high, log=log, step=step)


def _flatten_params(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"train": {"lr": {...}}}` (TOML's dotted keys) or `{"train.lr": {...}}` -> flat keys;
    a table with a field of a parameter (`type`, `low`, `choices` ...) is a parameter."""
    fields = set().union(*_SPEC_KEYS.values())
    flat: dict[str, Any] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict) and value and not fields & set(value):
            flat.update(_flatten_params(value, f"{key}."))
        else:
            flat[key] = value
    return flat


def parse_space(table: Any) -> TuneSpec:
    """The `[tune]` table as a `TuneSpec` (the keys are checked against a config by
    `check_space`).

    Raises:
        ConfigError: naming the key: an unknown `[tune]` key, no params, a bad parameter.
    """
    if not isinstance(table, dict):
        raise ConfigError(f"tune: expected a table, got {type(table).__name__}")
    unknown = sorted(set(table) - set(_TUNE_KEYS))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join('tune.' + k for k in unknown)}; valid: "
            f"{', '.join(_TUNE_KEYS)}"
        )
    raw = table.get("params")
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(
            "tune.params: no parameters to search; add e.g. "
            '"train.lr" = { type = "float", low = 1e-4, high = 1e-2, log = true }'
        )
    params = tuple(parse_param(key, spec) for key, spec in _flatten_params(raw).items())
    rest = {k: v for k, v in table.items() if k != "params"}
    settings = configs.from_dict(_Settings, rest, path="tune")
    return TuneSpec(params=params, **dataclasses.asdict(settings))


@dataclass(frozen=True, kw_only=True)
class _Settings:
    seed: int = 1
    pruner: Literal["median", "none"] = "median"
    startup_trials: int = 5
    warmup_epochs: int = 3

    def __post_init__(self) -> None:
        for name in ("seed", "startup_trials", "warmup_epochs"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must be >= 0, got {getattr(self, name)}")


def check_space(config: ExperimentConfig, spec: TuneSpec) -> None:
    """Checks every parameter's key and range against `config`: the key is a field of the
    experiment (of the model's config for `model_overrides.*`) and its bounds or choices are
    valid values there.

    Raises:
        ConfigError: naming `tune.params.<key>` and why.
    """
    from attnmatch.models import get_model_entry, model_type_of

    model_fields = {
        f.name for f in dataclasses.fields(get_model_entry(model_type_of(config.model)).config_cls)
    } - {"encoder", "num_outputs"}
    for param in spec.params:
        where = f"tune.params.{param.key}"
        section, _, rest = param.key.partition(".")
        if section not in SEARCHED_SECTIONS:
            raise ConfigError(
                f"{where}: {section!r} is not searched; keys start with "
                f"{', '.join(s + '.' for s in SEARCHED_SECTIONS[:3])} or are overlap_features"
                + (" (the search selects on one dev split)" if section == "data" else "")
            )
        if (section == "overlap_features") != (rest == ""):
            raise ConfigError(f"{where}: not a key of the experiment config")
        if section == "model_overrides" and rest.split(".")[0] not in model_fields:
            raise ConfigError(
                f"{where}: {config.model!r} has no setting {rest.split('.')[0]!r}; its settings: "
                f"{', '.join(sorted(model_fields))}"
            )
        for value in param.examples():
            try:
                apply_params(config, {param.key: value})
            except ConfigError as e:
                if str(e).startswith("unknown config key"):
                    raise ConfigError(f"{where}: not a key of the experiment config: {e}") from None
                raise ConfigError(f"{where}: the value {value!r} does not fit: {e}") from None


def nested(params: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys as nested tables: {"train.lr": 0.01} -> {"train": {"lr": 0.01}}."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def apply_params(config: ExperimentConfig, params: dict[str, Any]) -> ExperimentConfig:
    """`config` with dotted `params` set (e.g. {"train.lr": 0.01}), validated strictly.

    Raises:
        ConfigError: an unknown key or a bad value, naming its path.
    """
    overrides = nested(params)
    if "inputs" in overrides and config.inputs is None:  # on top of the model's own inputs
        config = dataclasses.replace(config, inputs=config.resolved_inputs())
    return config.with_overrides(overrides)


def load_tune_config(path: str | Path) -> tuple[ExperimentConfig, TuneSpec]:
    """The experiment and the `[tune]` table of a TOML file.

    Raises:
        ConfigError: the file has no `[tune]` table, or a key of it or of the experiment is
            wrong (the file and the key named).
    """
    path = Path(path)
    data = configs.load_toml(path)
    if "tune" not in data:
        raise ConfigError(
            f"{path}: no [tune] table: add the search space, e.g. [tune.params] "
            '"train.lr" = { type = "float", low = 1e-4, high = 1e-2, log = true }'
        )
    try:
        spec = parse_space(data.pop("tune"))
        config = ExperimentConfig.from_dict(data)
        check_space(config, spec)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    return config, spec


# ---- the search -----------------------------------------------------------------------------


def trial_base(config: ExperimentConfig, threads: int) -> ExperimentConfig:
    """What every trial trains: `config` without its test split and floors, on `threads`
    torch threads (unless the config sets its own)."""
    data = dataclasses.replace(config.data, test_split=None)
    train = dataclasses.replace(
        config.train, floors="none", threads=config.train.threads or threads
    )
    return dataclasses.replace(config, data=data, train=train)


def dev_metric(config: ExperimentConfig) -> str:
    """The metric trials are selected and compared on: train.select_metric, or the dev
    protocol's primary metric (the dev split is loaded to know it; test is not).

    Raises:
        ConfigError: train.select_metric is not a metric of the dev protocol.
        ValueError: the dev split has no protocol.
    """
    from attnmatch.data.datasets import load_train_dev_test

    d = config.data
    _, dev, _ = load_train_dev_test(
        d.dataset, d.train_split, d.dev_split, None, data_dir=d.data_dir, **d.options
    )
    if dev.protocol is None:
        raise ValueError(f"{dev.dataset}:{dev.split} has no evaluation protocol to select on")
    chosen = config.train.select_metric
    if chosen is not None and chosen not in dev.protocol.metrics:
        raise ConfigError(
            f"train.select_metric = {chosen!r} is not a metric of the dev protocol "
            f"{dev.protocol.name!r}; choose one of {', '.join(dev.protocol.metrics)}"
        )
    return chosen or dev.protocol.primary


def _import_optuna() -> Any:
    try:
        import optuna
    except ImportError as e:
        raise ImportError(f"attnmatch tune needs Optuna: {INSTALL_HINT}", name="optuna") from e
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def _storage(run_dir: Path) -> Any:
    optuna = _import_optuna()
    url = f"sqlite:///{(run_dir / STUDY_FILE).resolve()}"
    # Several processes share the file: wait for its lock rather than fail.
    return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 120}})


@dataclass(frozen=True)
class _Search:
    """What a worker process needs (plain data, so that it crosses a process start)."""

    run_dir: str
    config: dict[str, Any]
    spec: dict[str, Any]
    metric: str
    trials: int
    worker: int
    sampler_seed: int


def _counted(trial: Any) -> bool:
    """Whether a trial counts towards the N trials: running, complete, pruned, or failed by
    its own error (an interrupted one is retried instead)."""
    from optuna.trial import TrialState

    if trial.state == TrialState.WAITING:
        return False
    return not (trial.state == TrialState.FAIL and trial.user_attrs.get("interrupted"))


def _spec_from_dict(data: dict[str, Any]) -> TuneSpec:
    params = tuple(Param(**{**p, "choices": tuple(p["choices"])}) for p in data["params"])
    return TuneSpec(**{**data, "params": params})


def run_worker(search: _Search, console: Console | None = None) -> None:
    """Asks the study for trials and trains them until it holds `search.trials` counted
    trials. Runs in the search's process (one job) or in each of `--jobs` processes."""
    optuna = _import_optuna()
    console = console or Console(stderr=True)
    run_dir = Path(search.run_dir)
    spec = _spec_from_dict(search.spec)
    base = ExperimentConfig.from_dict(search.config)
    pruner = (
        optuna.pruners.MedianPruner(
            n_startup_trials=spec.startup_trials, n_warmup_steps=spec.warmup_epochs
        )
        if spec.pruner == "median"
        else optuna.pruners.NopPruner()
    )
    sampler = optuna.samplers.TPESampler(
        seed=search.sampler_seed, n_startup_trials=max(1, spec.startup_trials)
    )
    study = optuna.load_study(
        study_name=STUDY_NAME, storage=_storage(run_dir), sampler=sampler, pruner=pruner
    )
    while True:
        with file_lock(run_dir / LOCKS[1]):
            if sum(_counted(t) for t in study.get_trials(deepcopy=False)) >= search.trials:
                return
            trial = study.ask()
        run_trial(study, trial, base, spec, search, console)


def run_trial(
    study: Any,
    trial: Any,
    base: ExperimentConfig,
    spec: TuneSpec,
    search: _Search,
    console: Console,
) -> None:
    """Trains one trial in RUN/trial-NNN/ and tells the study how it ended; prints one line."""
    optuna = _import_optuna()
    from optuna.trial import TrialState

    from attnmatch.training import train

    start = time.perf_counter()
    folder = Path(search.run_dir) / f"trial-{trial.number:03d}"
    trial.set_user_attr("folder", folder.name)
    log = Console(file=io.StringIO(), width=120, emoji=False, highlight=False)

    def report(entry: dict[str, Any]) -> None:
        dev = entry.get("dev")
        if not dev:
            return
        trial.report(float(dev[search.metric]), int(entry["epoch"]))
        if trial.should_prune():
            raise optuna.TrialPruned(f"pruned after epoch {entry['epoch']}")

    params: dict[str, Any] = {}
    try:
        params = {p.key: p.suggest(trial) for p in spec.params}
        config = apply_params(base, params)
        result = train(config, folder, progress=False, console=log, on_epoch=report)
        if result.dev is None or search.metric not in result.dev:
            raise ValueError(f"the run has no dev {search.metric}")
        value = float(result.dev[search.metric])
        if not math.isfinite(value):
            raise ValueError(f"dev {search.metric} is {value}")
        trial.set_user_attr("best_epoch", result.best_epoch)
        study.tell(trial, value)
        state, shown = "complete", f"dev {search.metric} {value:.4f}"
    except optuna.TrialPruned as e:
        study.tell(trial, state=TrialState.PRUNED)
        state, shown = "pruned", str(e)
    except Exception as e:  # a failed trial is recorded; the search goes on
        message = " ".join(str(e).split()) or type(e).__name__
        trial.set_user_attr("error", f"{type(e).__name__}: {message}")
        study.tell(trial, state=TrialState.FAIL)
        state, shown = "failed", f"{type(e).__name__}: {message}"
    finally:
        if folder.is_dir():
            write_text_atomic(folder / "console.log", log.file.getvalue())  # type: ignore[attr-defined]
    best = _best_value(study)
    best_text = "" if best is None else f"  (best {best[1]:.4f}, trial {best[0]})"
    chosen = " ".join(f"{k.split('.')[-1]}={_short(v)}" for k, v in params.items())
    console.print(
        f"trial {trial.number:3d}  {state:8s}  {shown}{best_text}  {chosen}  "
        f"({time.perf_counter() - start:.0f}s)",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _best_value(study: Any) -> tuple[int, float] | None:
    try:
        best = study.best_trial
    except ValueError:  # no complete trial yet
        return None
    return best.number, float(best.value)


def tune(
    config: ExperimentConfig,
    spec: TuneSpec,
    output_dir: str | Path,
    *,
    trials: int,
    jobs: int = 1,
    threads: int | None = None,
    resume: bool = False,
    console: Console | None = None,
    source: str | None = None,
) -> TuneResult:
    """Searches `spec` on dev with `trials` trials in output_dir (see the module docstring).

    Args:
        config: the experiment every trial starts from.
        spec: the space and the search settings (`load_tune_config`).
        trials: the number of counted trials the study ends with (with `resume`, the total,
            earlier ones included).
        jobs: processes training trials at once, sharing the study.
        threads: torch threads per process (default: the CPUs divided by `jobs`, at least 1;
            a config with its own `train.threads` keeps it).
        resume: continue the study in output_dir.
        source: where the config came from, named in best.toml.

    Raises:
        FileExistsError: output_dir holds a study and `resume` is not set, or holds other
            files.
        ValueError: `trials` or `jobs` < 1; with `resume`, the study was made for another
            experiment or space.
        RunFolderInUse: another search runs in output_dir.
        RuntimeError: a worker process failed.
    """
    optuna = _import_optuna()
    if trials < 1 or jobs < 1:
        raise ValueError(f"--trials and --jobs must be >= 1, got {trials} and {jobs}")
    console = console or Console(stderr=True)
    run_dir = Path(output_dir)
    check_run_dir(run_dir, resume)
    run_dir.mkdir(parents=True, exist_ok=True)
    threads = threads or max(1, (os.cpu_count() or 1) // jobs)
    with file_lock(run_dir / LOCKS[0], blocking=False) as mine:
        if not mine:
            raise RunFolderInUse(
                f"{run_dir} is in use by another attnmatch tune: wait for it to end, or choose "
                "another folder"
            )
        base = trial_base(config, threads)
        metric = dev_metric(base)
        direction = "maximize" if greater_is_better(metric) else "minimize"
        identity = {"experiment": config.to_dict(), "space": spec.to_dict(), "metric": metric}
        storage = _storage(run_dir)
        study, earlier = _open_study(optuna, storage, identity, direction, run_dir)
        console.print(
            f"tune: {len(spec.params)} parameters, {direction} dev {metric}, {trials} trials in "
            f"{visible(run_dir)}{earlier}; {jobs} process(es) x {base.train.threads} thread(s)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        searches = _searches(run_dir, base, spec, metric, trials, jobs, len(study.trials))
        if jobs == 1:
            run_worker(searches[0], console)
        else:
            _run_processes(searches)
        study = optuna.load_study(study_name=STUDY_NAME, storage=storage)
        result = _write_outputs(study, config, spec, run_dir, metric, direction, source)
    for note in result.notes:
        console.print(note, highlight=False, markup=False)
    return result


def _open_study(
    optuna: Any, storage: Any, identity: dict[str, Any], direction: str, run_dir: Path
) -> tuple[Any, str]:
    """The study in run_dir (new, or resumed if it was made for the same `identity`), its
    interrupted trials queued again, and a note on what it holds already."""
    study = optuna.create_study(
        storage=storage, study_name=STUDY_NAME, direction=direction, load_if_exists=True
    )
    _check_identity(study, identity, run_dir)
    retried = _retry_interrupted(study, storage)
    done = sum(_counted(t) for t in study.get_trials(deepcopy=False))
    earlier = f"; {done} done earlier" if done else ""
    if retried:
        earlier += f", {retried} interrupted (their parameters are tried again first)"
    return study, earlier


def _searches(
    run_dir: Path,
    base: ExperimentConfig,
    spec: TuneSpec,
    metric: str,
    trials: int,
    jobs: int,
    n_before: int,
) -> list[_Search]:
    """What each of the `jobs` workers runs; each samples with a seed of its own."""
    return [
        _Search(
            run_dir=str(run_dir),
            config=base.to_dict(),
            spec=spec.to_dict(),
            metric=metric,
            trials=trials,
            worker=w,
            sampler_seed=spec.seed * 1_000_003 + 1_009 * w + n_before,
        )
        for w in range(jobs)
    ]


def check_run_dir(run_dir: Path, resume: bool) -> None:
    """Refuses a folder with a study unless `resume`, and a non-empty folder without one.

    Raises:
        FileExistsError: naming the folder and the way out.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise FileExistsError(f"{run_dir} is a file, not a search folder: choose another path")
    if not run_dir.is_dir() or not any(p.name not in LOCKS for p in run_dir.iterdir()):
        return
    if not (run_dir / STUDY_FILE).is_file():
        raise FileExistsError(
            f"{run_dir} is not empty and holds no search ({STUDY_FILE}): choose another folder"
        )
    if not resume:
        raise FileExistsError(
            f"{run_dir} holds a search ({STUDY_FILE}): continue it with --resume, or choose "
            "another folder"
        )


def _check_identity(study: Any, identity: dict[str, Any], run_dir: Path) -> None:
    """Records what the study searches; on resume, refuses another experiment or space."""
    saved = study.user_attrs.get("identity")
    if saved is None:
        study.set_user_attr("identity", identity)
        return
    changed = [k for k in identity if saved.get(k) != identity[k]]
    if changed:
        raise ValueError(
            f"cannot resume the search in {run_dir}: its {' and '.join(changed)} changed; "
            "only --trials and --jobs may change (search in another folder)"
        )


def _retry_interrupted(study: Any, storage: Any) -> int:
    """Marks the trials left running by a killed search as failed (attribute
    `interrupted`) and enqueues their parameters again; returns how many."""
    from optuna.trial import TrialState

    stale = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
    for t in stale:
        storage.set_trial_user_attr(t._trial_id, "interrupted", True)
        storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        study.enqueue_trial(dict(t.params), user_attrs={"retry_of": t.number})
    return len(stale)


def _run_processes(searches: list[_Search]) -> None:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_worker_main, args=(s,)) for s in searches]
    for p in processes:
        p.start()
    try:
        for p in processes:
            p.join()
    except BaseException:
        for p in processes:
            p.terminate()
        raise
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {len(processes)} search processes failed (exit codes {failed}); "
            "their trials are in the study: continue with --resume"
        )


def _worker_main(search: _Search) -> None:  # pragma: no cover - runs in a child process
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    run_worker(search)


# ---- outputs --------------------------------------------------------------------------------


def trial_record(trial: Any) -> dict[str, Any]:
    """One trial of tune.json."""
    duration = trial.duration.total_seconds() if trial.duration is not None else None
    return {
        "number": trial.number,
        "state": trial.state.name.lower(),
        "value": trial.value,
        "params": trial.params,
        "dev_curve": {str(k): v for k, v in sorted(trial.intermediate_values.items())},
        "duration_s": None if duration is None else round(duration, 2),
        **{k: v for k, v in trial.user_attrs.items()},
    }


def _write_outputs(
    study: Any,
    config: ExperimentConfig,
    spec: TuneSpec,
    run_dir: Path,
    metric: str,
    direction: str,
    source: str | None,
) -> TuneResult:
    records = [trial_record(t) for t in study.trials]
    best_trial = _best_value(study)
    best = None
    result = TuneResult(
        output_dir=run_dir, metric=metric, direction=direction, best=None, trials=records
    )
    if best_trial is not None:
        trial = study.best_trial
        best = {
            "number": trial.number,
            "value": trial.value,
            "params": trial.params,
            "overrides": nested(trial.params),  # a reproduce table row's `overrides`
        }
        best.update(
            {k: trial.user_attrs[k] for k in ("folder", "best_epoch") if k in trial.user_attrs}
        )
        best_config = apply_params(config, trial.params)
        result.best_config = run_dir / "best.toml"
        write_text_atomic(
            result.best_config,
            best_toml(best_config, best, metric, sum(map(_counted, study.trials)), source),
        )
    else:
        result.notes.append("tune: no trial completed: no best.toml")
    result.best = best
    states = {s: sum(r["state"] == s for r in records) for s in ("complete", "pruned", "fail")}
    summary = {
        "metric": metric,
        "direction": direction,
        "space": spec.to_dict(),
        "experiment": config.to_dict(),
        "counts": states,
        "best": best,
        "importances": importances(study),
        "trials": records,
    }
    write_text_atomic(run_dir / "tune.json", json.dumps(summary, indent=2) + "\n")
    result.plots, notes = write_plots(study, run_dir, metric)
    result.notes.extend(notes)
    return result


def best_toml(
    config: ExperimentConfig,
    best: dict[str, Any],
    metric: str,
    n_trials: int,
    source: str | None,
) -> str:
    """The experiment TOML of the best trial (None values are left out: their defaults)."""
    try:
        import tomli_w
    except ImportError as e:
        raise ImportError(f"writing best.toml needs tomli-w: {INSTALL_HINT}", name="tomli_w") from e

    def drop_none(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: drop_none(v) for k, v in value.items() if v is not None}
        return value

    data = drop_none(config.to_dict())
    if config.data.test_split is None:  # the default is "test": keep the choice of none
        data["data"]["test_split"] = ""
    header = [
        f"# attnmatch tune: the best of {n_trials} trials" + (f" on {source}" if source else ""),
        f"# trial {best['number']}: dev {metric} {best['value']:.4f}; searched: "
        + ", ".join(f"{k} = {_short(v)}" for k, v in best["params"].items()),
    ]
    return "\n".join(header) + "\n\n" + tomli_w.dumps(data)


def importances(study: Any) -> dict[str, float] | None:
    """Each parameter's importance by Optuna's default evaluator (PED-ANOVA in Optuna 5) over
    the complete trials; None with fewer than two, or when it cannot be computed."""
    optuna = _import_optuna()
    from optuna.trial import TrialState

    if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < 2:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(study)
    except (ValueError, RuntimeError):
        return None
    return {k: round(float(v), 4) for k, v in found.items()}


def write_plots(study: Any, run_dir: Path, metric: str) -> tuple[list[Path], list[str]]:
    """history.png and importances.png with Optuna's matplotlib plots; notes for those not
    drawn (matplotlib missing, fewer than two complete trials)."""
    from optuna.trial import TrialState

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from optuna.visualization import matplotlib as ovm
    except ImportError:
        return [], ["tune: plots not drawn: pip install 'attnmatch[plot]'"]
    written, notes = [], []
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    plots = {
        "history.png": lambda: ovm.plot_optimization_history(study, target_name=f"dev {metric}"),
    }
    if len(complete) >= 2:
        plots["importances.png"] = lambda: ovm.plot_param_importances(study)
    else:
        notes.append(
            f"tune: importances.png not drawn: {len(complete)} complete trial(s), it needs 2"
        )
    for name, draw in plots.items():
        try:
            with warnings.catch_warnings():  # e.g. "importances will be equal": said in the plot
                warnings.simplefilter("ignore")
                ax = draw()
        except (ValueError, RuntimeError) as e:  # e.g. every complete trial has equal values
            notes.append(f"tune: {name} not drawn: {' '.join(str(e).split())}")
            continue
        figure: Any = ax.figure
        figure.set_size_inches(8, 5)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100)
        plt.close(figure)
        path = run_dir / name
        write_bytes_atomic(path, buffer.getvalue())
        written.append(path)
    return written, notes
