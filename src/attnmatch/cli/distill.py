"""`attnmatch distill`: a fast student trained on a teacher's scores (docs/training.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from attnmatch.atomic import write_text_atomic
from attnmatch.cli.console import err, out
from attnmatch.cli.files import _check_output_folder
from attnmatch.cli.options import _parse_sets, _seeds
from attnmatch.cli.training import (
    _DataDirOption,
    _DatasetOption,
    _InputsOption,
    _merge_key,
    _OverwriteOption,
    _SeedsOption,
    _SetOption,
    _TaskOption,
)
from attnmatch.terminal import shown

_STUDENT_HELP = (
    "The student: a preset or model name, e.g. amvlstm_q (default: the task's, attention "
    "MP-CNN for similarity scores, aMV-LSTM (Q) otherwise)."
)
SPEED_PAIRS = 300  # pairs of the test (or dev) split each model scores for its pairs/s


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
    dataset: _DatasetOption = None,
    data_dir: _DataDirOption = None,
    task: _TaskOption = None,
    inputs: _InputsOption = None,
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
    cross_pairs: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Classification and regression: pairs formed across groups that the teacher "
            "labels besides the gold pairs, as a share of the training pairs (small data: "
            "try 2-4).",
        ),
    ] = 0.5,
    seeds: _SeedsOption = None,
    set_: _SetOption = [],  # noqa: B006
    speed: Annotated[
        bool, typer.Option(help="Measure teacher and student pairs/s on one CPU thread.")
    ] = True,
    overwrite: _OverwriteOption = False,
    resume: _ResumeOption = False,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = False,
) -> None:
    """Distil a teacher into a fast student; prints teacher, student and floors side by side."""
    if resume and overwrite:
        raise typer.BadParameter("give --resume or --overwrite, not both", param_hint="--resume")
    given = _seeds(seeds)
    seed_list: list[int | None] = list(given) if given else [None]
    weight_list = _weights(weights)
    _check_output_folder(output, "--output")
    flags = {
        "model": student,
        "data.dataset": dataset,
        "data.data_dir": None if data_dir is None else str(data_dir),
        "data.options.task": None if task is None else task.value,
        "train.epochs": epochs,
    }
    from attnmatch.matcher import load_matcher
    from attnmatch.training.distill import DistillConfig

    teachers = [load_matcher(t) for t in teacher]
    config, splits = _student_and_splits(set_, flags, inputs)
    options = DistillConfig(loss=loss, weights=weight_list, cross_pairs=cross_pairs)
    folders = {"overwrite": overwrite, "resume": resume}
    results = _runs(config, teachers, splits, output, options, seed_list, progress, folders)
    first = results[0]
    _, dev, test = splits
    speeds: dict[str, float] = {}
    if speed:
        speeds = _speeds(teachers[0], first.model_dir, test or dev)
    summary = _with_earlier_seeds(_summary(first, results, speeds), output / "summary.json")
    write_text_atomic(output / "summary.json", json.dumps(summary, indent=2) + "\n")
    _print_side_by_side(summary, test is not None)
    out.print(f"student saved to [bold]{shown(first.model_dir)}[/bold]")


def _student_and_splits(
    sets: list[str], flags: dict[str, Any], inputs: str | None
) -> tuple[Any, Any]:
    """The student's experiment (`_student_config`) and the data's (train, dev, test) splits;
    without a student named (`--student`, `--set model=`), the task's (`default_student`)."""
    from attnmatch.training.distill import default_student
    from attnmatch.training.experiment import load_splits

    config = _student_config(sets, flags, inputs)
    splits = load_splits(config)
    if flags["model"] is None and "model" not in _parse_sets(sets):
        flags = flags | {"model": default_student(splits)}
        config = _student_config(sets, flags, inputs)
        err.print(f"student: {flags['model']} (the task's default; --student to choose another)")
    return config, splits


def _student_config(sets: list[str], flags: dict[str, Any], inputs: str | None) -> Any:
    """The student's experiment: `--set` overrides, then the options given (`flags`, None
    for an option left out), then the inputs."""
    from attnmatch.training import ExperimentConfig

    overrides = _parse_sets(sets)
    for key, value in flags.items():
        if value is not None:
            overrides = _merge_key(overrides, key, value)
    return ExperimentConfig.from_dict(overrides).with_inputs(inputs, trainable=None)


def _runs(
    config: Any,
    teachers: list[Any],
    splits: Any,
    output: Path,
    options: Any,
    seeds: list[int | None],
    progress: bool,
    folders: dict[str, bool],
) -> list[Any]:
    """One distillation per seed (OUTPUT/seed-<s>/ when seeds are given), sharing the
    teacher's cached scores; the teacher is evaluated with the first. `folders`: overwrite
    and resume, as `distill_splits` takes them."""
    from attnmatch.training.distill import CACHE_FILE, distill_splits

    results: list[Any] = []
    for seed in seeds:
        run_config = config if seed is None else config.with_overrides({"train": {"seed": seed}})
        results.append(
            distill_splits(
                run_config,
                teachers,
                splits,
                output if seed is None else output / f"seed-{seed}",
                options,
                console=err,
                progress=progress,
                overwrite=folders["overwrite"],
                resume=folders["resume"],
                cache=output / CACHE_FILE,
                evaluate_teacher=not results,
            )
        )
    return results


