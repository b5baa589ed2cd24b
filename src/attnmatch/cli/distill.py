"""`attnmatch distill`: a fast student trained on a teacher's scores (docs/training.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from attnmatch.cli.console import err, format_number, out
from attnmatch.cli.files import check_output_folder
from attnmatch.cli.options import parse_seeds, parse_sets
from attnmatch.cli.training import (
    DataDirOption,
    DatasetOption,
    InputsOption,
    OverwriteOption,
    SeedsOption,
    SetOption,
    TaskOption,
    merge_key,
)
from attnmatch.terminal import shown

_STUDENT_HELP = (
    "The student: a preset or model name, e.g. amvlstm_q (default: the task's, attention "
    "MP-CNN for similarity scores, aMV-LSTM (Q) otherwise)."
)


CrossPairsOption = Annotated[
    float,
    typer.Option(
        min=0.0,
        help="Classification and regression: pairs formed across groups that the teacher "
        "labels besides the gold pairs, as a share of the training pairs (small data: "
        "try 2-4).",
    ),
]
AugmentOption = Annotated[
    float,
    typer.Option(
        min=0.0,
        help="Classification and regression: pairs made from the training pairs by masking "
        "words and keeping n-grams, labelled by the teacher, as a share of the training "
        "pairs.",
    ),
]
CandidatesOption = Annotated[
    str,
    typer.Option(
        help="Ranking: extra candidates per query that the teacher labels, as B,R,T: BM25's "
        "best, drawn at random, and the nearest by the teacher's own vectors (a bi-encoder "
        "teacher).",
    ),
]
_ResumeOption = Annotated[
    bool,
    typer.Option(
        help="Continue an interrupted distillation in OUTPUT: finished runs are reused, the "
        "others continue from their last checkpoint."
    ),
]


def distill(
    teacher: Annotated[
        list[str],
        typer.Option(
            help="The teacher: a model folder, minilm-l6 (zero-shot) or bm25; repeat it to "
            "average several teachers' scores."
        ),
    ],
    student: Annotated[str | None, typer.Option(help=_STUDENT_HELP)] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Run folder.")] = Path(
        "runs/distill"
    ),
    dataset: DatasetOption = None,
    data_dir: DataDirOption = None,
    task: TaskOption = None,
    inputs: InputsOption = None,
    epochs: Annotated[int | None, typer.Option(min=1, help="Maximum epochs.")] = None,
    weights: Annotated[
        str,
        typer.Option(
            help="Weights of the teacher's loss beside the labels' (0: labels alone, 1: the "
            "teacher alone), one run each, the best on dev kept."
        ),
    ] = "0.5,1",
    loss: Annotated[
        str,
        typer.Option(
            help="Distillation loss: auto (margin_mse for ranking, score_mse for regression, "
            "soft_kl for classification), or listwise_kl for ranking."
        ),
    ] = "auto",
    cross_pairs: CrossPairsOption = 0.5,
    augment: AugmentOption = 0.0,
    candidates: CandidatesOption = "5,5,0",
    seeds: SeedsOption = None,
    set_: SetOption = [],  # noqa: B006
    speed: Annotated[
        bool, typer.Option(help="Measure teacher and student pairs/s on one CPU thread.")
    ] = True,
    overwrite: OverwriteOption = False,
    resume: _ResumeOption = False,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = False,
) -> None:
    """Distil a teacher into a fast student; prints teacher, student and floors side by side."""
    if resume and overwrite:
        raise typer.BadParameter("give --resume or --overwrite, not both", param_hint="--resume")
    given = parse_seeds(seeds)
    seed_list: list[int | None] = list(given) if given else [None]
    weight_list = _weights(weights)
    check_output_folder(output, "--output")
    flags = _flags(student, dataset, data_dir, None if task is None else task.value, epochs)
    from attnmatch.matcher import load_matcher
    from attnmatch.training.distill_runs import distill_seeds

    teachers = [load_matcher(t) for t in teacher]
    config, splits = _student_and_splits(set_, flags, inputs, (teachers[0], teacher[0]))
    options = _options(loss, weight_list, cross_pairs, augment, candidates)
    results = distill_seeds(
        config,
        teachers,
        splits,
        output,
        options,
        seed_list,
        console=err,
        progress=progress,
        overwrite=overwrite,
        resume=resume,
    )
    _report(output, results, teachers[0], splits, speed)


def _teachers_inputs(teacher: Any, source: str, splits: Any) -> str | None:
    """The student's inputs when none are named (`default_inputs`), said in one line."""
    from attnmatch.training.distillation import default_inputs
    from attnmatch.training.experiment import experiment_task

    inputs = default_inputs(teacher, source, experiment_task(splits[0], splits[1]))
    if inputs is not None:
        err.print(
            f"student inputs: {inputs} (the teacher's own token vectors, distilled once by "
            "model2vec: for ranking they beat GloVe and word pieces, WikiQA .714 against .654 "
            "and .691 in results/distill.md; --inputs to choose others)",
            markup=False,
            highlight=False,
        )
    return inputs


def _flags(
    student: str | None,
    dataset: str | None,
    data_dir: Path | None,
    task: str | None,
    epochs: int | None,
) -> dict[str, Any]:
    """The config keys the options set (None: an option left out)."""
    return {
        "model": student,
        "data.dataset": dataset,
        "data.data_dir": None if data_dir is None else str(data_dir),
        "data.options.task": task,
        "train.epochs": epochs,
    }


