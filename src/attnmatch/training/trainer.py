"""`train`: one run of an experiment, composed of its parts.

- `experiment.py` builds the experiment (splits, inputs, task, model);
- `run_dir.py` decides what the run folder means (finished, resumed, checkpoint, log);
- `optim.py` makes the optimiser and its schedule;
- `loop.py` trains and selects on dev.

The test split is evaluated once, with the dev-selected model, at the end.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from attnmatch.atomic import write_text_atomic
from attnmatch.configs import ConfigError
from attnmatch.matcher import Matcher
from attnmatch.models import input_layer
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.experiment import Experiment, build_experiment
from attnmatch.training.loop import evaluate_split, fit, select
from attnmatch.training.optim import make_optimizer
from attnmatch.training.run_dir import RunDir, TrainResult, TrainState, environment


@contextmanager
def torch_settings(threads: int) -> Iterator[None]:
    """CPU threads (0: keep) and flushing of subnormal floats for the duration of a run, then
    the caller's settings again. Near-zero activations (e.g. softmax-gated inputs) become
    subnormal floats, an order of magnitude slower on x86 CPUs; flushing them changes results
    negligibly."""
    before, flushing = torch.get_num_threads(), _flushes_denormals()
    if threads:
        torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(flushing)
        torch.set_num_threads(before)


def _flushes_denormals() -> bool:
    """Whether subnormal float results are flushed to zero now (torch has no getter)."""
    return bool((torch.tensor([1e-39]) * 0.5)[0] == 0)


def train(
    config: ExperimentConfig,
    output_dir: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
    experiment: Experiment | None = None,
) -> TrainResult:
    """Trains `config` into `output_dir` (layout: `attnmatch.training.run_dir`).

    Args:
        experiment: an experiment already built (e.g. from in-memory splits); default: built
            from the config.

    Raises:
        FileExistsError: output_dir holds a previous run and `resume` is False.
    """
    console = console or Console(stderr=True)
    run = RunDir(output_dir)
    run.check_new(resume)
    with torch_settings(config.train.threads):
        start = time.perf_counter()
        if resume and experiment is None and (done := run.finished(config)) is not None:
            console.print(f"{run.path}: finished earlier, reusing result.json")
            return done
        exp = experiment or build_experiment(config)
        optimizer = _optimizer(exp)
        state = (run.resume(exp.matcher, optimizer, config) if resume else None) or TrainState()
        if state.epoch:
            console.print(f"resuming {run.path} after epoch {state.epoch}")
        if config.train.epochs == 0 and not run.model_dir.is_dir():  # the model as it is
            select(exp, state, 0, run)
        if optimizer is not None:
            fit(exp, optimizer, state, run, console=console, progress=progress, wall_start=start)
        return _finish(exp, state, run, start)


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


def _finish(exp: Experiment, state: TrainState, run: RunDir, start: float) -> TrainResult:
    """Evaluates the selected model on dev and test and writes the result."""
    best = Matcher.load(run.model_dir, batch_size=exp.config.train.eval_batch_size)
    best.inputs.enable_cache(input_layer(best.model))  # shares the run's cache when frozen
    exp_best = Experiment(exp.config, best, exp.loss, exp.train, exp.dev, exp.test)
    dev = evaluate_split(exp_best, exp.dev) if exp.dev is not None else None
    test = evaluate_split(exp_best, exp.test) if exp.test is not None else None
    env = environment()
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
    )
    metrics = {
        "dataset": exp.config.data.dataset,
        "protocols": {
            "dev": dev.protocol if dev else None,
            "test": test.protocol if test else None,
        },
        "best_epoch": result.best_epoch,
        "dev": result.dev,
        "test": result.test,
        "experiment": exp.config.to_dict(),
        "inputs": exp.inputs_stats,
        "environment": env,
        "wall_time_s": result.wall_time_s,
        "train_time_s": result.train_time_s,
    }
    run.write_result(result, metrics)
    return result


def train_seeds(
    config: ExperimentConfig,
    output_dir: str | Path,
    seeds: Sequence[int],
    *,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
) -> dict[str, Any]:
    """Trains one run per seed into output_dir/seed-<s>/ and summarises mean ± std.

    Returns (and writes to output_dir/summary.json) {"seeds", "runs", "dev"/"test": {metric:
    {"mean", "std", "runs"}}}. std is the sample standard deviation (0 for one run).
    """
    console = console or Console(stderr=True)
    out = Path(output_dir)
    results = []
    for seed in seeds:
        console.rule(f"seed {seed}")
        run_config = config.with_overrides({"train": {"seed": seed}})
        results.append(
            train(
                run_config, out / f"seed-{seed}", resume=resume, progress=progress, console=console
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
