"""`attnmatch train`, `plot` and `demo`."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from attnmatch.cli.console import err, format_number, out, print_metrics
from attnmatch.cli.files import check_output_file, check_output_folder, reading, writing
from attnmatch.cli.options import (
    DEVICE_HELP,
    PRECISION_HELP,
    Precision,
    checked_device,
    parse_seeds,
    parse_sets,
)
from attnmatch.terminal import shown, visible


class _Logger(StrEnum):
    tensorboard = "tensorboard"
    mlflow = "mlflow"
    wandb = "wandb"


class _OnConflict(StrEnum):
    error = "error"
    drop = "drop"
    max = "max"


class _TaskKind(StrEnum):
    ranking = "ranking"
    classification = "classification"
    regression = "regression"


# The options of `attnmatch train` whose help takes more than a line.
DatasetOption = Annotated[
    str | None, typer.Option(help="Dataset name, e.g. wikiqa, or pairs (your own files).")
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        help="The dataset's folder (data.data_dir); for --dataset pairs, the folder of your "
        "train.tsv, dev.tsv, test.tsv (or .csv, .jsonl, .parquet)."
    ),
]
TaskOption = Annotated[
    _TaskKind | None,
    typer.Option(
        help="The task of your own pairs (data.options.task; --dataset pairs or pairs:FOLDER "
        "only; default: inferred from train's labels, the reason printed). Benchmarks know "
        "their task."
    ),
]
_OnConflictOption = Annotated[
    _OnConflict | None,
    typer.Option(
        help="Your own pairs: one pair given two labels is an error listing every such pair "
        "(error, the default), or every line of it is dropped (drop), or its highest label "
        "kept (max) (data.options.on_conflict).",
    ),
]
InputsOption = Annotated[
    str | None,
    typer.Option(
        help="Input representation: glove-6b-50d (or a vectors file), random, trigrams, or a "
        "transformer (minilm-l6 or a Hugging Face model directory, frozen unless "
        "--fine-tune); default: the model's own."
    ),
]
_FineTuneOption = Annotated[
    bool | None,
    typer.Option(
        help="Train the input layer too (e.g. fine-tune the transformer), or keep it "
        "frozen; default: as the inputs say."
    ),
]
SeedsOption = Annotated[
    str | None, typer.Option(help="N (seeds 1..N) or a list 1,2,3: one run each, mean ± std.")
]
SetOption = Annotated[
    list[str], typer.Option("--set", help="Override any config key: train.lr=0.01")
]
OverwriteOption = Annotated[
    bool,
    typer.Option(
        help="Delete the previous run in OUTPUT first (only a run folder: one with "
        "result.json, log.jsonl, checkpoint/ or model/)."
    ),
]
_TrainDeviceOption = Annotated[
    str | None,
    typer.Option(help=DEVICE_HELP + " Default: train.device of the config (cpu)."),
]
_TrainPrecisionOption = Annotated[
    Precision | None,
    typer.Option(help=PRECISION_HELP + " Default: train.precision of the config (fp32)."),
]
_LogOption = Annotated[
    list[_Logger],
    typer.Option(
        "--log",
        help="Also log each epoch's scalars and the config to a tracker: tensorboard "
        "(OUTPUT/tensorboard/), mlflow (MLFLOW_TRACKING_URI, else OUTPUT/mlruns/), wandb "
        "(WANDB_MODE=offline works without a network); repeat for several. Each needs its "
        "extra.",
    ),
]

_KeepTrainedOption = Annotated[
    bool,
    typer.Option(
        "--keep-trained",
        help="Keep the trained model in OUTPUT/model even when a no-training floor (word "
        'overlap, BM25, MiniLM zero-shot) beats it on dev (train.keep = "trained"); by '
        "default that floor is saved there and the trained model in OUTPUT/trained-model.",
    ),
]

_MaxMemoryOption = Annotated[
    int | None,
    typer.Option(
        "--max-memory",
        min=1,
        metavar="MB",
        help="Aim to keep the run's peak resident memory under MB megabytes: a fine-tuned "
        "transformer then recomputes its activations in the backward pass when the estimate "
        "is above it (the same results, more CPU time) (train.max_memory).",
    ),
]


def train(
    config: Annotated[
        Path | None, typer.Argument(help="TOML experiment config (optional).")
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Run folder.")] = Path(
        "runs/train"
    ),
    model: Annotated[str | None, typer.Option(help="Preset or model name, e.g. amvlstm_q.")] = None,
    dataset: DatasetOption = None,
    data_dir: DataDirOption = None,
    task: TaskOption = None,
    on_conflict: _OnConflictOption = None,
    inputs: InputsOption = None,
    fine_tune: _FineTuneOption = None,
    epochs: Annotated[int | None, typer.Option(min=0, help="Maximum epochs.")] = None,
    seeds: SeedsOption = None,
    set_: SetOption = [],  # noqa: B006
    resume: Annotated[bool, typer.Option(help="Continue an interrupted run in OUTPUT.")] = False,
    overwrite: OverwriteOption = False,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    device: _TrainDeviceOption = None,
    precision: _TrainPrecisionOption = None,
    log: _LogOption = [],  # noqa: B006
    keep_trained: _KeepTrainedOption = False,
    max_memory: _MaxMemoryOption = None,
) -> None:
    """Train a model; OUTPUT/model holds the best on dev of it and the no-training floors."""
    seed_list = parse_seeds(seeds)  # options first: a bad one fails before torch loads
    overrides = parse_sets(set_)
    if device is not None:
        checked_device(device, (precision or Precision.fp32).value)
    check_output_folder(output, "--output")
    from attnmatch.training.distributed import world

    out.quiet = not world().is_main  # under torchrun, rank 0 alone prints the results

    flags = (
        ("model", model),
        ("data.dataset", dataset),
        ("data.data_dir", None if data_dir is None else str(data_dir)),
        ("data.options.task", None if task is None else task.value),
        ("data.options.on_conflict", None if on_conflict is None else on_conflict.value),
        ("train.epochs", epochs),
        ("train.device", device),
        ("train.precision", None if precision is None else precision.value),
        ("train.keep", "trained" if keep_trained else None),
        ("train.max_memory", max_memory),
    )
    for key, value in flags:
        if value is not None:
            overrides = merge_key(overrides, key, value)
    own = [flag for flag, v in (("--task", task), ("--on-conflict", on_conflict)) if v is not None]
    exp = _experiment(config, overrides, own)
    exp = exp.with_inputs(inputs, trainable=fine_tune)
    trackers = tuple(dict.fromkeys(logger.value for logger in log))
    if trackers:  # before training: a missing package fails at once, with its install hint
        from attnmatch.training.trackers import check_installed

        check_installed(trackers)
    runs = {"resume": resume, "overwrite": overwrite, "progress": progress}
    _train_and_report(exp, output, seed_list, log=trackers, **runs)


def _experiment(config: Path | None, overrides: dict[str, Any], own: list[str]) -> Any:
    """The ExperimentConfig of `attnmatch train`: CONFIG (if any) with the options' overrides;
    for your own pairs without a model, the default model for them (said on stderr)."""
    from attnmatch import configs
    from attnmatch.training import ExperimentConfig
    from attnmatch.training.config import load_experiment

    if config is None and "model" not in overrides and _own_pairs(overrides):
        from attnmatch.training.config import OWN_DATA_FALLBACK, own_data_model

        chosen, why = own_data_model()
        err.print(why, highlight=False, markup=False)
        overrides = merge_key(overrides, "model", chosen)
        if chosen == OWN_DATA_FALLBACK and "overlap_features" not in overrides:
            overrides = merge_key(overrides, "overlap_features", True)
    if config is not None:
        configs.load_toml(config)  # too large, not UTF-8, not TOML: one line naming the line
        with reading(config):
            exp = load_experiment(config, overrides)
    else:
        exp = ExperimentConfig.from_dict(overrides)
    if own and exp.data.dataset.partition(":")[0] != "pairs":  # pairs:FOLDER too
        raise typer.BadParameter(
            f"{own[0]} is for your own pairs (--dataset pairs or pairs:FOLDER); "
            f"{exp.data.dataset} has its own task and labels",
            param_hint=own[0],
        )
    return exp


def _train_and_report(
    exp: Any,
    output: Path,
    seed_list: list[int] | None,
    *,
    resume: bool,
    overwrite: bool,
    progress: bool,
    log: tuple[str, ...],
) -> None:
    """Trains one run (or one per seed) into `output` and prints its metrics (or their mean
    ± std over seeds)."""
    from attnmatch.training import train as train_run
    from attnmatch.training import train_seeds

    run_title = f"{output}: {exp.model} on {_data_label(exp)}"
    if seed_list:
        summary = train_seeds(
            exp,
            output,
            seed_list,
            resume=resume,
            overwrite=overwrite,
            progress=progress,
            console=err,
            log=log,
        )
        _print_summary(summary, run_title)
        return
    result = train_run(
        exp,
        output,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        console=err,
        log=log,
    )
    print_metrics({"dev": result.dev, "test": result.test}, title=run_title)
    _print_floors(result.floors)
    kept = result.kept or {}
    if kept.get("model", "trained") != "trained":
        print_metrics(
            {"dev": kept.get("dev"), "test": kept.get("test")},
            title=f"kept in {result.model_dir}: the {kept['model']} floor",
        )
        out.print(
            f"model saved to [bold]{shown(result.model_dir)}[/bold]: the {shown(kept['model'])} "
            f"floor, which beats the trained model on dev {shown(kept['metric'])}; the trained "
            f"model is in [bold]{shown(result.output_dir / 'trained-model')}[/bold]"
        )
    else:
        out.print(f"model saved to [bold]{shown(result.model_dir)}[/bold]")
    if result.peak_rss_mb is not None:
        out.print(f"peak memory: {result.peak_rss_mb:,.0f} MB resident (the training process)")


def _own_pairs(overrides: dict[str, Any]) -> bool:
    """Whether the command trains on the user's own pairs (--dataset pairs or pairs:FOLDER)."""
    dataset = str(overrides.get("data", {}).get("dataset", ""))
    return dataset.partition(":")[0] == "pairs"


