"""Training curves: `attnmatch plot RUN [RUN ...] -o curves.png`.

Reads each run's `log.jsonl` (`run_dir.RunDir.read_log`: one entry per epoch, `train_loss` and
`dev` metrics) and draws two panels, the training loss and the dev selection metric against the
epoch. A multi-seed folder (`train_seeds`: `seed-<s>/` runs) draws one thin line per seed and
their mean, thick, over the epochs every seed ran (early stopping ends seeds at different
epochs). A run still training is drawn as far as it got.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.atomic import write_bytes_atomic
from attnmatch.training.run_dir import RunDir

PLOT_INSTALL_HINT = "pip install 'attnmatch[plot]'"


@dataclass(frozen=True)
class Curve:
    """One run's curves: per epoch, the training loss and the dev metric (NaN where absent)."""

    label: str
    epochs: np.ndarray  # (E,)
    train_loss: np.ndarray  # (E,)
    dev: np.ndarray  # (E,)


@dataclass(frozen=True)
class RunCurves:
    """What one RUN argument draws: a run, or the seeds of a multi-seed folder."""

    label: str
    metric: str
    seeds: tuple[Curve, ...]


def seed_folders(path: Path) -> list[Path]:
    """The `seed-<s>/` runs of a multi-seed folder, by seed; [] when there are none."""
    found = [p for p in path.glob("seed-*") if (p / "log.jsonl").is_file()]

    def seed(p: Path) -> tuple[int, str]:
        tail = p.name.removeprefix("seed-")
        return (int(tail), "") if tail.isdigit() else (1 << 62, tail)

    return sorted(found, key=seed)


def run_metric(run: Path, entries: list[dict[str, Any]]) -> str:
    """The dev metric the run selected on: its train.select_metric, else its dataset's dev
    protocol's primary metric, else "map" or the first dev metric logged."""
    experiment: dict[str, Any] | None = None
    for file, keys in (
        (run / "result.json", ("metrics", "experiment")),
        (run / "checkpoint" / "trainer_state.json", ("experiment",)),
    ):
        try:
            node: Any = json.loads(file.read_text(encoding="utf-8"))
            for key in keys:
                node = node[key]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(node, dict):
            experiment = node
            break
    logged = next((list(e["dev"]) for e in entries if isinstance(e.get("dev"), dict)), [])
    if experiment is not None:
        chosen = (experiment.get("train") or {}).get("select_metric")
        if chosen:
            return str(chosen)
        data = experiment.get("data") or {}
        try:
            from attnmatch.data.datasets import get_dataset

            spec = get_dataset(str(data.get("dataset")))
            protocol = spec.protocol(
                str(data.get("dev_split", "dev")), **(data.get("options") or {})
            )
            if protocol is not None and protocol.primary in logged:
                return protocol.primary
        except (ValueError, KeyError, TypeError):
            pass  # your own pairs, or a dataset this version does not know
    if not logged:
        return "map"
    return "map" if "map" in logged else logged[0]


def read_curve(run: Path, label: str, metric: str | None) -> tuple[Curve, str]:
    """The curves of one run folder, and the metric drawn.

    Raises:
        ValueError: the folder has no log.jsonl, or it is damaged (file and line named), or
            has no epoch.
    """
    entries = RunDir(run).read_log()
    if not entries:
        raise ValueError(f"{run}: no epochs in {run / 'log.jsonl'} (is it a run folder?)")
    metric = metric or run_metric(run, entries)

    def number(value: Any) -> float:
        return (
            float(value)
            if isinstance(value, int | float) and not isinstance(value, bool)
            else np.nan
        )

    epochs = np.array([int(e.get("epoch", i + 1)) for i, e in enumerate(entries)])  # (E,)
    loss = np.array([number(e.get("train_loss")) for e in entries])  # (E,)
    dev = np.array([number((e.get("dev") or {}).get(metric)) for e in entries])  # (E,)
    return Curve(label=label, epochs=epochs, train_loss=loss, dev=dev), metric


