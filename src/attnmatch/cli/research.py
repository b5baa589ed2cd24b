"""`attnmatch reproduce` (paper tables, and claims), `attnmatch tune` and `attnmatch analyze`:
the commands of the research tooling, which they import (`attnmatch.research`) when they run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from attnmatch.cli.console import err, out
from attnmatch.cli.files import check_output_file, check_output_folder, reading, writing
from attnmatch.cli.options import parse_seeds, parse_sets
from attnmatch.terminal import shown


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
    from attnmatch.research.analysis import attention_position_many, write_results_json

    if label and len(label) != len(model_dirs):
        raise typer.BadParameter(
            f"{len(label)} labels for {len(model_dirs)} model directories; give one per model",
            param_hint="--label",
        )
    json_path, png_path = Path(f"{output}.json"), Path(f"{output}.png")
    for path in (json_path, png_path) if plot else (json_path,):
        check_output_file(path, "--output")
    options = parse_sets(dataset_option or [], "--dataset-option")
    with reading(", ".join(map(str, model_dirs))):
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
    with writing(json_path, "--output"):
        write_results_json(json_path, results)
    _print_attention_position(results, f"{dataset}, {key}")
    out.print(shown(f"wrote {json_path}"))
    if plot:
        _plot_attention_position(results, png_path)


def _print_attention_position(results: list[dict[str, Any]], where: str) -> None:
    """The mean relative weight of each model by position bin, as a table."""
    from rich.box import SIMPLE_HEAD
    from rich.table import Table

    table = Table(
        title=shown(f"mean relative attention by position ({where}; 1.00 = uniform)"),
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


def _plot_attention_position(results: list[dict[str, Any]], png_path: Path) -> None:
    """OUTPUT.png; without matplotlib, a warning instead."""
    from attnmatch.research.analysis import plot_attention_position

    try:
        with writing(png_path, "--output"):
            plot_attention_position(results, [r["label"] for r in results], png_path)
    except ImportError as e:
        message = shown(f"{png_path} not written: {e}")
        err.print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)
    else:
        out.print(shown(f"wrote {png_path}"))


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
    add_seeds: Annotated[
        bool,
        typer.Option(
            help="With --update: keep each row's recorded seeds and train only the seeds of "
            "--seeds it lacks (its means recomputed over all)."
        ),
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
        _reproduce_claims(
            runs_dir,
            results_dir,
            setting=setting,
            systems=systems,
            jobs=jobs,
            threads=threads,
            device=device,
            train=train,
        )
        return
    from attnmatch.research.reproduce import find_table, load_table, render_markdown
    from attnmatch.research.reproduce import reproduce as run

    seed_list = parse_seeds(seeds)
    row_ids = None if rows is None else _row_ids(rows)
    _check_table_options(row_ids, update, add_seeds, runs_dir, results_dir)
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
        add_seeds=add_seeds,
    )
    _print_lines(render_markdown(result, spec.metrics))
    if row_ids is None or update:
        _say_claims_stale(results_dir)


def _check_table_options(
    row_ids: list[str] | None, update: bool, add_seeds: bool, runs_dir: Path, results_dir: Path
) -> None:
    """The folders and the --rows / --update / --add-seeds combination of `reproduce TABLE`,
    each refusal one line naming the option."""
    check_output_folder(runs_dir, "--runs-dir")
    if update and row_ids is None:
        raise typer.BadParameter(
            "--update replaces the rows given with --rows", param_hint="--update"
        )
    if add_seeds and not update:
        raise typer.BadParameter(
            "--add-seeds goes with --update and --rows", param_hint="--add-seeds"
        )
    if row_ids is None or update:
        check_output_folder(results_dir, "--results-dir")


def _say_claims_stale(results_dir: Path) -> None:
    """A table was written: the claims page beside it is decided from the tables (a system's
    row, a benchmark's best row), so it may now be out of date."""
    if (results_dir / "claims.json").is_file():
        err.print(
            shown(
                f"{results_dir / 'claims.json'} is decided from the tables in {results_dir}: "
                "decide it again with `attnmatch reproduce claims --no-train`"
            ),
            highlight=False,
        )


def _row_ids(rows: str) -> list[str]:
    """`--rows a,b`: distinct row ids."""
    row_ids = [r.strip() for r in rows.split(",")]
    if not all(row_ids) or len(set(row_ids)) != len(row_ids):
        raise typer.BadParameter(
            f"{rows!r}: give distinct row ids separated by commas, e.g. mvlstm,amvlstm_q",
            param_hint="--rows",
        )
    return row_ids


def _reproduce_claims(
    runs_dir: Path,
    results_dir: Path,
    *,
    setting: str | None,
    systems: str | None,
    jobs: int,
    threads: int,
    device: str | None,
    train: bool,
) -> None:
    """`attnmatch reproduce claims`: decides the claims and prints the page it writes."""
    from attnmatch.research.claims import render, reproduce_claims

    check_output_folder(runs_dir, "--runs-dir")
    check_output_folder(results_dir, "--results-dir")
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


def _print_lines(text: str) -> None:
    """Prints a page line by line, each shown as written (no markup, control characters
    escaped), so that its newlines stay newlines."""
    for line in text.split("\n"):
        out.print(shown(line), highlight=False, soft_wrap=True)


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
    from attnmatch.research.tune import load_tune_config
    from attnmatch.research.tune import tune as run

    check_output_folder(output, "--output")
    configs.load_toml(config)  # too large, not UTF-8, not TOML: one line naming the line
    with reading(config):
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