def _print_floors(floors: dict[str, dict[str, dict[str, float]]] | None) -> None:
    """The no-training baselines of each split, in the metrics table's layout."""
    if not floors:
        return
    rows: dict[str, dict[str, float] | None] = {
        f"{split}: {name}": metrics
        for split, by_name in floors.items()
        for name, metrics in by_name.items()
    }
    print_metrics(rows, title="floors: the same splits scored without training")


def _data_label(exp: Any) -> str:
    """What a run trained on: the dataset's name, and for your own pairs their folder."""
    data = exp.data
    if data.dataset == "pairs" and data.data_dir:
        return f"pairs:{data.data_dir}"
    return str(data.dataset)


def merge_key(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    from attnmatch import configs

    node: dict[str, Any] = {}
    root = node
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return configs.merge(data, root)


def _print_summary(summary: dict[str, Any], title: str) -> None:
    from rich.table import Table

    peaks = [r["peak_rss_mb"] for r in summary.get("runs", []) if r.get("peak_rss_mb")]
    if peaks:
        out.print(f"peak memory: {max(peaks):,.0f} MB resident (the training process)")
    for split in ("dev", "test"):
        stats = summary.get(split)
        if not stats:
            continue
        seeds = ", ".join(str(s) for s in summary["seeds"])
        table = Table(title=shown(f"{title}, {split}: mean ± std over seeds {seeds}"))
        table.add_column("metric")
        table.add_column("mean ± std", justify="right")
        for name, s in stats.items():
            if name != "num_queries":
                table.add_row(
                    shown(name), f"{format_number(s['mean'])} ± {format_number(s['std'])}"
                )
        out.print(table)


def plot(
    runs: Annotated[
        list[Path], typer.Argument(help="Run folders, or multi-seed folders (seed-*/ runs).")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="The PNG file.")] = Path(
        "curves.png"
    ),
    metric: Annotated[
        str | None,
        typer.Option(help="The dev metric drawn (default: the metric each run selected on)."),
    ] = None,
) -> None:
    """Draw training loss and the dev metric per epoch of runs (one line per seed + mean)."""
    from attnmatch.training.curves import plot_runs, read_run

    check_output_file(output, "--output")
    for run in runs:  # a bad RUN is an error of its own, not one of writing --output
        read_run(run, metric)
    with writing(output, "--output"):
        path = plot_runs(runs, output, metric=metric)
    out.print(shown(f"wrote {path}"))


