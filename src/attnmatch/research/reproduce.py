"""`attnmatch reproduce TABLE`: run a paper table's rows over seeds and write results.

A table is a TOML file under `benchmarks/tables/` (see `amvlstm_table3.toml`):

    table = "amvlstm_table3"
    title = "..."
    protocol = "..."                 # how we evaluate, in one paragraph
    metrics = ["ndcg@3", "ndcg@5", "map", "mrr"]
    seeds = [1, 2, 3]
    notes = ["..."]                  # notes on the recipe, deviations and observations
    summary = "..."                  # optional: commentary for results/README.md
    [defaults]                       # an ExperimentConfig applied to every row
    [[rows]]
    id = "amvlstm_q"                 # a unique row id: the preset or model name unless `model`
    label = "aMV-LSTM (Q)"
    model = "amvlstm_q"              # optional: the preset or model (default: id)
    metrics = ["accuracy"]           # optional: this row's metrics (default: the table's)
    paper = { map = 0.650664 }       # the paper's numbers (omit if none)
    overrides = { ... }              # optional experiment overrides for this row (e.g. data)

The table name and every row id become file and folder names (`results/<table>.json`,
`runs/<table>/<id>/`): they are checked when the table is loaded (`configs.NAME_RULE`: letters,
digits, '.', '_' and '-', no '..'), and every path is checked to stay inside `runs_dir` /
`results_dir` before anything is written. Seeds are distinct integers >= 0.

Rows trained or evaluated on a split the dataset marks as non-standard (e.g. `quora`
"train-on-dev") are labelled "non-standard protocol" in the results.

Every run is selected on dev (best epoch by the dev protocol's primary metric) and the test split
is evaluated once with that model. Finished runs are reused (their folder is resumed), so an
interrupted reproduction continues where it stopped.

Results: `results/<table>.json` (for machines, one schema for every table) and `<table>.md`,
then `results/README.md` (an index of every table, `attnmatch.research.results_index`). Each
row records the commit each of its runs was trained at (`commits`, one per seed) and each run's
own training time (`train_time_s`: the sum of its epoch times over all its launches), read from
the run's `result.json`: a finished run that is reused keeps the commit and time of its
training, and the table's `commit` is the code that wrote the table.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from attnmatch import configs
from attnmatch.atomic import file_lock, write_text_atomic
from attnmatch.inputs import merge_inputs
from attnmatch.models import get_preset, list_models, list_presets
from attnmatch.research.results_index import render_markdown, write_results_readme
from attnmatch.strict_json import dumps_json
from attnmatch.terminal import shown
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.trainer import environment, summarize, train_seeds


@dataclass(frozen=True, kw_only=True)
class TableRow:
    id: str
    label: str
    model: str = ""
    metrics: tuple[str, ...] = ()
    paper: dict[str, float] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    # Why the row is listed but not run (e.g. "data not available"); empty: the row is run.
    not_run: str = ""
    # The seeds of this row when fewer than the table's are affordable (say why in `note`); a
    # `--seeds` given on the command line is cut to these.
    seeds: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        configs.check_name(self.id, "id")
        configs.check_seeds(self.seeds, "seeds", allow_empty=True)


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
    # Commentary on the results for results/README.md (copied into results/<table>.json).
    summary: str = ""

    def metrics_of(self, row: TableRow) -> tuple[str, ...]:
        return row.metrics or self.metrics

    def __post_init__(self) -> None:
        configs.check_name(self.table, "table")
        configs.check_seeds(self.seeds, "seeds")
        if not self.metrics:
            raise configs.ConfigError('metrics: no metrics; list at least one, e.g. ["map"]')
        if not self.rows:
            raise configs.ConfigError("rows: no rows; a table needs at least one [[rows]]")
        ids = [r.id for r in self.rows]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise configs.ConfigError(f"rows: row id(s) {twice} given twice; ids must be unique")


def find_table(name_or_path: str | Path) -> Path:
    """A table TOML by path, or by name under ./benchmarks/tables (searched upwards from cwd)."""
    if "\0" in str(name_or_path):
        raise ValueError(f"table {str(name_or_path)!r}: a name or path holds no NUL character")
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
    """The table TOML at `path`, validated, every row's experiment included.

    Raises:
        FileNotFoundError: no such file.
        ConfigError: one line naming the file and the field (`rows[2].id: ...`): not UTF-8, not
            TOML, an unknown key, a name that cannot be a file name, no seeds, a row whose
            experiment is invalid.
    """
    path = Path(path)
    data = configs.load_toml(path)
    try:
        spec = configs.from_dict(TableSpec, data)
        for row in spec.rows:
            experiment_for(spec, row)  # validate every row's config up front
    except (configs.ConfigError, KeyError) as e:
        message = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        raise configs.ConfigError(f"{path}: {' '.join(message.split())}") from e
    return spec


def say_if_dirty(commit: str, console: Console) -> None:
    """A loud line when the package's checkout has changes to src/ or benchmarks/ (`commit`
    ends in "-dirty"): every run trained now records its commit so."""
    if commit.endswith("-dirty"):
        console.print(
            f"warning: the code differs from commit {commit.removesuffix('-dirty')} (src/ or "
            f"benchmarks/ changed): every run trained now records {commit}; commit first for "
            "results that can be traced",
            style="bold",
            highlight=False,
            markup=False,
        )


def inside(folder: str | Path, *parts: str) -> Path:
    """`folder / parts...`, checked to stay inside `folder` (after resolving '..').

    Raises:
        ValueError: the path would leave `folder`.
    """
    base = Path(os.path.abspath(folder))
    path = Path(os.path.abspath(base.joinpath(*parts)))
    if path == base or base not in path.parents:
        raise ValueError(f"{'/'.join(parts)!r} would be written outside {folder}; refusing")
    return Path(folder).joinpath(*parts)


def model_of(row: TableRow) -> str:
    """The preset or model name a row trains."""
    return row.model or row.id


def experiment_for(spec: TableSpec, row: TableRow) -> ExperimentConfig:
    name = model_of(row)
    if name not in list_presets() and name not in list_models():
        raise KeyError(f"row {row.id!r}: {name!r} is neither a preset nor a registered model")
    data = configs.merge(spec.defaults, {"model": name})
    data = configs.merge(data, {k: v for k, v in row.overrides.items() if k != "inputs"})
    if "inputs" in row.overrides:  # another kind of inputs replaces the defaults' kind
        data["inputs"] = merge_inputs(spec.defaults.get("inputs"), row.overrides["inputs"])
    return ExperimentConfig.from_dict(data)


def non_standard_splits(exp: ExperimentConfig) -> list[str]:
    """The splits of `exp` that its dataset marks as non-standard (e.g. "train-on-dev")."""
    from attnmatch.data.datasets import get_dataset

    d = exp.data
    if d.dataset == "pairs":
        return []
    marked = get_dataset(d.dataset).non_standard_splits
    return [s for s in (d.train_split, d.dev_split, d.test_split) if s in marked]


def reproduce(
    table: str | Path,
    *,
    seeds: list[int] | None = None,
    rows: list[str] | None = None,
    runs_dir: str | Path = "runs",
    results_dir: str | Path = "results",
    progress: bool = True,
    console: Console | None = None,
    update: bool = False,
    add_seeds: bool = False,
) -> dict[str, Any]:
    """Trains every row of `table` over `seeds` and writes results/<table>.{json,md}.

    With `rows`, the results are not written, unless `update`: then those rows replace their
    namesakes in the existing results/<table>.json (the other rows are kept as they are). With
    `add_seeds` too, a row keeps the seeds it records and trains only those of `seeds` it lacks
    (`merge_seeds`): a row can gain a seed after its run folders are gone."""
    console = console or Console(stderr=True)
    env = environment()  # the code that runs is the code at the start
    say_if_dirty(env["commit"], console)
    spec = load_table(find_table(table))
    seeds = list(configs.check_seeds(seeds, "seeds") if seeds is not None else spec.seeds)
    selected = _selected_rows(spec, rows)
    for row in selected:  # before any training: every run folder stays inside runs_dir
        inside(runs_dir, spec.table, row.id)
    previous: dict[str, Any] | None = None
    if add_seeds and (rows is None or not update):
        raise ValueError("add_seeds adds seeds to the rows an update names: give rows and update")
    if rows is not None and update:
        saved = inside(results_dir, spec.table + ".json")
        if not saved.is_file():
            raise FileNotFoundError(f"{saved}: no table to update; reproduce the whole table first")
        previous = json.loads(saved.read_text(encoding="utf-8"))
    recorded = {r["id"]: r for r in previous["rows"]} if previous and add_seeds else {}
    if rows is None or update:
        for suffix in (".json", ".md"):
            inside(results_dir, spec.table + suffix)
    out_rows = [
        _row_result(spec, row, seeds, recorded.get(row.id), runs_dir, progress, console)
        for row in selected
    ]
    result = {
        "table": spec.table,
        "title": spec.title,
        "paper": spec.paper,
        "protocol": spec.protocol,
        "commit": env["commit"],
        "environment": env,
        "rows": out_rows,
        "notes": list(spec.notes),
        "summary": spec.summary,
    }
    if rows is None or update:  # partial reproductions overwrite nothing unless asked
        saved = inside(results_dir, spec.table + ".json")
        # Another `--update` of the same table may have finished while these rows trained: the
        # table is read again under a lock, so that its rows are kept too.
        saved.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(saved.with_name(f".{saved.name}.lock")):
            if previous is not None:  # the other rows as they are now
                spec = _merge_rows(result, out_rows, saved, spec, table)
            _write_result(result, spec, Path(results_dir))
    return result


def _row_result(
    spec: TableSpec,
    row: TableRow,
    seeds: list[int],
    old: dict[str, Any] | None,
    runs_dir: str | Path,
    progress: bool,
    console: Console,
) -> dict[str, Any]:
    """`row`'s results row: its "not run" row, or its runs over `seeds` (cut to the row's own
    seeds); with the row `old` as recorded (`add_seeds`), only the seeds it lacks are trained
    and merged into it (`merge_seeds`)."""
    exp = experiment_for(spec, row)
    if row.not_run:
        console.print(
            shown(f"{spec.table}: {row.label} ({row.id}) not run: {row.not_run}"),
            highlight=False,
        )
        return _not_run_row(spec, row, exp)
    row_seeds = [s for s in seeds if s in row.seeds] if row.seeds else seeds
    if not row_seeds:
        row_seeds = list(row.seeds)
    if old is not None:
        row_seeds = [s for s in row_seeds if s not in old["seeds"]]
        if not row_seeds:
            console.print(shown(f"{row.id}: already has seeds {old['seeds']}"), highlight=False)
            return old
    console.rule(f"[bold]{shown(f'{spec.table}: {row.label} ({row.id})')}, seeds {row_seeds}")
    fresh = _train_row(spec, row, exp, row_seeds, runs_dir, progress, console)
    return fresh if old is None else merge_seeds(old, fresh)


def _merge_rows(
    result: dict[str, Any],
    out_rows: list[dict[str, Any]],
    saved: Path,
    spec: TableSpec,
    table: str | Path,
) -> TableSpec:
    """Puts `out_rows` into the table as `saved` holds it now, in the order of the table file
    as it is now: a row added to the file while these trained, and written meanwhile by another
    `--update`, is kept (a row the file no longer has is dropped). Returns the spec the page
    is rendered with."""
    try:
        spec = load_table(find_table(table))  # the file may have gained rows since the start
    except (OSError, ValueError):  # edited into an invalid file meanwhile: the start's
        pass
    previous = json.loads(saved.read_text(encoding="utf-8"))
    fresh = {r["id"]: r for r in out_rows}
    kept = {r["id"]: r for r in previous["rows"]}
    result["rows"] = [
        fresh.get(r.id) or kept[r.id] for r in spec.rows if r.id in fresh or r.id in kept
    ]
    result.update(notes=list(spec.notes), summary=spec.summary, title=spec.title)
    return spec


def _same_experiment(old: Any, new: Any) -> bool:
    """Whether a recorded experiment is `new`: equal, where a key the record lacks (an option
    added after it was trained) is taken as equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        return set(old) <= set(new) and all(_same_experiment(old[k], new[k]) for k in old)
    return bool(old == new)


