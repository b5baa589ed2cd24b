"""`attnmatch reproduce TABLE`: run a paper table's rows over seeds and write results.

A table is a TOML file under `benchmarks/tables/` (see `amvlstm_table3.toml`):

    table = "amvlstm_table3"
    title = "..."
    protocol = "..."                 # how we evaluate, in one paragraph
    metrics = ["ndcg@3", "ndcg@5", "map", "mrr"]
    seeds = [1, 2, 3]
    [defaults]                       # an ExperimentConfig applied to every row
    [[rows]]
    id = "amvlstm_q"                 # the preset or registered model name
    label = "aMV-LSTM (Q)"
    paper = { map = 0.650664 }       # the paper's numbers (omit if none)
    overrides = { ... }              # optional experiment overrides for this row

Every run is selected on dev (best epoch by the dev protocol's primary metric) and the test split
is evaluated once with that model. Finished runs are reused (their folder is resumed), so an
interrupted reproduction continues where it stopped.

Results: `results/<table>.json` (for machines, one schema for every table) and `<table>.md`.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from attnmatch import configs
from attnmatch.atomic import write_text_atomic
from attnmatch.models import get_preset, list_models, list_presets
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.trainer import environment, train_seeds

METRIC_LABELS = {
    "map": "MAP",
    "mrr": "MRR",
    "p@1": "P@1",
    "accuracy": "Accuracy",
    "f1": "F1",
    "pearson": "Pearson",
    "spearman": "Spearman",
    "mse": "MSE",
}


@dataclass(frozen=True, kw_only=True)
class TableRow:
    id: str
    label: str
    paper: dict[str, float] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    table: str
    title: str
    paper: str = ""
    protocol: str
    metrics: tuple[str, ...]
    seeds: tuple[int, ...] = (1, 2, 3)
    split: str = "test"
    defaults: dict[str, Any] = field(default_factory=dict)
    rows: tuple[TableRow, ...]
    notes: tuple[str, ...] = ()


def find_table(name_or_path: str | Path) -> Path:
    """A table TOML by path, or by name under ./benchmarks/tables (searched upwards from cwd)."""
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.is_file():
        return path
    for folder in [Path.cwd(), *Path.cwd().parents]:
        candidate = folder / "benchmarks" / "tables" / f"{name_or_path}.toml"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"table {name_or_path!r} not found: give a .toml path or run from the repository "
        "(looked for benchmarks/tables/<name>.toml in the current folder and its parents)"
    )


def load_table(path: str | Path) -> TableSpec:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise configs.ConfigError(f"{path}: invalid TOML: {e}") from e
    try:
        spec = configs.from_dict(TableSpec, data)
        for row in spec.rows:
            experiment_for(spec, row)  # validate every row's config up front
    except (configs.ConfigError, KeyError) as e:
        raise configs.ConfigError(f"{path}: {e}") from e
    return spec


def experiment_for(spec: TableSpec, row: TableRow) -> ExperimentConfig:
    if row.id not in list_presets() and row.id not in list_models():
        raise KeyError(f"row {row.id!r} is neither a preset nor a registered model")
    data = configs.merge(spec.defaults, {"model": row.id})
    data = configs.merge(data, row.overrides)
    return ExperimentConfig.from_dict(data)


def reproduce(
    table: str | Path,
    *,
    seeds: list[int] | None = None,
    rows: list[str] | None = None,
    runs_dir: str | Path = "runs",
    results_dir: str | Path = "results",
    progress: bool = True,
    console: Console | None = None,
) -> dict[str, Any]:
    """Trains every row of `table` over `seeds` and writes results/<table>.{json,md}."""
    console = console or Console(stderr=True)
    env = environment()  # the code that runs is the code at the start
    spec = load_table(find_table(table))
    seeds = list(seeds or spec.seeds)
    selected = [r for r in spec.rows if rows is None or r.id in rows]
    if rows is not None and len(selected) != len(rows):
        unknown = sorted(set(rows) - {r.id for r in spec.rows})
        raise ValueError(
            f"unknown row id(s) {unknown}; rows of {spec.table}: {[r.id for r in spec.rows]}"
        )
    out_rows = []
    for row in selected:
        exp = experiment_for(spec, row)
        console.rule(f"[bold]{spec.table}: {row.label} ({row.id}), seeds {seeds}")
        summary = train_seeds(
            exp,
            Path(runs_dir) / spec.table / row.id,
            seeds,
            resume=True,
            progress=progress,
            console=console,
        )
        split_summary = summary["test"] if spec.split == "test" else summary["dev"]
        out_rows.append(
            {
                "id": row.id,
                "label": row.label,
                "model": get_preset(row.id).model if row.id in list_presets() else row.id,
                "preset": row.id if row.id in list_presets() else None,
                "dataset": exp.data.dataset,
                "split": exp.data.test_split if spec.split == "test" else exp.data.dev_split,
                "metrics": {m: split_summary[m] for m in spec.metrics},
                "dev": {m: summary["dev"][m] for m in spec.metrics if m in summary["dev"]},
                "paper": dict(row.paper),
                "note": row.note,
                "seeds": seeds,
                "best_epochs": [r["best_epoch"] for r in summary["runs"]],
                "train_pairs_per_s": [r["train_pairs_per_s"] for r in summary["runs"]],
                "wall_time_s": [r["wall_time_s"] for r in summary["runs"]],
                "experiment": exp.to_dict(),
            }
        )
    result = {
        "table": spec.table,
        "title": spec.title,
        "paper": spec.paper,
        "protocol": spec.protocol,
        "commit": env["commit"],
        "environment": env,
        "rows": out_rows,
        "notes": list(spec.notes),
    }
    if rows is None:  # partial reproductions do not overwrite the committed table
        results = Path(results_dir)
        write_text_atomic(results / f"{spec.table}.json", json.dumps(result, indent=2) + "\n")
        write_text_atomic(results / f"{spec.table}.md", render_markdown(result, spec.metrics))
    return result


def _fmt(value: float) -> str:
    return f"{value:.4f}"


def render_markdown(result: dict[str, Any], metrics: tuple[str, ...] | list[str]) -> str:
    """A people-readable table: ours (mean ± std over seeds) beside the paper's numbers."""
    head = [METRIC_LABELS.get(m, m.replace("ndcg", "nDCG").replace("p@", "P@")) for m in metrics]
    lines = [
        f"# {result['title']}",
        "",
        f"Paper: {result['paper']}" if result.get("paper") else "",
        "",
        f"**Protocol.** {result['protocol']}",
        "",
        "Each cell: ours, mean ± sample std over seeds (test split, model selected on dev), "
        "then the paper's value in parentheses.",
        "",
        "| model | id | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(metrics),
    ]
    for row in result["rows"]:
        cells = []
        for m in metrics:
            s = row["metrics"][m]
            cell = f"{_fmt(s['mean'])} ± {_fmt(s['std'])}"
            if m in row["paper"]:
                cell += f" ({_fmt(row['paper'][m])})"
            cells.append(cell)
        lines.append(f"| {row['label']} | `{row['id']}` | " + " | ".join(cells) + " |")
    lines += ["", "Per-seed runs (test):", ""]
    for row in result["rows"]:
        runs = ", ".join(
            f"{m} " + "/".join(_fmt(v) for v in row["metrics"][m]["runs"]) for m in metrics
        )
        dev = ", ".join(f"{m} {_fmt(v['mean'])}" for m, v in row["dev"].items())
        lines.append(
            f"- `{row['id']}` seeds {row['seeds']}: {runs}; dev mean: {dev}; best epochs "
            f"{row['best_epochs']}; training pairs/s {row['train_pairs_per_s']}"
            + (f". {row['note']}" if row.get("note") else "")
        )
    if result.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {n}" for n in result["notes"]]
    env = result["environment"]
    lines += [
        "",
        f"Commit `{result['commit']}`; attnmatch {env['attnmatch']}, torch {env['torch']}, "
        f"Python {env['python']}, {env['threads']} threads, {env['platform']}.",
        "",
        f"Regenerate: `attnmatch reproduce {result['table']} --seeds "
        f"{','.join(str(s) for s in result['rows'][0]['seeds'])}`",
        "",
    ]
    return "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1]))
