"""`train`: one run of an experiment, composed of its parts.

- `experiment.py` builds the experiment (splits, inputs, task, model);
- `run_dir.py` decides what the run folder means (finished, resumed, checkpoint, log);
- `optim.py` makes the optimiser and its schedule;
- `loop.py` trains and selects on dev.

The test split is evaluated once, with the dev-selected model, at the end.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from attnmatch.atomic import write_text_atomic
from attnmatch.configs import ConfigError
from attnmatch.devices import check_precision, cpu_threads, resolve_device, torch_threads
from attnmatch.evaluation import report_from_outputs, report_items
from attnmatch.matcher import Matcher
from attnmatch.models import input_layer
from attnmatch.terminal import visible
from attnmatch.training import distributed, memory
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.experiment import EvalSplit, Experiment, build_experiment
from attnmatch.training.keep import keep_best
from attnmatch.training.loop import (
    EpochCallback,
    below_floor,
    check_budget,
    evaluate_split,
    fit,
    never_improved,
    select,
    selection_metric,
)
from attnmatch.training.optim import make_optimizer
from attnmatch.training.run_dir import RunDir, TrainResult, TrainState, environment
from attnmatch.training.trackers import epoch_logs


@contextmanager
def torch_settings(threads: int) -> Iterator[str | None]:
    """CPU threads and flushing of subnormal floats for the duration of a run, then the
    caller's settings again; yields a line to say when fewer threads than torch's default are
    used. `threads` 0: automatic, torch's default less the CPUs busy with other work
    (`devices.cpu_threads`). Near-zero activations (e.g. softmax-gated inputs) become subnormal
    floats, an order of magnitude slower on x86 CPUs; flushing them changes results
    negligibly."""
    flushing = _flushes_denormals()
    chosen, note = cpu_threads(threads)
    with torch_threads(chosen):
        torch.set_flush_denormal(True)
        try:
            yield note
        finally:
            torch.set_flush_denormal(flushing)


def _flushes_denormals() -> bool:
    """Whether subnormal float results are flushed to zero now (torch has no getter)."""
    return bool((torch.tensor([1e-39]) * 0.5)[0] == 0)


def train(
    config: ExperimentConfig,
    output_dir: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    console: Console | None = None,
    experiment: Experiment | None = None,
    on_epoch: EpochCallback | None = None,
    tensorboard: bool = False,
    log: Sequence[str] = (),
) -> TrainResult:
    """Trains `config` into `output_dir` (layout: `attnmatch.training.run_dir`).

    Args:
        resume: continue the run in output_dir (or reuse its result when it finished).
        overwrite: delete the previous run in output_dir first (only a run folder is deleted).
        experiment: an experiment already built (e.g. from in-memory splits); default: built
            from the config.
        on_epoch: called after each epoch with its log entry (`loop.fit`); may raise to stop.
        tensorboard: also write each epoch's scalars to output_dir/tensorboard/
            (`attnmatch.training.tensorboard`; needs the tensorboard package); the same as
            "tensorboard" in `log`.
        log: experiment trackers that record each epoch: "tensorboard", "mlflow", "wandb"
            (`attnmatch.training.trackers`; each needs its package).

    Raises:
        FileExistsError: output_dir holds a previous run and neither `resume` nor `overwrite`
            is set, or `overwrite` is set and output_dir is not a run folder.
        RunFolderInUse: another process runs in output_dir (it is locked for a whole run).
        ValueError: with `resume`, what the run folder holds is damaged or does not fit the
            experiment (the file named), or `config` asks for fewer epochs than were done.
    """
    console = distributed.rank0_console(console or Console(stderr=True))
    progress = progress and distributed.world().is_main
    device = resolve_device(  # before the folder is claimed; under torchrun the rank's own GPU
        distributed.rank_device(config.train.device), "train.device"
    )
    check_precision(config.train.precision, device, "train.precision")
    run = RunDir(output_dir)
    # Under torchrun, rank 0 alone holds the folder, writes and evaluates (training.distributed).
    claim = distributed.rank0_context(run.claim, resume, overwrite=overwrite)
    with claim, torch_settings(config.train.threads) as threads_note:
        start = time.perf_counter()
        if threads_note is not None:
            console.print(threads_note, highlight=False, markup=False)
        env = environment()  # the commit of the code that starts to run, and whether it is clean
        if resume and experiment is None and (done := _finished(run, config, console)) is not None:
            return done
        exp = _experiment(config, experiment, console)
        config = exp.config  # with its preset's recipe, if any
        exp.matcher.to(device, precision=config.train.precision)  # before the optimiser
        optimizer = _optimizer(exp)
        state = _first_state(exp, optimizer, run, resume, console)
        trackers = (*log, *(("tensorboard",) if tensorboard else ()))
        if not distributed.world().is_main:
            trackers = ()
        logging = epoch_logs(trackers, run.path, config.to_dict(), on_epoch)
        with logging as logged:
            if optimizer is not None:
                fit(
                    exp,
                    optimizer,
                    state,
                    run,
                    console=console,
                    progress=progress,
                    wall_start=start,
                    on_epoch=logged,
                )
                if (stalled := never_improved(exp, state)) is not None:
                    console.print(stalled, highlight=False, markup=False)
        optimizer = None  # its moments are not needed to score and compare the model
        memory.release()
        result = _shared_result(partial(_finish, exp, state, run, start, console, env))
        assert result is not None
        return result


def _experiment(
    config: ExperimentConfig, experiment: Experiment | None, console: Console
) -> Experiment:
    """`experiment`, or the one `config` builds, each step said as it starts; then the
    experiment's notes not said yet."""
    said: list[str] = []  # lines said while the experiment is built: its notes too
    exp = experiment or build_experiment(config, say=partial(_say, console, said))
    for note in exp.notes:
        if note not in said:
            console.print(visible(note), highlight=False, markup=False)
    return exp