def _report(output: Path, results: list[Any], teacher: Any, splits: Any, speed: bool) -> None:
    """Measures the speeds (with `speed`), writes OUTPUT/summary.json and prints it."""
    from attnmatch.training import distill_runs

    _, dev, test = splits
    split = test or dev
    speeds = distill_runs.speeds(teacher, results[0].model_dir, split) if speed and split else {}
    _print_side_by_side(distill_runs.write_summary(output, results, speeds), test is not None)
    out.print(f"student saved to [bold]{shown(results[0].model_dir)}[/bold]")


def _student_and_splits(
    sets: list[str], flags: dict[str, Any], inputs: str | None, teacher: tuple[Any, str]
) -> tuple[Any, Any]:
    """The student's experiment (`_student_config`) and the data's (train, dev, test) splits;
    without a student named (`--student`, `--set model=`), the task's (`default_student`);
    without inputs named, the teacher's static vectors where the task reads them by default
    (`_teachers_inputs`; `teacher`: the first teacher and its source)."""
    from attnmatch.training.distillation import default_student, default_student_why
    from attnmatch.training.experiment import load_splits

    config = _student_config(sets, flags, inputs)
    splits = load_splits(config)
    if flags["model"] is None and "model" not in parse_sets(sets):
        flags = flags | {"model": default_student(splits)}
        config = _student_config(sets, flags, inputs)
        err.print(
            f"student: {flags['model']} (the task's default: {default_student_why(splits)}; "
            "--student to choose another)",
            markup=False,
            highlight=False,
        )
    if inputs is None and not any(s.startswith("inputs") for s in sets):
        chosen = _teachers_inputs(*teacher, splits)
        if chosen is not None:
            config = _student_config(sets, flags, chosen)
    return config, splits


def _student_config(sets: list[str], flags: dict[str, Any], inputs: str | None) -> Any:
    """The student's experiment: `--set` overrides, then the options given (`flags`, None
    for an option left out), then the inputs."""
    from attnmatch.training import ExperimentConfig

    overrides = parse_sets(sets)
    for key, value in flags.items():
        if value is not None:
            overrides = merge_key(overrides, key, value)
    return ExperimentConfig.from_dict(overrides).with_inputs(inputs, trainable=None)


def _options(
    loss: str, weights: tuple[float, ...], cross_pairs: float, augment: float, candidates: str
) -> Any:
    """The `DistillConfig` the options give."""
    from attnmatch.training.distillation import DistillConfig

    bm25, random, nearest = _candidates(candidates)
    return DistillConfig(
        loss=loss,
        weights=weights,
        cross_pairs=cross_pairs,
        augmented=augment,
        bm25_candidates=bm25,
        random_candidates=random,
        teacher_candidates=nearest,
    )


def _candidates(text: str) -> tuple[int, int, int]:
    """--candidates B,R,T as three counts >= 0 (BadParameter otherwise)."""
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise typer.BadParameter(
            f"expected three counts B,R,T such as 5,5,0, got {text!r}", param_hint="--candidates"
        )
    b, r, t = (int(p) for p in parts)
    return b, r, t


def _weights(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(w) for w in text.split(",") if w.strip())
    except ValueError:
        raise typer.BadParameter(f"expected numbers like 0.5,1, got {text!r}") from None
    if not values or any(not 0.0 <= w <= 1.0 for w in values):
        raise typer.BadParameter(f"weights must lie in [0, 1], got {text!r}")
    return values


def _print_side_by_side(summary: dict[str, Any], has_test: bool) -> None:
    """Teacher, student(s) and floors, one line each: dev and test primary metrics, pairs/s,
    then the split's other metrics (a paraphrase student's F1 beside its accuracy)."""
    split = "test" if has_test else "dev"
    students = summary["students"]
    metric = _primary(students[0], split)
    speeds = summary["pairs_per_s"]

    def row(name: str, dev: Any, metrics: dict[str, Any], per_s: Any) -> None:
        cells = f"{name:<28} dev {format_number(dev)}  {split} {format_number(metrics.get(metric))}"
        cells += f"  {per_s:,.0f} pairs/s" if per_s else ""
        others = [
            f"{k} {format_number(v)}"
            for k, v in metrics.items()
            if k != metric and not k.startswith("num_") and isinstance(v, float)
        ]
        out.print(cells + (f"  ({', '.join(others)})" if others else ""), highlight=False)

    out.print(f"[bold]{metric}[/bold] (one CPU thread for pairs/s; the machine may be shared)")
    teacher = summary["teacher"]
    row(
        "teacher",
        teacher.get("dev", {}).get(metric),
        teacher.get(split, {}),
        speeds.get("teacher"),
    )
    for r in students:
        name = f"student (weight {r['weight']:g})"
        row(name, (r["dev"] or {}).get(metric), r[split] or {}, speeds.get("student"))
    floors = summary["floors"]
    for name in floors.get(split) or floors.get("dev") or {}:
        row(
            f"floor: {name}",
            floors.get("dev", {}).get(name, {}).get(metric),
            floors.get(split, {}).get(name, {}),
            speeds.get(name),
        )
    for name, why in (students[0].get("floors_left_out") or {}).items():
        out.print(f"floor left out: {name}: {why}", highlight=False, markup=False)


def _primary(result: dict[str, Any], split: str) -> str:
    """The first metric of the student's split (the protocol's order puts the primary first)."""
    metrics = result.get(split) or result.get("dev") or {}
    return next(iter(metrics), "score")