def _weights(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(w) for w in text.split(",") if w.strip())
    except ValueError:
        raise typer.BadParameter(f"expected numbers like 0.5,1, got {text!r}") from None
    if not values or any(not 0.0 <= w <= 1.0 for w in values):
        raise typer.BadParameter(f"weights must lie in [0, 1], got {text!r}")
    return values


def _speeds(teacher: Any, model_dir: Path, split: Any) -> dict[str, float]:
    """One-thread pairs/s of the teacher, the student and the lexical floors, side by side
    (interleaved), on pairs of new text (`new_text_pairs`)."""
    from attnmatch.floors import FLOOR_LEXICAL
    from attnmatch.matcher import Matcher
    from attnmatch.training.distill import new_text_pairs, pairs_per_second

    pairs = new_text_pairs(split.examples, SPEED_PAIRS)
    matchers = {"teacher": teacher, "student": Matcher.load(model_dir)}
    matchers |= {name: Matcher.from_lexical(name) for name in FLOOR_LEXICAL}
    return pairs_per_second(matchers, pairs)


def _summary(first: Any, results: list[Any], speeds: dict[str, float]) -> dict[str, Any]:
    """What the command prints and writes to OUTPUT/summary.json."""
    return {
        "teacher": first.teacher_metrics,
        "students": [r.to_dict() for r in results],
        "floors": first.floors,
        "pairs_per_s": {k: round(v, 1) for k, v in speeds.items()},
    }


def _with_earlier_seeds(summary: dict[str, Any], file: Path) -> dict[str, Any]:
    """`summary` with the students of an earlier summary in the same folder that this command
    did not train again (seeds added later: `--seeds 4,5` beside 1-3), when that summary is of
    the same teacher (equal teacher metrics) and their folders remain; its pairs/s are kept
    when this command measured none (`--no-speed`)."""
    if not file.is_file():
        return summary
    try:
        earlier = json.loads(file.read_text())
    except (OSError, ValueError):
        return summary
    if not isinstance(earlier, dict) or earlier.get("teacher") != summary["teacher"]:
        return summary
    trained = {s["output_dir"] for s in summary["students"]}
    kept = [
        s
        for s in earlier.get("students", [])
        if s.get("output_dir") not in trained and Path(s.get("output_dir", "")).is_dir()
    ]
    students = sorted(kept + summary["students"], key=lambda s: _seed_order(s["output_dir"]))
    speeds = summary["pairs_per_s"] or earlier.get("pairs_per_s", {})
    return summary | {"students": students, "pairs_per_s": speeds}


def _seed_order(folder: str) -> tuple[int, str]:
    name = Path(folder).name
    number = name.removeprefix("seed-")
    return (int(number), folder) if number.isdigit() else (-1, folder)


def _print_side_by_side(summary: dict[str, Any], has_test: bool) -> None:
    """Teacher, student(s) and floors, one line each: dev and test primary metrics, pairs/s."""
    from attnmatch.cli.console import _number

    split = "test" if has_test else "dev"
    students = summary["students"]
    metric = _primary(students[0], split)
    speeds = summary["pairs_per_s"]

    def row(name: str, dev: Any, value: Any, per_s: Any) -> None:
        cells = f"{name:<28} dev {_number(dev)}  {split} {_number(value)}"
        out.print(cells + (f"  {per_s:,.0f} pairs/s" if per_s else ""), highlight=False)

    out.print(f"[bold]{metric}[/bold] (one CPU thread for pairs/s; the machine may be shared)")
    teacher = summary["teacher"]
    row(
        "teacher",
        teacher.get("dev", {}).get(metric),
        teacher.get(split, {}).get(metric),
        speeds.get("teacher"),
    )
    for r in students:
        name = f"student (weight {r['weight']:g})"
        row(name, (r["dev"] or {}).get(metric), (r[split] or {}).get(metric), speeds.get("student"))
    floors = summary["floors"]
    for name in floors.get(split) or floors.get("dev") or {}:
        row(
            f"floor: {name}",
            floors.get("dev", {}).get(name, {}).get(metric),
            floors.get(split, {}).get(name, {}).get(metric),
            speeds.get(name),
        )


def _primary(result: dict[str, Any], split: str) -> str:
    """The first metric of the student's split (the protocol's order puts the primary first)."""
    metrics = result.get(split) or result.get("dev") or {}
    return next(iter(metrics), "score")