def _say(console: Console, said: list[str], line: str) -> None:
    """Prints a step of building the experiment as it starts, and keeps it in `said`."""
    said.append(line)
    console.print(visible(line), highlight=False, markup=False)


def _finished(run: RunDir, config: ExperimentConfig, console: Console) -> TrainResult | None:
    """The result of the run in `run` if it finished training `config` (said on `console`)."""
    done = _shared_result(partial(run.finished, config))
    if done is not None:
        console.print(
            f"{visible(run.path)}: finished earlier, reusing result.json",
            markup=False,
            soft_wrap=True,  # a path is never cut by a line break
        )
    return done


def _first_state(
    exp: Experiment,
    optimizer: torch.optim.Optimizer | None,
    run: RunDir,
    resume: bool,
    console: Console,
) -> TrainState:
    """The state training starts from: the run's last checkpoint with `resume`, else a new
    one. With train.epochs = 0 the model as it is is selected here."""
    if resume:  # a floor kept in model/ by an earlier launch: the trained model back there
        run.restore_trained()
    state = (run.resume(exp.matcher, optimizer, exp.config) if resume else None) or TrainState()
    distributed.check_agree(state.epoch, "the epoch to resume after")
    if state.epoch:
        console.print(
            f"resuming {visible(run.path)} after epoch {state.epoch}",
            markup=False,
            soft_wrap=True,  # a path is never cut by a line break
        )
    if optimizer is None:  # train.epochs = 0 (`fit` checks the budget of the others)
        check_budget(run, state, 0)
    if exp.config.train.epochs == 0:  # the model as it is
        distributed.on_rank0(partial(_select_once, exp, state, run), state=state)
    return state


def _select_once(exp: Experiment, state: TrainState, run: RunDir) -> None:
    """Saves the model as it is (train.epochs = 0) unless an earlier launch did."""
    if not run.model_dir.is_dir():
        select(exp, state, 0, run)


def _shared_result(make: Callable[[], TrainResult | None]) -> TrainResult | None:
    """`make()` run on rank 0 only; every rank returns its result (`distributed.on_rank0`)."""

    def encoded() -> dict[str, Any] | None:
        result = make()
        if result is None:
            return None
        paths = {"output_dir": str(result.output_dir), "model_dir": str(result.model_dir)}
        return dataclasses.asdict(result) | paths

    data = distributed.on_rank0(encoded)
    if data is None:
        return None
    paths = {"output_dir": Path(data["output_dir"]), "model_dir": Path(data["model_dir"])}
    return TrainResult(**(data | paths))


def _optimizer(exp: Experiment) -> torch.optim.Optimizer | None:
    t = exp.config.train
    if t.epochs == 0:
        return None
    if not any(p.requires_grad for p in exp.model.parameters()):
        raise ConfigError(
            f"model {exp.config.model!r} has no trainable parameters (a frozen encoder and no "
            "layers of its own): set train.epochs = 0 to evaluate it as it is"
        )
    return make_optimizer(exp.model, t)


