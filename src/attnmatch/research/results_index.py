"""`results/README.md`: an index of the committed results tables, generated from `results/*.json`.

    python -m attnmatch.research.results_index              # rewrite it from results/*.json
    python -m attnmatch.research.results_index --check      # exit 1 when it is stale
    python -m attnmatch.research.results_index --sync-text  # first copy each table's TOML text

`attnmatch reproduce TABLE` calls `write_results_readme` after writing a table. The README has one
section per table: its title, a one-line protocol, a compact table of rows (the main metric's
mean ± std over seeds beside the paper's number, and the commits the runs were trained at), a link
to `results/<table>.md` and the table's hand-written `summary` (a key of the table's TOML that
`reproduce` copies into the JSON). Nothing in it is written by hand: edit the TOML, then run
`--sync-text`, which copies a table's text (title, paper, protocol, notes, summary, and each row's
label, note, not-run reason and paper numbers) from `benchmarks/tables/<table>.toml` into
`results/<table>.json` without touching any result, re-renders `results/<table>.md` and this index.

Every JSON file is written with `dumps_json`: strict JSON that any parser reads, where a value
that is not a finite number (NaN, infinity: e.g. an undefined Pearson) is `null`, shown as "n/a"
in the Markdown.

This module needs neither torch nor the models: it reads JSON and, for `--sync-text`, TOML.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attnmatch import configs
from attnmatch.atomic import write_text_atomic
from attnmatch.strict_json import dumps_json

README = "README.md"
GENERATOR = "python -m attnmatch.research.results_index"

METRIC_LABELS = {
    "map": "MAP",
    "mrr": "MRR",
    "p@1": "P@1",
    "accuracy": "Accuracy",
    "f1": "F1",
    "pearson": "Pearson",
    "spearman": "Spearman",
    "mse": "MSE",
    "macro_f1": "macro-F1",
    "r2@1": "R2@1",
    "r10@1": "R10@1",
    "r10@2": "R10@2",
    "r10@5": "R10@5",
}

# The main metric of a row in the index: the first of these that the row reports (the primary
# metric of each task's protocol: ranking, classification, regression, InsuranceQA, Ubuntu,
# Twitter), else the row's first metric.
MAIN_METRICS = ("map", "accuracy", "pearson", "p@1", "r10@1", "mrr")

RECOVERED = "recovered from git history"


def metric_label(name: str) -> str:
    return METRIC_LABELS.get(name, name.replace("ndcg", "nDCG").replace("p@", "P@"))


def is_table(data: Any) -> bool:
    """A results JSON written by `attnmatch reproduce` (other JSON files in results/ are not)."""
    return isinstance(data, dict) and "table" in data and isinstance(data.get("rows"), list)


def load_tables(results_dir: str | Path) -> list[dict[str, Any]]:
    """Every reproduce result in `results_dir`, sorted by file name."""
    tables = []
    for path in sorted(Path(results_dir).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise ValueError(f"{path}: not a readable JSON file: {_reason(e)}") from None
        if is_table(data):
            tables.append(data)
    return tables


def row_metric_names(row: dict[str, Any]) -> list[str]:
    return list(row.get("metric_names") or row.get("metrics") or row.get("paper") or [])


def main_metric(row: dict[str, Any]) -> str | None:
    names = row_metric_names(row)
    for name in MAIN_METRICS:
        if name in names:
            return name
    return names[0] if names else None


def not_run_text(reason: str) -> str:
    """ "not run: <reason>", or the reason alone when it says so itself ("not run yet")."""
    return reason if reason.lower().startswith("not run") else f"not run: {reason}"


def distinct(values: Iterable[Any]) -> list[Any]:
    """`values` without repeats, in order of first appearance."""
    return list(dict.fromkeys(values))


def commits_text(row: dict[str, Any]) -> str:
    """A row's training commits, compact: one per distinct commit, seeds named when they differ."""
    commits = row.get("commits") or []
    seeds = row.get("seeds") or []
    if not commits:
        return "unknown"
    unique = distinct(commits)
    if len(unique) == 1 or len(seeds) != len(commits):
        return ", ".join(f"`{c}`" for c in unique)
    parts = []
    for c in unique:
        own = [str(s) for s, rc in zip(seeds, commits, strict=True) if rc == c]
        parts.append(f"`{c}` (seed{'s' if len(own) > 1 else ''} {', '.join(own)})")
    return ", ".join(parts)