def read_run(path: str | Path, metric: str | None = None) -> RunCurves:
    """A run folder (its log.jsonl) or a multi-seed folder (`seed-*/log.jsonl`).

    Raises:
        FileNotFoundError: no such folder, or neither a run nor a multi-seed folder.
        ValueError: a log is damaged or empty.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such run folder")
    if (path / "log.jsonl").is_file():
        curve, drawn = read_curve(path, path.name or str(path), metric)
        return RunCurves(label=path.name or str(path), metric=drawn, seeds=(curve,))
    seeds = seed_folders(path)
    if not seeds:
        raise FileNotFoundError(
            f"{path}: neither a run folder (log.jsonl) nor a multi-seed folder (seed-*/log.jsonl)"
        )
    curves: list[Curve] = []
    chosen: str | None = metric  # the first seed's selection metric, drawn for every seed
    for folder in seeds:
        curve, found = read_curve(folder, folder.name, chosen)
        curves.append(curve)
        chosen = found
    return RunCurves(label=path.name or str(path), metric=found, seeds=tuple(curves))


def seed_mean(seeds: Sequence[Curve]) -> Curve:
    """The mean curve of seeds over the epochs every seed ran."""
    n = min(len(c.epochs) for c in seeds)
    loss = np.nanmean(np.stack([c.train_loss[:n] for c in seeds]), axis=0)  # (n,)
    dev = np.stack([c.dev[:n] for c in seeds])  # (S, n)
    with np.errstate(invalid="ignore"):
        dev_mean = np.where(np.isnan(dev).any(axis=0), np.nan, dev.mean(axis=0))  # (n,)
    return Curve(label="mean", epochs=seeds[0].epochs[:n], train_loss=loss, dev=dev_mean)


def plot_runs(runs: Sequence[str | Path], output: str | Path, *, metric: str | None = None) -> Path:
    """Draws the training loss and dev metric per epoch of `runs` to a PNG, atomically.

    Args:
        runs: run folders or multi-seed folders.
        output: the PNG file.
        metric: the dev metric drawn (default: each run's selection metric).

    Raises:
        ImportError: matplotlib is not installed (with the command that installs it).
        FileNotFoundError, ValueError: as `read_run`; no runs.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(
            f"attnmatch plot needs matplotlib: {PLOT_INSTALL_HINT}", name="matplotlib"
        ) from None
    if not runs:
        raise ValueError("nothing to plot: give at least one run folder")
    loaded = [read_run(r, metric) for r in runs]
    fig = Figure(figsize=(11, 4.2))
    FigureCanvasAgg(fig)  # the Agg backend, without pyplot's global state
    loss_ax, dev_ax = fig.subplots(1, 2)
    colors = [f"C{i % 10}" for i in range(len(loaded))]
    for run, color in zip(loaded, colors, strict=True):
        many = len(run.seeds) > 1
        for seed in run.seeds:
            label = f"{run.label}/{seed.label}" if many else run.label
            style = {"linewidth": 1, "alpha": 0.35} if many else {"linewidth": 1.8}
            loss_ax.plot(seed.epochs, seed.train_loss, color=color, label=label, **style)
            finite = ~np.isnan(seed.dev)
            dev_ax.plot(
                seed.epochs[finite], seed.dev[finite], color=color, marker=".", label=label, **style
            )
        if many:
            mean = seed_mean(run.seeds)
            label = f"{run.label} (mean of {len(run.seeds)})"
            loss_ax.plot(mean.epochs, mean.train_loss, color=color, linewidth=2.2, label=label)
            finite = ~np.isnan(mean.dev)
            dev_ax.plot(
                mean.epochs[finite], mean.dev[finite], color=color, linewidth=2.2, label=label
            )
    metrics = sorted({r.metric for r in loaded})
    loss_ax.set_title("training loss")
    loss_ax.set_xlabel("epoch")
    loss_ax.set_ylabel("loss")
    dev_ax.set_title(f"dev {', '.join(metrics)}")
    dev_ax.set_xlabel("epoch")
    dev_ax.set_ylabel(", ".join(metrics))
    for ax in (loss_ax, dev_ax):
        ax.grid(alpha=0.3)
    dev_ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    path = Path(output)
    write_bytes_atomic(path, buffer.getvalue())
    return path