def _finish(
    exp: Experiment,
    state: TrainState,
    run: RunDir,
    start: float,
    console: Console,
    env: dict[str, Any],
) -> TrainResult:
    """Evaluates the selected model on dev and test, computes the floors beside them, and
    writes the result (with `env`, the environment read when the run started)."""
    t = exp.config.train
    splits = [f"{name} ({len(s.examples):,} pairs)" for name, s in _eval_splits(exp)]
    if splits:
        console.print(f"scoring {' and '.join(splits)} with the selected model ...")
    best = Matcher.load(
        run.model_dir,
        batch_size=t.eval_batch_size,
        device=exp.matcher.device,
        precision=t.precision,
    )
    if best.inputs is not None:  # a loaded model reads ids: it has inputs
        best.inputs.enable_cache(input_layer(best.model))  # shares the run's cache when frozen
    exp_best = dataclasses.replace(exp, matcher=best)
    dev = evaluate_split(exp_best, exp.dev) if exp.dev is not None else None
    test, speed = None, None
    if exp.test is not None:
        began = time.perf_counter()
        outputs = best.predict(exp.test.data)
        speed = _speed(len(exp.test.data), time.perf_counter() - began, best)
        test = report_from_outputs(outputs, exp.test.data, exp.test.protocol, task=best.task)
        # Per-item results (per query or pair), for paired tests between runs
        # (attnmatch.research.claims).
        run.write_items(
            "test", report_items(outputs, exp.test.data, exp.test.protocol, task=best.task)
        )
    memory.release()  # what scoring freed, before the floors' encoder takes its own
    floors = run_floors(exp, console)
    memory.release()
    about = {
        "dataset": exp.config.data.dataset,
        "data": split_fingerprints(exp),
        "protocols": {
            "dev": dev.protocol if dev else None,
            "test": test.protocol if test else None,
        },
    }
    kept = _keep(exp, state, run, dev.metrics if dev else None, floors, about, console)
    result = TrainResult(
        output_dir=run.path,
        model_dir=run.model_dir,
        best_epoch=state.best_epoch,
        dev=dev.metrics if dev else None,
        test=test.metrics if test else None,
        history=state.history,
        wall_time_s=round(state.wall_time_s + time.perf_counter() - start, 2),
        train_time_s=state.train_time_s,
        train_pairs_per_s=state.train_pairs_per_s,
        commit=env["commit"],
        floors=floors or None,
        kept=kept,
        peak_rss_mb=memory.peak_rss_mb(),
    )
    metrics = {
        **about,
        "best_epoch": result.best_epoch,
        "dev": result.dev,
        "test": result.test,
        "floors": floors or None,
        "kept": kept,
        "experiment": exp.config.to_dict(),
        "inputs": exp.inputs_stats,
        "environment": env,
        "device": str(exp.matcher.device),
        "wall_time_s": result.wall_time_s,
        "train_time_s": result.train_time_s,
        "speed": speed,
        "peak_rss_mb": result.peak_rss_mb,
    }
    run.write_result(result, metrics)
    return result


def _keep(
    exp: Experiment,
    state: TrainState,
    run: RunDir,
    dev: dict[str, float] | None,
    floors: dict[str, dict[str, dict[str, float]]],
    about: dict[str, Any],
    console: Console,
) -> dict[str, Any] | None:
    """Keeps the best on dev of the trained model and the floors in run/model
    (`keep.keep_best`) and says which trained model was selected, where it is, and which
    model was kept and why (a warning when the trained one is kept below a floor)."""
    kept = keep_best(exp, run, dev, floors.get("dev", {}), about)
    trained_dir = run.trained_model_dir if run.trained_model_dir.is_dir() else run.model_dir
    console.print(chosen_line(exp, state, dev, trained_dir), highlight=False)
    if kept is None:
        return None
    if kept["model"] == "trained" and dev is not None:
        warning = below_floor(kept["metric"], dev[kept["metric"]], floors["dev"])
        if warning is not None:
            console.print(warning, highlight=False)
    console.print(kept["line"], highlight=False, markup=False, soft_wrap=True)
    return kept


def _speed(pairs: int, seconds: float, matcher: Matcher) -> dict[str, Any] | None:
    """How fast the test split was scored, for the model card: one pass, as it happened (no
    warm-up, on whatever else the machine ran)."""
    if pairs == 0 or seconds <= 0:
        return None
    return {
        "pairs_per_s": round(pairs / seconds, 1),
        "pairs": pairs,
        "device": str(matcher.device),
        "threads": torch.get_num_threads(),
        "measured": "scoring the test split once, at the end of training",
    }