# A results row's lists with one entry per seed, in the order of its "seeds".
_PER_SEED = ("best_epochs", "train_pairs_per_s", "wall_time_s", "commits", "train_time_s")


def merge_seeds(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The results row of `old`'s seeds and `new`'s together, in order of seed: each seed's
    values as its run recorded them, means and sample standard deviations recomputed
    (`summarize`); the header of `new`. The experiments must be the same (`_same_experiment`:
    an option added since `old` was recorded is not a difference).

    Raises:
        ValueError: the rows share a seed, or were trained from other experiments (the row's
            configuration changed since `old` was recorded).
    """
    shared = sorted(set(old["seeds"]) & set(new["seeds"]))
    if shared:
        raise ValueError(f"{new['id']}: seeds {shared} are recorded already")
    if not _same_experiment(old.get("experiment"), new.get("experiment")):
        raise ValueError(
            f"{new['id']}: its recorded seeds were trained from another experiment (the table's "
            "row changed since): reproduce all its seeds instead"
        )
    seeds = sorted(old["seeds"] + new["seeds"])
    by_seed = {s: (old, i) for i, s in enumerate(old["seeds"])}
    by_seed |= {s: (new, i) for i, s in enumerate(new["seeds"])}

    def runs(section: str, metric: str) -> list[float]:
        return [float(r[section][metric]["runs"][i]) for r, i in (by_seed[s] for s in seeds)]

    merged = dict(new, seeds=seeds)
    for key in _PER_SEED:
        merged[key] = [r[key][i] for r, i in (by_seed[s] for s in seeds)]
    for section in ("metrics", "per_group", "dev"):
        names = [m for m in new[section] if m in old[section]]
        merged[section] = {m: summarize([{m: v} for v in runs(section, m)])[m] for m in names}
    return merged


def _selected_rows(spec: TableSpec, rows: list[str] | None) -> list[TableRow]:
    """The rows of `spec` named by `rows` (every row for None), in the table's order."""
    if rows is not None:
        if not rows:
            raise ValueError("rows: an empty list; give row ids, or None for every row")
        twice = sorted({r for r in rows if rows.count(r) > 1})
        if twice:
            raise ValueError(f"rows: row id(s) {twice} given twice")
    selected = [r for r in spec.rows if rows is None or r.id in rows]
    if rows is not None and len(selected) != len(rows):
        unknown = sorted(set(rows) - {r.id for r in spec.rows})
        raise ValueError(
            f"unknown row id(s) {unknown}; rows of {spec.table}: {[r.id for r in spec.rows]}"
        )
    return selected


def _train_row(
    spec: TableSpec,
    row: TableRow,
    exp: ExperimentConfig,
    row_seeds: list[int],
    runs_dir: str | Path,
    progress: bool,
    console: Console,
) -> dict[str, Any]:
    """Trains `row` over its seeds (finished runs reused) and returns its results row."""
    summary = train_seeds(
        exp,
        inside(runs_dir, spec.table, row.id),
        row_seeds,
        resume=True,
        progress=progress,
        console=console,
    )
    split_summary = summary["test"] if spec.split == "test" else summary["dev"]
    metrics = spec.metrics_of(row)
    provenance = [
        run_provenance(_run_dir(run, inside(runs_dir, spec.table, row.id), seed))
        for run, seed in zip(summary["runs"], row_seeds, strict=True)
    ]
    return {
        **_row_header(spec, row, exp),
        "metrics": {m: split_summary[m] for m in metrics},
        # Per-group values (e.g. SemEval "pearson/2015/images"), when the protocol has them.
        "per_group": {m: v for m, v in split_summary.items() if "/" in m},
        "dev": {m: summary["dev"][m] for m in metrics if m in summary["dev"]},
        "paper": dict(row.paper),
        "note": row.note,
        "seeds": row_seeds,
        "best_epochs": [r["best_epoch"] for r in summary["runs"]],
        "train_pairs_per_s": [r["train_pairs_per_s"] for r in summary["runs"]],
        "wall_time_s": [r["wall_time_s"] for r in summary["runs"]],
        # Per run: the commit it was trained at and its own training time (a reused run
        # keeps those of its training, not of this table's re-evaluation).
        "commits": [p["commit"] for p in provenance],
        "train_time_s": [p["train_time_s"] for p in provenance],
        "experiment": exp.to_dict(),
    }


def _write_result(result: dict[str, Any], spec: TableSpec, results: Path) -> None:
    """results/<table>.json and .md, then the index results/README.md."""
    # JSON any parser reads: a metric that is not a number (e.g. NaN) is written as null.
    write_text_atomic(inside(results, f"{spec.table}.json"), dumps_json(result, indent=2) + "\n")
    write_text_atomic(inside(results, f"{spec.table}.md"), render_markdown(result, spec.metrics))
    write_results_readme(results)


def _run_dir(run: dict[str, Any], default: Path, seed: int) -> Path:
    """A run's folder: as the trainer reports it, else runs/<table>/<row>/seed-<n>."""
    return Path(run["output_dir"]) if run.get("output_dir") else default / f"seed-{seed}"


def run_provenance(run_dir: str | Path) -> dict[str, Any]:
    """{"commit", "train_time_s"} of the run in `run_dir`, from its result.json.

    The trainer writes both as top-level keys. For older result.json files: the commit from
    metrics.environment (the code that wrote the file, i.e. its last training launch), and the
    training time as the sum of epoch_time_s over the run's history (result.json's, else the
    run's log.jsonl, which holds every epoch of every launch); None when neither is there.
    """
    run_dir = Path(run_dir)
    try:
        result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        result = {}
    if not isinstance(result, dict):
        result = {}
    commit = result.get("commit")
    if not commit:
        commit = result.get("metrics", {}).get("environment", {}).get("commit") or "unknown"
    train_time = result.get("train_time_s")
    if train_time is None:
        history = result.get("history")
        if history is None and (run_dir / "log.jsonl").is_file():
            try:
                history = [
                    json.loads(line)
                    for line in (run_dir / "log.jsonl").read_text(encoding="utf-8").splitlines()
                    if line.strip()
                ]
            except (OSError, ValueError):
                history = None
        if history is not None:
            try:
                train_time = round(sum(float(h["epoch_time_s"]) for h in history), 3)
            except (KeyError, TypeError, ValueError):
                train_time = None
    return {
        "commit": str(commit),
        "train_time_s": float(train_time) if train_time is not None else None,
    }


def _row_header(spec: TableSpec, row: TableRow, exp: ExperimentConfig) -> dict[str, Any]:
    """What a result row says about itself: ids, model, data and metric names."""
    name = model_of(row)
    return {
        "id": row.id,
        "label": row.label,
        "model": get_preset(name).model if name in list_presets() else name,
        "preset": name if name in list_presets() else None,
        "dataset": exp.data.dataset,
        "train_split": exp.data.train_split,
        "dev_split": exp.data.dev_split,
        "split": exp.data.test_split if spec.split == "test" else exp.data.dev_split,
        "non_standard": non_standard_splits(exp),
        "metric_names": list(spec.metrics_of(row)),
    }


def _not_run_row(spec: TableSpec, row: TableRow, exp: ExperimentConfig) -> dict[str, Any]:
    """A listed row with the paper's numbers and no results of ours."""
    return {
        **_row_header(spec, row, exp),
        "not_run": row.not_run,
        "metrics": {},
        "per_group": {},
        "dev": {},
        "paper": dict(row.paper),
        "note": row.note,
        "seeds": [],
    }
