"""The fit loop: epochs -> batches -> loss -> step, then evaluate on dev and keep the best.

Every epoch re-seeds torch and the sampler from (seed, epoch), so a run resumed from its
checkpoint continues exactly as an uninterrupted one. Model selection follows the dev
protocol's primary metric, larger or smaller being better as the metric says (`mse`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from attnmatch.data.collate import collate
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.sampling import (
    NegativeSource,
    PairBatchSampler,
    RankingGroupSampler,
    SampledNegativesSampler,
    bm25_candidates,
    hard_count,
)
from attnmatch.data.schema import PairBatch
from attnmatch.devices import autocast, grad_scaler
from attnmatch.evaluation import Report, report_from_outputs
from attnmatch.losses import auxiliary_loss, compute_loss, mixed_loss
from attnmatch.metrics import greater_is_better
from attnmatch.tasks import (
    GROUP_LOSSES,
    ClassificationTask,
    RankingTask,
    RegressionTask,
    Task,
    for_task,
    ranking_scores,
)
from attnmatch.training import distributed, memory
from attnmatch.training.config import Budget
from attnmatch.training.experiment import EvalSplit, Experiment
from attnmatch.training.optim import learning_rate, set_learning_rate
from attnmatch.training.run_dir import RunDir, TrainState

Sampler = RankingGroupSampler | PairBatchSampler | SampledNegativesSampler

# Where a positive-only split's negatives come from under negatives = "auto" (chosen on dev:
# docs/training.md, "Positive pairs only").
AUTO_NEGATIVES: NegativeSource = "random"

# Called after each epoch is checkpointed, with its log.jsonl entry ("dev" is None when dev was
# not evaluated); it may raise to stop the run there (e.g. a pruned hyper-parameter trial).
EpochCallback = Callable[[dict[str, Any]], None]

# Tables keyed by task class (`attnmatch.tasks.for_task`). `compute_loss`'s keyword arguments
# (a regression head's lowest score level), and what selecting a model on dev calibrates
# besides choosing the epoch (`Task.calibrated_on`), said when a run starts.
_LOSS_OPTIONS: dict[type[Task], Callable[[Any], dict[str, float]]] = {
    RankingTask: lambda task: {},
    ClassificationTask: lambda task: {},
    RegressionTask: lambda task: {"min_score": task.min_score},
}
_THRESHOLD_NOTE = (
    "its decision threshold is fitted on dev to maximise that metric (accuracy where it is not "
    "accuracy or F1)"
)
_SELECTION_NOTES: dict[type[Task], Callable[[Any], str]] = {
    RankingTask: lambda task: "a Platt scaling of its scores into probabilities is fitted on dev",
    ClassificationTask: lambda task: _THRESHOLD_NOTE if task.num_classes == 2 else "",
    RegressionTask: lambda task: "",
}


def negative_source(exp: Experiment) -> NegativeSource | None:
    """None: the queries' own negatives (`RankingGroupSampler`); else where negatives are
    drawn from. "auto" keeps the own negatives of a split that has any (the benchmarks'
    setting: queries without are left out), and draws `AUTO_NEGATIVES` for a split of
    positive pairs only."""
    t = exp.config.train
    if t.negatives != "auto":
        return t.negatives
    has_negative = bool((exp.train.labels <= 0).any())
    return None if has_negative else AUTO_NEGATIVES


def make_sampler(exp: Experiment) -> Sampler:
    """Ranking groups (a positive and its negatives) for pairwise/listwise losses, else pairs."""
    t = exp.config.train
    if exp.loss in GROUP_LOSSES:
        source = negative_source(exp)
        where = f"{exp.config.data.dataset}: the training split"
        if source is None:
            return RankingGroupSampler(
                exp.train,
                where=where,
                num_negatives=t.num_negatives,
                groups_per_batch=t.batch_size,
                seed=t.seed,
                bucket_pool=t.bucket_pool,
            )
        hard = bm25_candidates(exp.train, exp.train_texts) if source == "bm25" else None
        return SampledNegativesSampler(
            exp.train,
            where=where,
            source=source,
            num_negatives=t.num_negatives,
            groups_per_batch=t.batch_size,
            seed=t.seed,
            bucket_pool=t.bucket_pool,
            hard=hard,
            hard_pool=t.hard_pool,
            hard_share=t.hard_share,
        )
    return PairBatchSampler(
        exp.train, batch_size=t.batch_size, seed=t.seed, bucket_pool=t.bucket_pool
    )


def pool_scores(exp: Experiment, data: EncodedPairs, rows: np.ndarray) -> np.ndarray:
    """The current model's ranking scores of pairs `rows` of `data`, (n,) float32: eval mode,
    no gradients, in batches of `eval_batch_size` (`Matcher.predict`); the model's train mode
    is restored after."""
    subset = EncodedPairs(
        data.texts,
        data.left[rows],
        data.right[rows],
        data.labels[rows],
        data.group_ids[rows],
        data.group_names,
    )
    outputs = exp.matcher.predict(subset)  # (n, num_outputs)
    return ranking_scores(torch.from_numpy(outputs)).numpy()  # (n,)


def batch_rows(
    exp: Experiment, sampler: Sampler, data: EncodedPairs, idx: np.ndarray
) -> np.ndarray:
    """The pair indices a batch of `sampler.epoch` trains: `idx` itself, or for "model"
    negatives the groups whose negatives the current model chose from their pools."""
    if isinstance(sampler, SampledNegativesSampler) and sampler.scored:
        return sampler.choose(idx, partial(pool_scores, exp, data))
    return idx


def batch_loss(
    exp: Experiment, batch: PairBatch, model: torch.nn.Module | None = None
) -> torch.Tensor:
    """The training loss of one batch (on the model's device): the task loss plus the model's
    auxiliary terms (e.g. IARNN's Occam regulariser). The forward pass runs in the matcher's
    precision (`attnmatch.devices.autocast`); the loss is computed in float32. `model`: the
    experiment's model as trained (e.g. in DDP). A distilled student's loss mixes the gold
    labels' and the teacher's (`attnmatch.losses.mixed_loss`)."""
    t = exp.config.train
    model = model or exp.model
    with autocast(batch.left_ids.device, exp.matcher.precision):
        outputs = model(batch)  # (B, num_outputs)
    outputs = outputs.float()  # (B, num_outputs); a no-op in fp32
    options = for_task(_LOSS_OPTIONS, exp.matcher.task)(exp.matcher.task)
    if exp.distill is not None and batch.teacher is not None:  # a teacher's targets
        d = exp.distill
        loss = mixed_loss(exp.loss, d.loss, d.weight, outputs, batch, margin=t.margin, **options)
    else:
        loss = compute_loss(exp.loss, outputs, batch, margin=t.margin, **options)
    aux = auxiliary_loss(model)
    return loss if aux is None else loss + aux


def backward(
    exp: Experiment,
    data: EncodedPairs,
    idx: np.ndarray,
    groups: np.ndarray,
    *,
    model: torch.nn.Module | None = None,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """One training step's loss, its gradients added to the parameters' `.grad` (zero them
    first): under torchrun this rank's share of the batch's groups (`distributed.shard_batch`),
    its loss weighted as a share of the batch's mean; the loss scaled by `scaler` (fp16) before
    the backward pass. Returns the (unscaled) loss.

    Shape:
        idx: (B,) rows of `data`, groups: (B,) their groups 0..G-1 -> ()
    """
    part = distributed.shard_batch(groups)
    batch = collate(data, idx[part.rows], group_index=part.group_index).to(exp.matcher.device)
    loss = batch_loss(exp, batch, model)
    if part.weight != 1.0:  # this rank's share of the global batch's mean
        loss = loss * part.weight
    (loss if scaler is None else scaler.scale(loss)).backward()
    return loss


def evaluate_split(exp: Experiment, split: EvalSplit) -> Report:
    return report_from_outputs(
        exp.matcher.predict(split.data), split.data, split.protocol, task=exp.matcher.task
    )


def progress_bar(console: Console, enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
        transient=True,
    )


class StepLines:
    """Progress said in plain lines where no bar is drawn (`--no-progress`, or a log that is
    not a terminal): a line when a step ends `EVERY_S` seconds or more after the epoch began
    or the last line, with the steps done, the mean recent loss and the time the epoch has
    left at this pace."""

    EVERY_S = 15.0

    def __init__(self, bar: Progress, name: str, total: int) -> None:
        self.console = bar.console
        self.plain = bar.disable or not bar.console.is_interactive
        self.name, self.total = name, total
        self.start = self.last = time.perf_counter()

    def step(self, done: int, loss: float) -> None:
        now = time.perf_counter()
        if not self.plain or now - self.last < self.EVERY_S or done >= self.total:
            return
        self.last = now
        left = (now - self.start) / done * (self.total - done)
        self.console.print(
            f"{self.name}: {done}/{self.total} steps, loss {loss:.4f}, about {left:.0f}s left",
            highlight=False,
        )


def run_epoch(
    exp: Experiment,
    optimizer: torch.optim.Optimizer,
    sampler: Sampler,
    state: TrainState,
    epoch: int,
    bar: Progress,
    budget: Budget,
    scaler: torch.amp.GradScaler | None = None,
    model: torch.nn.Module | None = None,
    after_step: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """One epoch of optimiser steps; returns its history entry (without dev metrics).

    `scaler` scales the loss of fp16 training (`attnmatch.devices.grad_scaler`). `model`: the
    experiment's model as trained (in DDP under torchrun: each rank then takes its share of
    every batch, `distributed.shard`, and the loss is that of the global batch). `after_step`
    is called after each step (e.g. `memory.Releaser`).
    """
    t = exp.config.train
    torch.manual_seed(distributed.rank_seed(t.seed * 1_000_003 + epoch))
    batches = sampler.epoch(epoch)
    data = getattr(sampler, "data", exp.train)  # with the epoch's drawn negatives, if any
    task_id = bar.add_task(f"epoch {epoch}/{budget.epochs}", total=len(batches), info="")
    lines = StepLines(bar, f"epoch {epoch}/{budget.epochs}", len(batches))
    exp.model.train()
    start, losses, n_pairs = time.perf_counter(), [], 0
    for drawn in batches:
        idx = batch_rows(exp, sampler, data, drawn)
        optimizer.zero_grad(set_to_none=True)
        loss = backward(exp, data, idx, sampler.group_index(idx), model=model, scaler=scaler)
        if t.grad_clip > 0:
            if scaler is not None:
                scaler.unscale_(optimizer)  # clip the true gradients
            torch.nn.utils.clip_grad_norm_(exp.model.parameters(), t.grad_clip)
        set_learning_rate(optimizer, learning_rate(t, state.step, budget.steps))
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)  # skipped when the scaled gradients overflowed
            scaler.update()
        state.step += 1
        losses.append(loss.item())
        del loss  # the step's graph and activations: freed before `after_step` looks
        if after_step is not None:
            after_step()
        n_pairs += len(idx)
        bar.update(task_id, advance=1, info=f"loss {np.mean(losses[-50:]):.4f}")
        lines.step(len(losses), float(np.mean(losses[-50:])))
    seconds = time.perf_counter() - start
    bar.remove_task(task_id)
    return {
        "epoch": epoch,
        "step": state.step,
        "train_loss": distributed.mean_over_ranks(float(np.mean(losses))) if losses else None,
        "epoch_time_s": round(seconds, 3),
        "train_pairs": n_pairs,
        "train_pairs_per_s": round(n_pairs / max(seconds, 1e-9), 1),
    }


def select(exp: Experiment, state: TrainState, epoch: int, run: RunDir) -> dict[str, float] | None:
    """Evaluates dev after `epoch`, and saves the model when it is the best so far (the last
    epoch when there is no dev split), its task calibrated on dev (`Task.calibrated_on`: a
    ranking score's probability of relevance). Returns the dev metrics."""
    if exp.dev is None:
        state.best_epoch = epoch
        run.save_best(exp.matcher, None)
        return None
    outputs = exp.matcher.predict(exp.dev.data)  # (N, num_outputs)
    task = exp.matcher.task
    report = report_from_outputs(outputs, exp.dev.data, exp.dev.protocol, task=task)
    metric = exp.config.train.select_metric or report.primary
    score = report.metrics[metric]
    better = greater_is_better(metric)
    best = state.best_score
    if best is None or (score > best if better else score < best):
        state.best_score, state.best_epoch, state.bad_epochs = score, epoch, 0
        calibrated = task.calibrated_on(outputs, exp.dev.data.labels, metric=metric)
        run.save_best(dataclasses.replace(exp.matcher, task=calibrated), report.metrics)
    else:
        state.bad_epochs += 1
    return report.metrics


def selection_metric(exp: Experiment) -> str:
    """The dev metric models are selected on: train.select_metric, or the dev protocol's
    primary metric."""
    if exp.dev is None:
        raise ValueError("no dev split: nothing to select on")
    chosen = exp.config.train.select_metric
    return chosen or exp.dev.protocol.primary


def fit(
    exp: Experiment,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
    run: RunDir,
    *,
    console: Console,
    progress: bool,
    wall_start: float,
    on_epoch: EpochCallback | None = None,
) -> None:
    """Trains from `state.epoch + 1` to the budget's last epoch (`TrainConfig.budget`),
    stopping early after `patience` dev evaluations without an improvement; checkpoints and
    logs every epoch, then calls `on_epoch` with the epoch's log entry.

    Raises:
        ValueError: `state` (resumed) has done more epochs than the budget.
    """
    t = exp.config.train
    sampler = make_sampler(exp)
    budget = t.budget(len(sampler))
    check_budget(run, state, budget.epochs)
    if state.epoch == 0:
        for line in budget_lines(exp, sampler, budget):
            console.print(line, highlight=False)
    if t.max_memory is not None and (planned := _memory_plan(exp, sampler, state.epoch + 1)):
        console.print(planned, highlight=False, markup=False)
    scaler = grad_scaler(exp.matcher.device, exp.matcher.precision)
    if scaler is not None and state.grad_scaler:  # resumed: the loss scale it had reached
        scaler.load_state_dict(state.grad_scaler)
    model = distributed.wrap(exp.model, partial(_first_batch_loss, exp, sampler, state.epoch + 1))
    release = memory.Releaser()
    with progress_bar(console, progress) as bar:
        for epoch in range(state.epoch + 1, budget.epochs + 1):
            if t.patience and exp.dev is not None and state.bad_epochs >= t.patience:
                break
            entry = run_epoch(
                exp, optimizer, sampler, state, epoch, bar, budget, scaler, model, release
            )
            dev = (  # rank 0 selects; every rank gets its decision (best epoch, patience)
                distributed.on_rank0(partial(select, exp, state, epoch, run), state=state)
                if budget.evaluates(epoch)
                else None
            )
            release()
            state.epoch = epoch
            state.history.append({**entry, "dev": dev})
            if scaler is not None:
                state.grad_scaler = scaler.state_dict()
            elapsed = round(state.wall_time_s + time.perf_counter() - wall_start, 2)
            if distributed.world().is_main:
                run.save_checkpoint(exp.matcher, optimizer, _with_wall(state, elapsed), exp.config)
            console.print(epoch_line(exp, state, entry, dev))
            if on_epoch is not None:
                on_epoch(state.history[-1])


def _memory_plan(exp: Experiment, sampler: Sampler, epoch: int) -> str | None:
    """`memory.plan` on the batches of `epoch` (the first this launch trains)."""
    batches = sampler.epoch(epoch)
    data = getattr(sampler, "data", exp.train)  # with the epoch's drawn negatives, if any
    return memory.plan(exp.model, data, list(batches), exp.config.train.max_memory)


def _first_batch_loss(
    exp: Experiment, sampler: Sampler, epoch: int, model: torch.nn.Module
) -> torch.Tensor:
    """The loss of this rank's share of `epoch`'s first batch (`distributed.wrap`'s probe)."""
    drawn = sampler.epoch(epoch)[0]
    data = getattr(sampler, "data", exp.train)
    idx = batch_rows(exp, sampler, data, drawn)
    part = distributed.shard_batch(sampler.group_index(idx))
    batch = collate(data, idx[part.rows], group_index=part.group_index)
    return batch_loss(exp, batch.to(exp.matcher.device), model)


def check_budget(run: RunDir, state: TrainState, epochs: int) -> None:
    """Refuses to resume a run for fewer epochs than it has done: its result would claim the
    smaller budget beside a later best epoch.

    Raises:
        ValueError: `state.epoch` > `epochs`.
    """
    if state.epoch > epochs:
        raise ValueError(
            f"cannot resume {run.path} with a budget of {epochs} epochs: it has done "
            f"{state.epoch} already; ask for {state.epoch} epochs or more (--epochs), or train "
            "again with --overwrite"
        )


FEW_STEPS = 10  # fewer optimiser steps per epoch than this is worth a warning


def budget_lines(exp: Experiment, sampler: Sampler, budget: Budget) -> list[str]:
    """What the run will do, said before it starts: its negatives, steps per epoch and
    budget, with a warning when epochs are very short."""
    t = exp.config.train
    unit = "groups" if not isinstance(sampler, PairBatchSampler) else "pairs"
    lines = []
    if isinstance(sampler, SampledNegativesSampler) and sampler.scored:
        k = sampler.num_negatives
        h = hard_count(k, sampler.hard_share)
        lines.append(
            f"negatives: model-scored: of the {k} of a positive, the {h} the current model "
            f"scores highest among {sampler.hard_pool} candidates drawn at random, the other "
            f"{k - h} at random from them; {sampler.num_groups()} positive pairs"
        )
    elif isinstance(sampler, SampledNegativesSampler):
        lines.append(
            f"negatives: {sampler.source} (answers of other queries), "
            f"{sampler.num_groups()} positive pairs"
        )
    every = (
        f", dev evaluated every {budget.eval_every} epochs"
        if budget.eval_every > 1 and exp.dev is not None
        else ""
    )
    line = (
        f"budget: {budget.epochs} epochs x {budget.steps_per_epoch} optimiser steps "
        f"({t.batch_size} {unit} a batch) = {budget.steps} steps{every}"
    )
    if budget.steps_per_epoch < FEW_STEPS:
        line = f"[yellow]warning:[/yellow] only {budget.steps_per_epoch} optimiser steps per epoch; {line}"
        if t.epochs is not None and budget.steps < t.min_steps:
            line += f" (train.epochs = {t.epochs} was given: unset it for the automatic budget of >= {t.min_steps} steps)"
    lines.append(line)
    lines.append(selection_line(exp))
    return lines


def selection_line(exp: Experiment) -> str:
    """Which model the run keeps, and why that metric: said before training starts."""
    if exp.dev is None:
        return "selection: no dev split: the model of the last epoch is kept"
    metric = selection_metric(exp)
    protocol = exp.dev.protocol
    if exp.config.train.select_metric:
        why = "train.select_metric"
    else:
        why = f"the primary metric of the dev protocol {protocol.name!r}"
        if "primary" in protocol.description:  # your pairs: the rule that chose it
            why += f": {protocol.description}"
    line = f"selection: the epoch with the best dev {metric} ({why})"
    note = for_task(_SELECTION_NOTES, exp.matcher.task)(exp.matcher.task)
    return line + (f"; {note}" if note else "")


def never_improved(exp: Experiment, state: TrainState) -> str | None:
    """A note when dev was evaluated more than once and the first evaluation stayed the best."""
    evaluated = [h for h in state.history if h.get("dev")]
    if exp.dev is None or len(evaluated) < 2 or state.best_epoch != evaluated[0]["epoch"]:
        return None
    metric = selection_metric(exp)
    return (
        f"dev {metric} was best at its first evaluation (epoch {state.best_epoch}); the "
        f"{len(evaluated) - 1} later evaluations did not improve it"
    )


def below_floor(
    metric: str, value: float, floors: dict[str, dict[str, float]], where: str = "dev"
) -> str | None:
    """A warning when `value` of `metric` does not beat the best no-training floor."""
    better = greater_is_better(metric)
    scored = {name: m[metric] for name, m in floors.items() if metric in m}
    if not scored:
        return None
    name = (max if better else min)(scored, key=lambda n: scored[n])
    floor = scored[name]
    if (value > floor) if better else (value < floor):
        return None
    return (
        f"[yellow]warning:[/yellow] {where} {metric} {value:.4f} does not beat the {name} "
        f"floor {floor:.4f}: the model learned less than that baseline, which needs no training"
    )


def _with_wall(state: TrainState, wall: float) -> TrainState:
    """`state` as checkpointed: its wall time including that of this launch (since the last start or resume)."""
    return dataclasses.replace(state, wall_time_s=wall)


def epoch_line(
    exp: Experiment, state: TrainState, entry: dict[str, Any], dev: dict[str, float] | None
) -> str:
    """The one-line summary of an epoch."""
    loss, seconds = entry["train_loss"], max(entry["epoch_time_s"], 1e-9)
    line = f"epoch {entry['epoch']:3d}  loss {loss:.4f}" if loss is not None else ""
    if dev is not None and exp.dev is not None:
        metric = selection_metric(exp)
        star = "  *" if state.best_epoch == entry["epoch"] else ""
        line += f"  dev {metric} {dev[metric]:.4f}{star}"
    return line + f"  ({entry['epoch_time_s']:.1f}s, {entry['train_pairs'] / seconds:,.0f} pairs/s)"