def split_fingerprints(exp: Experiment) -> dict[str, dict[str, Any]]:
    """Each split's pairs, groups and SHA-256 as read (`model_card.fingerprint`), for the
    metrics and the model card."""
    from attnmatch.model_card import fingerprint

    splits = {"train": exp.fit_examples}
    splits |= {name: s.examples for name, s in (("dev", exp.dev), ("test", exp.test)) if s}
    return {name: fingerprint(examples) for name, examples in splits.items() if examples}


def chosen_line(
    exp: Experiment, state: TrainState, dev: dict[str, float] | None, where: Path
) -> str:
    """Which trained model the run selected, and the folder it is in, in one line."""
    if dev is None or exp.dev is None:
        return f"model: the last epoch's ({state.epoch}; no dev split to select on), in {where}"
    metric = selection_metric(exp)
    return (
        f"model: epoch {state.best_epoch} of {state.epoch}, the best dev {metric} "
        f"({dev[metric]:.4f}), in {where}"
    )


FLOOR_ENCODER_PAIRS = 5000  # the zero-shot encoder floor on larger splits costs minutes of CPU


def run_floors(exp: Experiment, console: Console) -> dict[str, dict[str, dict[str, float]]]:
    """The no-training baselines of the dev and test splits (`attnmatch.floors`), as
    {split: {baseline: metrics}}, each said in one line; {} when train.floors is "none"."""
    t = exp.config.train
    if t.floors == "none":
        return {}
    from attnmatch.floors import compute_floors, format_floors

    encoders = ("minilm-l6",) if t.floors == "all" else ()
    if t.floors == "lexical":
        console.print('floors: the MiniLM zero-shot floor is off (train.floors = "lexical")')
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, split in _eval_splits(exp):
        kinds = ", ".join(["random", "word overlap", "BM25", *(f"{e} zero-shot" for e in encoders)])
        console.print(f"floors ({name}): scoring {len(split.examples):,} pairs ({kinds}) ...")
        skipped: dict[str, str] = {}
        floors = compute_floors(
            split.examples,
            split.protocol,
            fit_examples=exp.fit_examples,
            task=exp.matcher.task,
            encoders=encoders,
            max_encoder_pairs=FLOOR_ENCODER_PAIRS,
            skipped=skipped,
        )
        out[name] = floors
        metric = selection_metric(exp) if name == "dev" else split.protocol.primary
        for line in format_floors(floors, metric, where=name):
            console.print(line, highlight=False, markup=False)
        for floor, why in skipped.items():
            console.print(f"floor left out ({name}): {floor}: {why}", highlight=False, markup=False)
    return out


def _eval_splits(exp: Experiment) -> list[tuple[str, EvalSplit]]:
    """The dev and test splits the experiment has, by name."""
    return [(name, s) for name, s in (("dev", exp.dev), ("test", exp.test)) if s is not None]


def train_seeds(
    config: ExperimentConfig,
    output_dir: str | Path,
    seeds: Sequence[int],
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    console: Console | None = None,
    tensorboard: bool = False,
    log: Sequence[str] = (),
) -> dict[str, Any]:
    """Trains one run per seed into output_dir/seed-<s>/ and summarises mean ± std.
    `resume` and `overwrite` apply to each seed's folder (see `train`).

    Returns (and writes to output_dir/summary.json) {"seeds", "runs", "dev"/"test": {metric:
    {"mean", "std", "runs"}}}. std is the sample standard deviation (0 for one run).
    """
    console = distributed.rank0_console(console or Console(stderr=True))
    out = Path(output_dir)
    results = []
    for seed in seeds:
        console.rule(f"seed {seed}")
        run_config = config.with_overrides({"train": {"seed": seed}})
        results.append(
            train(
                run_config,
                out / f"seed-{seed}",
                resume=resume,
                overwrite=overwrite,
                progress=progress,
                console=console,
                tensorboard=tensorboard,
                log=log,
            )
        )
    summary = {
        "seeds": list(seeds),
        "runs": [r.to_dict() for r in results],
        "dev": summarize([r.dev for r in results if r.dev is not None]) if results[0].dev else None,
        "test": summarize([r.test for r in results if r.test is not None])
        if results[0].test
        else None,
    }
    if distributed.world().is_main:
        write_text_atomic(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def summarize(runs: Sequence[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """{metric: {"mean", "std", "runs"}} over runs (sample std; 0.0 for a single run)."""
    out: dict[str, dict[str, Any]] = {}
    for name in runs[0]:
        values = [float(r[name]) for r in runs]
        out[name] = {
            "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "runs": values,
        }
    return out