def demo(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Run folder (reused if present).")
    ] = Path("runs/demo"),
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """Train aMV-LSTM (Q) on bundled WikiQA with GloVe 6B 50d; compare with the paper."""
    from attnmatch import demo as recipe
    from attnmatch.training import train as train_run

    check_output_folder(output, "--output")
    exp = recipe.demo_experiment()
    err.print("[bold]attnmatch demo[/bold]: aMV-LSTM (Q) on WikiQA (official split), GloVe 6B 50d")
    err.print(f"the seed-1 run of the recipe of {recipe.RECIPE}, shortened:", highlight=False)
    for line in recipe.changes_lines():
        err.print(line, highlight=False, markup=False)
    earlier = output.is_dir() and any(output.iterdir())
    try:
        result = train_run(exp, output, resume=True, progress=progress, console=err)
    except ValueError as e:  # e.g. the folder holds a run of an earlier demo recipe
        if not earlier:
            raise
        raise ValueError(f"{e} (to train the demo again, remove {output})") from e
    print_metrics(
        {"dev": result.dev, "test": result.test},
        title=f"aMV-LSTM (Q) on WikiQA, {exp.train.epochs} epochs: ours (official split, "
        "dev-selected) vs the paper (their 80/10/10 split, 400 epochs)",
        paper=recipe.PAPER,
    )
    out.print(
        f"model saved to [bold]{shown(result.model_dir)}[/bold] (best epoch {result.best_epoch}, {result.wall_time_s:.0f}s)"
    )
    print(f"the full recipe: {recipe.FULL_RECIPE_COMMAND}")  # plain print: never wrapped
    print(
        f"try: attnmatch rank {visible(result.model_dir)} --query 'how are glacier caves "
        "formed?' --candidates examples/glacier.txt"
    )