def _reason(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at line {error.lineno}, column {error.colno}"
    if isinstance(error, UnicodeDecodeError):
        return f"not UTF-8 (byte {error.start})"
    return "nested too deeply"


def _defined(value: float | None) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _fmt3(value: float | None) -> str:
    return f"{value:.3f}" if _defined(value) else "n/a"


def _data_text(row: dict[str, Any]) -> str:
    text = f"{row.get('dataset', '?')}: {row.get('train_split', 'train')} → {row.get('split', '?')}"
    if row.get("non_standard"):
        text += " (non-standard)"
    return text


def _one_line_protocol(table: dict[str, Any]) -> str:
    """Where the rows train and are evaluated, how many seeds, and how the model is selected."""
    run = [r for r in table["rows"] if not r.get("not_run")]
    seeds = distinct(tuple(r.get("seeds") or []) for r in run)
    if not seeds:
        seed_text = "no row run yet"
    elif len(seeds) == 1:
        seed_text = f"seeds {', '.join(str(s) for s in seeds[0])}"
    else:
        counts = sorted({len(s) for s in seeds}, reverse=True)
        seed_text = f"{'/'.join(str(c) for c in counts)} seeds (per row below)"
    datasets = distinct(r.get("dataset", "?") for r in table["rows"])
    non_standard = any(r.get("non_standard") for r in run)
    return (
        f"{', '.join(datasets)}; {seed_text}; each run's epoch selected on dev, test evaluated "
        "once; mean ± sample std over seeds"
        + ("; rows marked non-standard train on part of a dev set" if non_standard else "")
        + ". Full protocol, per-seed runs and notes: "
        f"[`{table['table']}.md`]({table['table']}.md)."
    )


def _seeds_of(result: dict[str, Any]) -> list[int]:
    run = [r["seeds"] for r in result["rows"] if r.get("seeds")]
    return max(run, key=len) if run else []


def _fmt(value: float | None) -> str:
    """Four decimals; "n/a" for a value that is not a number (null in the JSON)."""
    return f"{value:.4f}" if _defined(value) else "n/a"


def _seconds(values: list[float | None]) -> str:
    return "[" + ", ".join("?" if v is None else f"{v:.1f}" for v in values) + "]"


def render_markdown(result: dict[str, Any], metrics: tuple[str, ...] | list[str]) -> str:
    """A people-readable table: ours (mean ± std over seeds) beside the paper's numbers."""
    lines = [
        f"# {result['title']}",
        "",
        f"Paper: {result['paper']}" if result.get("paper") else "",
        "",
        f"**Protocol.** {result['protocol']}",
        "",
        "Each cell: ours, mean ± sample std over seeds (test split, model selected on dev), "
        "then the paper's value in parentheses.",
    ]
    lines += _metric_tables(result, metrics)
    lines += _per_group_lines(result)
    lines += _per_seed_lines(result, metrics)
    if result.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {n}" for n in result["notes"]]
    lines += _written_at_lines(result)
    return "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1]))


def _metric_tables(result: dict[str, Any], metrics: tuple[str, ...] | list[str]) -> list[str]:
    """One markdown table per run of rows that share their metrics (e.g. one per task)."""
    lines: list[str] = []
    groups: list[tuple[tuple[str, ...], list[dict[str, Any]]]] = []
    for row in result["rows"]:
        names = tuple(row.get("metric_names") or metrics)
        if not groups or groups[-1][0] != names:
            groups.append((names, []))
        groups[-1][1].append(row)
    with_data = len({r.get("dataset") for r in result["rows"]}) > 1 or any(
        r.get("non_standard") for r in result["rows"]
    )
    for names, rows in groups:
        head = [metric_label(m) for m in names]
        data_col = ["data (train → test)"] if with_data else []
        lines += [
            "",
            "| " + " | ".join(["model", "id", *data_col, *head]) + " |",
            "|" + "---|" * (2 + len(data_col) + len(names)),
        ]
        for row in rows:
            cells = []
            for m in names:
                if row.get("not_run"):
                    cell = "—"
                else:
                    s = row["metrics"][m]
                    cell = f"{_fmt(s['mean'])} ± {_fmt(s['std'])}"
                if m in row["paper"]:
                    cell += f" ({_fmt(row['paper'][m])})"
                cells.append(cell)
            label = row["label"]
            if row.get("not_run"):
                label += f" — *{not_run_text(row['not_run'])}*"
            elif row.get("non_standard"):
                label += " — **non-standard protocol**"
            data = (
                [f"{row['dataset']}: {row.get('train_split', '?')} → {row['split']}"]
                if with_data
                else []
            )
            lines.append("| " + " | ".join([label, f"`{row['id']}`", *data, *cells]) + " |")
    return lines


def _per_group_lines(result: dict[str, Any]) -> list[str]:
    """Each row's per-set values (SemEval STS), where it has them."""
    lines: list[str] = []
    per_group = [r for r in result["rows"] if r.get("per_group")]
    for row in per_group:
        lines += ["", f"Per set ({row['label']}, test, mean over seeds):", ""]
        lines += [
            f"- {m}: {_fmt(v['mean'])} ± {_fmt(v['std'])}"
            + (f" ({_fmt(row['paper'][m])})" if m in row["paper"] else "")
            for m, v in row["per_group"].items()
        ]
    return lines


def _per_seed_lines(result: dict[str, Any], metrics: tuple[str, ...] | list[str]) -> list[str]:
    """Each row's runs: test values per seed, dev means, epochs, speed, commits."""
    lines: list[str] = []
    lines += ["", "Per-seed runs (test):", ""]
    for row in result["rows"]:
        if row.get("not_run"):
            continue
        runs = ", ".join(
            f"{m} " + "/".join(_fmt(v) for v in row["metrics"][m]["runs"])
            for m in row.get("metric_names") or metrics
        )
        dev = ", ".join(f"{m} {_fmt(v['mean'])}" for m, v in row["dev"].items())
        times = row.get("train_time_s") or []
        trained = ""
        if row.get("commits"):
            trained = f"; trained at {commits_text(row)}"
            if row.get("provenance"):
                trained += f", {row['provenance']}"
        lines.append(
            f"- `{row['id']}` seeds {row['seeds']}: {runs}; dev mean: {dev}; best epochs "
            f"{row['best_epochs']}; training pairs/s {row['train_pairs_per_s']}"
            + (f"; training time s {_seconds(times)}" if any(t is not None for t in times) else "")
            + trained
            + (f". {row['note']}" if row.get("note") else "")
        )
    return lines


def _written_at_lines(result: dict[str, Any]) -> list[str]:
    """The commits and environment the table was written and trained at, and how to
    regenerate it."""
    lines: list[str] = []
    env = result["environment"]
    trained_at: dict[str, int] = {}
    for row in result["rows"]:
        for commit in dict.fromkeys(row.get("commits") or []):
            trained_at[commit] = trained_at.get(commit, 0) + 1
    runs_line = (
        "; runs trained at "
        + ", ".join(f"`{c}` ({n} row{'s' if n > 1 else ''})" for c, n in trained_at.items())
        if trained_at
        else ""
    )
    lines += [
        "",
        f"Table written at `{result['commit']}`{runs_line}; attnmatch {env['attnmatch']}, "
        f"torch {env['torch']}, Python {env['python']}, {env['threads']} "
        f"thread{'' if env['threads'] == 1 else 's'}, "
        f"{env['platform']}.",
        "",
        f"Regenerate: `attnmatch reproduce {result['table']} --seeds "
        f"{','.join(str(s) for s in _seeds_of(result))}`",
        "",
    ]
    return lines


def render_table_section(table: dict[str, Any]) -> list[str]:
    name = table["table"]
    rows = table["rows"]
    run = [r for r in rows if not r.get("not_run")]
    with_data = len({r.get("dataset") for r in rows}) > 1
    lines = [
        f"## {table['title']}",
        "",
        f"`{name}` · {_one_line_protocol(table)}",
        "",
    ]
    if run:
        lines += [
            "| model | "
            + ("data (train → test) | " if with_data else "")
            + "metric | ours | paper | seeds | runs trained at |",
            "|---|" + ("---|" if with_data else "") + "---|---|---|---|---|",
        ]
    recovered = False
    for row in run:
        metric = main_metric(row)
        if metric is None:
            continue
        s = row["metrics"][metric]
        paper = row.get("paper", {}).get(metric)
        trained = commits_text(row)
        if RECOVERED in str(row.get("provenance", "")):
            trained += " †"
            recovered = True
        label = row["label"] + f" (`{row['id']}`)"
        cells = [label]
        if with_data:
            cells.append(_data_text(row))
        cells += [
            metric_label(metric),
            f"{_fmt3(s['mean'])} ± {_fmt3(s['std'])}",
            _fmt3(paper) if paper is not None else "—",
            str(len(row.get("seeds") or [])),
            trained,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if run:
        lines.append("")
    lines.append(
        f"Table written at `{table['commit']}`"
        + (f"; † {RECOVERED} (see the top of this page)." if recovered else ".")
    )
    not_run = [r for r in rows if r.get("not_run")]
    if not_run:
        reasons = Counter(r["not_run"] for r in not_run)
        lines += [
            "",
            f"Listed, not run ({len(not_run)} row"
            + ("s" if len(not_run) > 1 else "")
            + "): "
            + "; ".join(f"{reason} ({n})" for reason, n in reasons.items())
            + ".",
        ]
    if table.get("summary"):
        lines += ["", table["summary"].strip()]
    lines.append("")
    return lines


def render_results_readme(results_dir: str | Path) -> str:
    """results/README.md as generated from the reproduce results in `results_dir`."""
    results_dir = Path(results_dir)
    tables = load_tables(results_dir)
    table_files = {f"{t['table']}.{ext}" for t in tables for ext in ("json", "md")}
    others = sorted(
        p.name
        for p in results_dir.iterdir()
        if p.is_file()
        and p.name != README
        and p.name not in table_files
        and not p.name.startswith(".")
    )
    lines = [
        "# Results",
        "",
        f"*Generated by `{GENERATOR}` (and by `attnmatch reproduce`) from `results/*.json`; do not "
        "edit. A table's commentary is the `summary` of `benchmarks/tables/<table>.toml`: edit it "
        f"there, then run `{GENERATOR} --sync-text`.*",
        "",
        "Every table is written by `attnmatch reproduce TABLE`: each row is trained once per seed, "
        "each run's epoch is selected on the dev split, and the test split is evaluated once with "
        "that model. Below, each row shows its main metric on test (the first of "
        + ", ".join(metric_label(m) for m in MAIN_METRICS)
        + " that it reports; mean ± sample std over seeds) beside the paper's number where the "
        "paper has one; `results/<table>.md` has every metric, the per-seed runs, the full "
        "protocol and the notes, and `results/<table>.json` the same for machines.",
        "",
        "*Runs trained at* is the commit each row's runs were trained at, from each run's own "
        "record (`commits` in the JSON, one per seed). A table reuses finished runs, so the "
        "commit that wrote the table (*table written at*) can be later. † marks commits "
        f"{RECOVERED} for tables written before runs recorded their own (their run folders are "
        "not committed): the table commit of the first committed version of "
        "`results/<table>.json` with exactly that row's per-seed numbers "
        "(`benchmarks/recover_provenance.py`); the runs were trained at that commit or earlier.",
        "",
    ]
    lines += [f"- [`{t['table']}`]({t['table']}.md): {t['title']}" for t in tables]
    lines.append("")
    for table in tables:
        lines += render_table_section(table)
    if others:
        lines += ["## Other files", ""]
        lines += [f"- [`{name}`]({name})" for name in others]
        lines.append("")
    return "\n".join(lines)


def write_results_readme(results_dir: str | Path) -> Path:
    """Writes `results_dir/README.md` from the JSON tables there; returns its path."""
    path = Path(results_dir) / README
    write_text_atomic(path, render_results_readme(results_dir))
    return path


def table_text(table_toml: dict[str, Any]) -> dict[str, Any]:
    """The text a table's TOML (parsed) gives its results: {"table": {...}, "rows": {id: {...}}},
    with the defaults of `attnmatch.research.reproduce.TableSpec` / `TableRow`."""
    return {
        "table": {
            "title": table_toml["title"],
            "paper": table_toml.get("paper", ""),
            "protocol": table_toml["protocol"],
            "notes": list(table_toml.get("notes", [])),
            "summary": table_toml.get("summary", ""),
        },
        "rows": {
            row["id"]: {
                "label": row["label"],
                "note": row.get("note", ""),
                "not_run": row.get("not_run", ""),
                "paper": dict(row.get("paper", {})),
            }
            for row in table_toml.get("rows", [])
        },
    }


def read_toml(path: str | Path) -> dict[str, Any]:
    return configs.load_toml(path)


def sync_text(table_path: str | Path, results_dir: str | Path) -> bool:
    """Copies a table's text (`table_text`: the TOML's own text, no results) from its TOML into
    results/<table>.json and re-renders results/<table>.md; no result value changes. Returns
    whether the JSON changed.

    Raises:
        ValueError: a row of the JSON is not in the TOML, or a row's not-run status differs
            (the table needs `attnmatch reproduce`, not a text sync).
    """
    data = read_toml(table_path)
    name = configs.check_name(data.get("table", ""), f"{table_path}: table")
    path = Path(results_dir) / f"{name}.json"
    result = json.loads(path.read_text(encoding="utf-8"))
    before = dumps_json(result, indent=2)
    text = table_text(data)
    result.update(text["table"])
    for row in result["rows"]:
        if row["id"] not in text["rows"]:
            raise ValueError(f"{path}: row {row['id']!r} is not in {table_path}")
        new = text["rows"][row["id"]]
        if bool(new["not_run"]) != bool(row.get("not_run")):
            raise ValueError(
                f"{path}: row {row['id']!r} is run in one of the table and the results and not "
                f"in the other: run `attnmatch reproduce {data['table']}`"
            )
        for key, value in new.items():
            if key == "not_run" and not value:
                continue  # rows that ran carry no not_run key
            row[key] = value
    after = dumps_json(result, indent=2)
    write_text_atomic(path, after + "\n")
    write_text_atomic(path.with_suffix(".md"), render_markdown(result, data["metrics"]))
    return after != before


def _tables_dir(results_dir: Path) -> Path:
    return results_dir.resolve().parent / "benchmarks" / "tables"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=GENERATOR, description="Regenerate results/README.md from results/*.json."
    )
    parser.add_argument("results_dir", nargs="?", default="results", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when README.md differs from the generated one"
    )
    parser.add_argument(
        "--sync-text",
        action="store_true",
        help="first copy every table's text from benchmarks/tables/<table>.toml into its JSON "
        "and re-render its .md (no result value changes)",
    )
    args = parser.parse_args(argv)
    results_dir: Path = args.results_dir
    if args.check:
        path = results_dir / README
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != render_results_readme(results_dir):
            print(f"{path} is stale: run `{GENERATOR}`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    if args.sync_text:
        tables_dir = _tables_dir(results_dir)
        for table in load_tables(results_dir):
            toml = tables_dir / f"{table['table']}.toml"
            if not toml.is_file():
                print(f"{table['table']}: no {toml}, text not synced", file=sys.stderr)
                continue
            changed = sync_text(toml, results_dir)
            print(
                f"{table['table']}: {'text updated' if changed else 'unchanged'}; .md re-rendered"
            )
    print(f"wrote {write_results_readme(results_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
